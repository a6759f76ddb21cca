//! Kafka's record formats in `__consumer_offsets`, so committed offsets and group metadata are
//! stored as Kafka stores them.
//!
//! Keys (big-endian, strings as int16 length + bytes):
//! - offset commit, key version 1: group, topic, partition i32;
//! - group metadata, key version 2: group.
//!
//! Values: offset commit value version 3 (offset i64, leader epoch i32, metadata, commit
//! timestamp i64); group metadata value version 3 (protocol type, generation i32, protocol and
//! leader nullable, state timestamp i64, members). A null value is a tombstone. Versions 0–3
//! of both are read.

use bytes::{Buf, BufMut, Bytes, BytesMut};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Key {
    Offset {
        group: String,
        topic: String,
        partition: i32,
    },
    Group {
        group: String,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetValue {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberValue {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub subscription: Bytes,
    pub assignment: Bytes,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupValue {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub state_timestamp_ms: i64,
    pub members: Vec<MemberValue>,
}

/// A record that does not read as one of these formats.
#[derive(Debug, thiserror::Error)]
#[error("not a consumer offsets record: {0}")]
pub struct Malformed(&'static str);

fn put_string(out: &mut BytesMut, s: &str) {
    out.put_i16(s.len() as i16);
    out.put_slice(s.as_bytes());
}

fn put_nullable(out: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_string(out, s),
        None => out.put_i16(-1),
    }
}

fn put_bytes(out: &mut BytesMut, b: &[u8]) {
    out.put_i32(b.len() as i32);
    out.put_slice(b);
}

struct Reader(Bytes);

impl Reader {
    fn need(&self, n: usize) -> Result<(), Malformed> {
        if self.0.remaining() < n {
            Err(Malformed("truncated"))
        } else {
            Ok(())
        }
    }
    fn i16(&mut self) -> Result<i16, Malformed> {
        self.need(2)?;
        Ok(self.0.get_i16())
    }
    fn i32(&mut self) -> Result<i32, Malformed> {
        self.need(4)?;
        Ok(self.0.get_i32())
    }
    fn i64(&mut self) -> Result<i64, Malformed> {
        self.need(8)?;
        Ok(self.0.get_i64())
    }
    fn nullable(&mut self) -> Result<Option<String>, Malformed> {
        let len = self.i16()?;
        if len < 0 {
            return Ok(None);
        }
        self.need(len as usize)?;
        let b = self.0.split_to(len as usize);
        String::from_utf8(b.to_vec())
            .map(Some)
            .map_err(|_| Malformed("string is not UTF-8"))
    }
    fn string(&mut self) -> Result<String, Malformed> {
        self.nullable()?.ok_or(Malformed("null string"))
    }
    fn bytes(&mut self) -> Result<Bytes, Malformed> {
        let len = self.i32()?;
        if len < 0 {
            return Ok(Bytes::new());
        }
        self.need(len as usize)?;
        Ok(self.0.split_to(len as usize))
    }
}

impl Key {
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::new();
        match self {
            Key::Offset {
                group,
                topic,
                partition,
            } => {
                out.put_i16(1);
                put_string(&mut out, group);
                put_string(&mut out, topic);
                out.put_i32(*partition);
            }
            Key::Group { group } => {
                out.put_i16(2);
                put_string(&mut out, group);
            }
        }
        out.freeze()
    }

    pub fn decode(bytes: Bytes) -> Result<Key, Malformed> {
        let mut r = Reader(bytes);
        match r.i16()? {
            0 | 1 => Ok(Key::Offset {
                group: r.string()?,
                topic: r.string()?,
                partition: r.i32()?,
            }),
            2 => Ok(Key::Group { group: r.string()? }),
            _ => Err(Malformed("unknown key version")),
        }
    }
}

impl OffsetValue {
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::new();
        out.put_i16(3);
        out.put_i64(self.offset);
        out.put_i32(self.leader_epoch);
        put_string(&mut out, &self.metadata);
        out.put_i64(self.commit_timestamp_ms);
        out.freeze()
    }

    pub fn decode(bytes: Bytes) -> Result<OffsetValue, Malformed> {
        let mut r = Reader(bytes);
        let version = r.i16()?;
        let offset = r.i64()?;
        let leader_epoch = if version >= 3 { r.i32()? } else { -1 };
        let metadata = r.nullable()?.unwrap_or_default();
        let commit_timestamp_ms = r.i64()?;
        if version == 1 {
            r.i64()?; // expire timestamp, no longer used
        }
        if version > 3 {
            return Err(Malformed("unknown offset value version"));
        }
        Ok(OffsetValue {
            offset,
            leader_epoch,
            metadata,
            commit_timestamp_ms,
        })
    }
}

impl GroupValue {
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::new();
        out.put_i16(3);
        put_string(&mut out, &self.protocol_type);
        out.put_i32(self.generation);
        put_nullable(&mut out, self.protocol.as_deref());
        put_nullable(&mut out, self.leader.as_deref());
        out.put_i64(self.state_timestamp_ms);
        out.put_i32(self.members.len() as i32);
        for m in &self.members {
            put_string(&mut out, &m.member_id);
            put_nullable(&mut out, m.group_instance_id.as_deref());
            put_string(&mut out, &m.client_id);
            put_string(&mut out, &m.client_host);
            out.put_i32(m.rebalance_timeout_ms);
            out.put_i32(m.session_timeout_ms);
            put_bytes(&mut out, &m.subscription);
            put_bytes(&mut out, &m.assignment);
        }
        out.freeze()
    }

    pub fn decode(bytes: Bytes) -> Result<GroupValue, Malformed> {
        let mut r = Reader(bytes);
        let version = r.i16()?;
        if version > 3 {
            return Err(Malformed("unknown group value version"));
        }
        let protocol_type = r.string()?;
        let generation = r.i32()?;
        let protocol = r.nullable()?;
        let leader = r.nullable()?;
        let state_timestamp_ms = if version >= 2 { r.i64()? } else { -1 };
        let count = r.i32()?.max(0) as usize;
        let mut members = Vec::with_capacity(count.min(1024));
        for _ in 0..count {
            let member_id = r.string()?;
            let group_instance_id = if version >= 3 { r.nullable()? } else { None };
            let client_id = r.string()?;
            let client_host = r.string()?;
            let rebalance_timeout_ms = if version >= 1 { r.i32()? } else { -1 };
            let session_timeout_ms = r.i32()?;
            members.push(MemberValue {
                member_id,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                subscription: r.bytes()?,
                assignment: r.bytes()?,
            });
        }
        Ok(GroupValue {
            protocol_type,
            generation,
            protocol,
            leader,
            state_timestamp_ms,
            members,
        })
    }
}

/// Kafka's coordinator partition for a group: `abs(groupId.hashCode()) % partitions`, with
/// Java's String.hashCode over UTF-16 code units.
pub fn coordinator_partition(group: &str, partitions: i32) -> i32 {
    let mut h: i32 = 0;
    for unit in group.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(unit as i32);
    }
    // Kafka's Utils.abs maps i32::MIN to 0.
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % partitions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_round_trip() {
        let k = Key::Offset {
            group: "g".into(),
            topic: "t".into(),
            partition: 3,
        };
        assert_eq!(Key::decode(k.encode()).unwrap(), k);
        let g = Key::Group { group: "g".into() };
        assert_eq!(Key::decode(g.encode()).unwrap(), g);
        let v = OffsetValue {
            offset: 42,
            leader_epoch: 5,
            metadata: "meta".into(),
            commit_timestamp_ms: 1000,
        };
        assert_eq!(OffsetValue::decode(v.encode()).unwrap(), v);
        let gv = GroupValue {
            protocol_type: "consumer".into(),
            generation: 7,
            protocol: Some("range".into()),
            leader: Some("m-1".into()),
            state_timestamp_ms: 99,
            members: vec![MemberValue {
                member_id: "m-1".into(),
                group_instance_id: Some("i-1".into()),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 300_000,
                session_timeout_ms: 45_000,
                subscription: Bytes::from_static(b"sub"),
                assignment: Bytes::from_static(b"asg"),
            }],
        };
        assert_eq!(GroupValue::decode(gv.encode()).unwrap(), gv);
        assert!(Key::decode(Bytes::from_static(&[0, 9])).is_err());
    }

    #[test]
    fn coordinator_partitions_match_java_string_hash_code() {
        // Java: "abc".hashCode() == 96354.
        assert_eq!(coordinator_partition("abc", 50), 96354 % 50);
        assert_eq!(coordinator_partition("", 50), 0);
        let h = coordinator_partition("a-very-long-consumer-group-name-that-overflows", 50);
        assert!((0..50).contains(&h));
    }
}
