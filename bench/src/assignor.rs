//! The consumer protocol's payloads inside JoinGroup and SyncGroup, and the assignor a group's
//! leader runs: ConsumerProtocolSubscription and ConsumerProtocolAssignment, each written after
//! an i16 version as Kafka's clients do, and the topic's partitions dealt round-robin over the
//! members sorted by member id (what Kafka's `roundrobin` assignor does for one topic).

use anyhow::{bail, Result};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use std::collections::BTreeMap;

/// The protocol name this member offers in JoinGroup.
pub const NAME: &str = "roundrobin";
/// The version of the payloads this member writes.
const VERSION: i16 = 0;
/// The newest version the codec reads; a newer payload only appends fields, so it is read as
/// this one.
const VERSION_READ_MAX: i16 = 3;

fn versioned(message: &impl Encodable) -> Result<Bytes> {
    let mut buf = BytesMut::with_capacity(2 + message.compute_size(VERSION)?);
    buf.put_i16(VERSION);
    message.encode(&mut buf, VERSION)?;
    Ok(buf.freeze())
}

fn decode_versioned<M: Decodable>(payload: &Bytes) -> Result<M> {
    let mut buf = payload.clone();
    if buf.remaining() < 2 {
        bail!("a consumer protocol payload of {} bytes", payload.len());
    }
    let version = buf.get_i16();
    if version < 0 {
        bail!("consumer protocol version {version}");
    }
    M::decode(&mut buf, version.min(VERSION_READ_MAX))
}

/// A member's JoinGroup metadata: it subscribes to `topic`.
pub fn subscription(topic: &str) -> Result<Bytes> {
    versioned(
        &ConsumerProtocolSubscription::default()
            .with_topics(vec![StrBytes::from_string(topic.to_string())]),
    )
}

/// Whether a member's JoinGroup metadata subscribes to `topic` (not when it cannot be read).
fn subscribes(metadata: &Bytes, topic: &str) -> bool {
    decode_versioned::<ConsumerProtocolSubscription>(metadata)
        .is_ok_and(|s| s.topics.iter().any(|t| t.as_str() == topic))
}

/// A SyncGroup assignment of `partitions` of `topic`.
pub fn assignment(topic: &str, partitions: &[i32]) -> Result<Bytes> {
    let assigned = if partitions.is_empty() {
        Vec::new()
    } else {
        vec![TopicPartition::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(partitions.to_vec())]
    };
    versioned(&ConsumerProtocolAssignment::default().with_assigned_partitions(assigned))
}

/// The partitions of `topic` in a SyncGroup assignment, sorted; none in an empty one.
pub fn assigned(payload: &Bytes, topic: &str) -> Result<Vec<i32>> {
    if payload.is_empty() {
        return Ok(Vec::new());
    }
    let a: ConsumerProtocolAssignment = decode_versioned(payload)?;
    let mut partitions: Vec<i32> = a
        .assigned_partitions
        .iter()
        .filter(|tp| tp.topic.0.as_str() == topic)
        .flat_map(|tp| tp.partitions.iter().copied())
        .collect();
    partitions.sort_unstable();
    partitions.dedup();
    Ok(partitions)
}

/// The leader's assignment: `topic`'s partitions in order, dealt in turn to the members that
/// subscribe to it, sorted by member id. Every member (`(id, metadata)` from JoinGroup) gets
/// an entry, empty when it gets nothing.
pub fn assign(
    topic: &str,
    partitions: &[i32],
    members: &[(String, Bytes)],
) -> Result<Vec<(String, Bytes)>> {
    let mut shares: BTreeMap<&str, Vec<i32>> = members
        .iter()
        .map(|(id, _)| (id.as_str(), Vec::new()))
        .collect();
    let mut takers: Vec<&str> = members
        .iter()
        .filter(|(_, metadata)| subscribes(metadata, topic))
        .map(|(id, _)| id.as_str())
        .collect();
    takers.sort_unstable();
    takers.dedup();
    let mut sorted = partitions.to_vec();
    sorted.sort_unstable();
    if !takers.is_empty() {
        for (i, p) in sorted.into_iter().enumerate() {
            let taker = takers[i % takers.len()];
            shares
                .get_mut(taker)
                .expect("every member has a share")
                .push(p);
        }
    }
    shares
        .into_iter()
        .map(|(id, share)| Ok((id.to_string(), assignment(topic, &share)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscription_is_the_version_then_topics_then_null_user_data() {
        let s = subscription("tp").unwrap();
        let expected: &[u8] = &[
            0, 0, // version 0
            0, 0, 0, 1, // one topic
            0, 2, b't', b'p', // "tp"
            0xff, 0xff, 0xff, 0xff, // user_data: null
        ];
        assert_eq!(&s[..], expected);
        assert!(subscribes(&s, "tp"));
        assert!(!subscribes(&s, "other"));
        assert!(!subscribes(&Bytes::from_static(&[0]), "tp"));
    }

    #[test]
    fn assignment_is_the_version_then_topic_partitions_then_null_user_data() {
        let a = assignment("tp", &[3, 1]).unwrap();
        let expected: &[u8] = &[
            0, 0, // version 0
            0, 0, 0, 1, // one topic
            0, 2, b't', b'p', // "tp"
            0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 1, // partitions [3, 1]
            0xff, 0xff, 0xff, 0xff, // user_data: null
        ];
        assert_eq!(&a[..], expected);
        assert_eq!(assigned(&a, "tp").unwrap(), vec![1, 3]);
        assert!(assigned(&a, "other").unwrap().is_empty());
        assert!(assigned(&Bytes::new(), "tp").unwrap().is_empty());
        assert!(assigned(&Bytes::from_static(&[0, 0, 0]), "tp").is_err());
    }

    #[test]
    fn a_newer_version_is_read_for_the_fields_it_shares() {
        let mut buf = BytesMut::new();
        buf.put_i16(4);
        ConsumerProtocolSubscription::default()
            .with_topics(vec![StrBytes::from_static_str("tp")])
            .encode(&mut buf, 3)
            .unwrap();
        assert!(subscribes(&buf.freeze(), "tp"));
    }

    #[test]
    fn partitions_go_round_robin_over_members_sorted_by_id() {
        let sub = subscription("tp").unwrap();
        let other = subscription("elsewhere").unwrap();
        let members = vec![
            ("b".to_string(), sub.clone()),
            ("c".to_string(), sub.clone()),
            ("a".to_string(), sub),
            ("d".to_string(), other),
        ];
        let out = assign("tp", &[4, 0, 2, 1, 3], &members).unwrap();
        let got: BTreeMap<String, Vec<i32>> = out
            .iter()
            .map(|(id, a)| (id.clone(), assigned(a, "tp").unwrap()))
            .collect();
        assert_eq!(got["a"], vec![0, 3]);
        assert_eq!(got["b"], vec![1, 4]);
        assert_eq!(got["c"], vec![2]);
        assert!(got["d"].is_empty(), "d does not subscribe to tp");
        assert_eq!(got.len(), 4);
    }
}
