//! ElectLeaders (v0–2; v1+ choose PREFERRED or UNCLEAN), as Kafka's `handleElectLeaders` and
//! the ZooKeeper controller's elections answer it, per partition:
//! - PREFERRED: ELECTION_NOT_NEEDED when the preferred replica (the first) leads already;
//!   PREFERRED_LEADER_NOT_AVAILABLE when it is not alive or not in the ISR; else leadership
//!   moves to it.
//! - UNCLEAN: ELECTION_NOT_NEEDED while a live leader exists; ELIGIBLE_LEADERS_NOT_AVAILABLE
//!   with no live replica; else the first live replica leads (what only the old ISR had is
//!   lost).
//! - Unknown partitions are UNKNOWN_TOPIC_OR_PARTITION; an election not seen done within
//!   `timeout_ms` is REQUEST_TIMED_OUT. Asking for every partition (null) lists only those an
//!   election was tried for, as Kafka drops ELECTION_NOT_NEEDED then.
//!
//! Kafka answers only on the controller (NOT_CONTROLLER elsewhere); any Ferrite broker takes the
//! request and the elected controller carries it out (`cluster/duties.rs`).

use super::{authorize, errors, Request, Response};
use crate::controller;
use crate::metadata::{ClusterMetadata, PartitionInfo};
use crate::protocol::errors::ErrorCode;
use crate::security::acl::Operation;
use crate::shard::Shard;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ApiKey, ElectLeadersRequest, ElectLeadersResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const PREFERRED: i8 = 0;
const UNCLEAN: i8 = 1;
/// The longest an ElectLeaders waits, whatever `timeout_ms` asks.
const MAX_WAIT: Duration = Duration::from_secs(60);

pub async fn handle(shard: &Shard, req: &Request, body: ElectLeadersRequest) -> Response {
    // Kafka: Alter on the cluster.
    if !authorize::cluster(shard, req, Operation::Alter) {
        let denied = ElectLeadersResponse::default()
            .with_error_code(ErrorCode::CLUSTER_AUTHORIZATION_FAILED.code());
        return req.respond(ApiKey::ElectLeaders, &denied);
    }
    let election = if req.version >= 1 {
        body.election_type
    } else {
        PREFERRED
    };
    if election != PREFERRED && election != UNCLEAN {
        let code = ErrorCode::INVALID_REQUEST;
        errors::refused(
            shard,
            ApiKey::ElectLeaders,
            code,
            &format_args!("election type {election}"),
        );
        return req.respond(
            ApiKey::ElectLeaders,
            &ElectLeadersResponse::default().with_error_code(code.code()),
        );
    }
    let unclean = election == UNCLEAN;
    let every_partition = body.topic_partitions.is_none();
    let metadata = shard.metadata();
    let asked: Vec<(String, i32)> = match body.topic_partitions {
        None => metadata
            .topics
            .values()
            .flat_map(|t| t.partitions.iter().map(|p| (t.name.clone(), p.index)))
            .collect(),
        Some(list) => list
            .into_iter()
            .flat_map(|t| {
                let name = t.topic.to_string();
                t.partitions.into_iter().map(move |p| (name.clone(), p))
            })
            .collect(),
    };
    let mut outcomes: BTreeMap<(String, i32), ErrorCode> = BTreeMap::new();
    let mut pending = Vec::new();
    for (topic, index) in asked {
        let code = match metadata.partition(&topic, index) {
            None => ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            Some(p) => match precheck(&metadata, p, unclean) {
                Some(code) => code,
                None => {
                    pending.push((topic.clone(), index));
                    ErrorCode::NONE
                }
            },
        };
        outcomes.insert((topic, index), code);
    }
    drop(metadata);
    if !pending.is_empty() {
        let waited = elect(shard, pending.clone(), unclean, body.timeout_ms).await;
        for tp in pending {
            let code = match &waited {
                Err(code) => *code,
                Ok(done) if done.contains(&tp) => ErrorCode::NONE,
                Ok(_) => ErrorCode::REQUEST_TIMED_OUT,
            };
            outcomes.insert(tp, code);
        }
    }
    let mut by_topic: BTreeMap<String, Vec<PartitionResult>> = BTreeMap::new();
    for ((topic, index), code) in outcomes {
        if every_partition && code == ErrorCode::ELECTION_NOT_NEEDED {
            continue;
        }
        if code != ErrorCode::NONE {
            errors::refused(
                shard,
                ApiKey::ElectLeaders,
                code,
                &format_args!("{topic}-{index}"),
            );
        }
        by_topic.entry(topic).or_default().push(
            PartitionResult::default()
                .with_partition_id(index)
                .with_error_code(code.code())
                .with_error_message(None),
        );
    }
    let results = by_topic
        .into_iter()
        .map(|(topic, partitions)| {
            ReplicaElectionResult::default()
                .with_topic(TopicName(StrBytes::from_string(topic)))
                .with_partition_result(partitions)
        })
        .collect();
    req.respond(
        ApiKey::ElectLeaders,
        &ElectLeadersResponse::default().with_replica_election_results(results),
    )
}

/// The answer without an election, if there is one.
fn precheck(metadata: &ClusterMetadata, p: &PartitionInfo, unclean: bool) -> Option<ErrorCode> {
    let live = |id: &i32| metadata.brokers.iter().any(|b| b.node_id == *id);
    if unclean {
        if p.leader >= 0 && live(&p.leader) {
            return Some(ErrorCode::ELECTION_NOT_NEEDED);
        }
        return (!p.replicas.iter().any(live)).then_some(ErrorCode::ELIGIBLE_LEADERS_NOT_AVAILABLE);
    }
    let preferred = *p.replicas.first()?;
    if p.leader == preferred {
        return Some(ErrorCode::ELECTION_NOT_NEEDED);
    }
    if !live(&preferred) || !p.isr.contains(&preferred) {
        return Some(ErrorCode::PREFERRED_LEADER_NOT_AVAILABLE);
    }
    None
}

/// Asks for the elections and waits (at most `timeout_ms`) until this broker's view shows
/// them done; returns the partitions seen done.
async fn elect(
    shard: &Shard,
    pending: Vec<(String, i32)>,
    unclean: bool,
    timeout_ms: i32,
) -> Result<Vec<(String, i32)>, ErrorCode> {
    controller::elect_leaders(shard, pending.clone(), unclean)
        .await
        .map_err(|e| e.code())?;
    let wait = Duration::from_millis(timeout_ms.max(0) as u64).min(MAX_WAIT);
    let deadline = Instant::now() + wait;
    loop {
        let metadata = shard.metadata();
        let done: Vec<(String, i32)> = pending
            .iter()
            .filter(|(t, i)| {
                metadata.partition(t, *i).is_some_and(|p| {
                    if unclean {
                        p.leader >= 0
                    } else {
                        p.replicas.first() == Some(&p.leader)
                    }
                })
            })
            .cloned()
            .collect();
        if done.len() == pending.len() || Instant::now() >= deadline {
            return Ok(done);
        }
        drop(metadata);
        glommio::timer::sleep(Duration::from_millis(20)).await;
    }
}
