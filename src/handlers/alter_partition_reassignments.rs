//! AlterPartitionReassignments (v0) and ListPartitionReassignments (v0), as Kafka's ZooKeeper
//! controller answers them (`KafkaController.processApiPartitionReassignment`, KIP-455):
//! - per partition: an unknown one is UNKNOWN_TOPIC_OR_PARTITION; a target that is empty, names
//!   a broker twice or a negative id, or adds a broker that is not alive is
//!   INVALID_REPLICA_ASSIGNMENT; a cancel (null replicas) with no reassignment in progress is
//!   NO_REASSIGNMENT_IN_PROGRESS. Each accepted one is started (or replaces the one in
//!   progress) and answered at once; the elected controller carries it out (`cluster/duties.rs`).
//! - List: the partitions being reassigned (all, or those asked for; others are left out), with
//!   their replicas, adding_replicas and removing_replicas.
//!
//! Kafka takes these only on the controller (NOT_CONTROLLER elsewhere); any Ferrite broker
//! writes the reassignment to ZooKeeper for the controller. A single broker is its own only
//! live broker: a target of itself changes nothing, any other is INVALID_REPLICA_ASSIGNMENT.

use super::{authorize, errors, Request, Response};
use crate::controller::{self, TopicError};
use crate::metadata::ClusterMetadata;
use crate::protocol::errors::ErrorCode;
use crate::security::acl::Operation;
use crate::shard::routing::on_controller;
use crate::shard::Shard;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ApiKey, BrokerId,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;

type Outcome = Result<(), (ErrorCode, String)>;

pub async fn handle_alter(
    shard: &Shard,
    req: &Request,
    body: AlterPartitionReassignmentsRequest,
) -> Response {
    // Kafka: Alter on the cluster.
    if !authorize::cluster(shard, req, Operation::Alter) {
        let denied = AlterPartitionReassignmentsResponse::default()
            .with_error_code(ErrorCode::CLUSTER_AUTHORIZATION_FAILED.code())
            .with_error_message(Some(StrBytes::from_static_str(
                "Cluster authorization failed.",
            )));
        return req.respond(ApiKey::AlterPartitionReassignments, &denied);
    }
    let metadata = shard.metadata();
    let mut responses = Vec::with_capacity(body.topics.len());
    for topic in body.topics {
        let name = topic.name.to_string();
        // A partition named twice is asked once, the last time (Kafka builds a map of them
        // and answers each partition once).
        let asked: BTreeMap<i32, Option<Vec<i32>>> = topic
            .partitions
            .iter()
            .map(|p| {
                let target = p.replicas.as_ref().map(|r| r.iter().map(|b| b.0).collect());
                (p.partition_index, target)
            })
            .collect();
        let mut outcomes: BTreeMap<i32, Outcome> = BTreeMap::new();
        let mut accepted = Vec::new();
        for (&index, target) in &asked {
            match checked(&metadata, &name, index, target.as_deref()) {
                Ok(()) => accepted.push((index, target.clone())),
                Err(e) => {
                    outcomes.insert(index, Err(e));
                }
            }
        }
        if !accepted.is_empty() {
            let topic_name = name.clone();
            let asked = accepted.clone();
            let started = on_controller(shard, move |s| async move {
                controller::reassign_partitions(&s, &topic_name, asked).await
            })
            .await
            .unwrap_or(Err(TopicError::Storage(
                "the controller did not answer".into(),
            )));
            match started {
                Ok(results) => {
                    for (p, did) in results {
                        let outcome = if did {
                            Ok(())
                        } else {
                            Err((
                                ErrorCode::NO_REASSIGNMENT_IN_PROGRESS,
                                "No reassignment is in progress for this partition.".into(),
                            ))
                        };
                        outcomes.insert(p, outcome);
                    }
                }
                Err(e) => {
                    for (p, _) in &accepted {
                        outcomes.insert(*p, Err((e.code(), e.to_string())));
                    }
                }
            }
        }
        let partitions = asked
            .keys()
            .map(|&index| {
                let outcome = outcomes.remove(&index).unwrap_or(Ok(()));
                let (code, message) = match outcome {
                    Ok(()) => (0, None),
                    Err((code, message)) => {
                        errors::refused(
                            shard,
                            ApiKey::AlterPartitionReassignments,
                            code,
                            &format_args!("{name}-{index}: {message}"),
                        );
                        (code.code(), Some(StrBytes::from_string(message)))
                    }
                };
                ReassignablePartitionResponse::default()
                    .with_partition_index(index)
                    .with_error_code(code)
                    .with_error_message(message)
            })
            .collect();
        responses.push(
            ReassignableTopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions),
        );
    }
    req.respond(
        ApiKey::AlterPartitionReassignments,
        &AlterPartitionReassignmentsResponse::default().with_responses(responses),
    )
}

/// Kafka's `validateReplicas`, against this broker's view of the cluster.
fn checked(
    metadata: &ClusterMetadata,
    topic: &str,
    partition: i32,
    target: Option<&[i32]>,
) -> Outcome {
    let Some(info) = metadata.partition(topic, partition) else {
        return Err((
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            "The partition does not exist.".into(),
        ));
    };
    let Some(target) = target else {
        return Ok(());
    };
    let invalid = |message: String| Err((ErrorCode::INVALID_REPLICA_ASSIGNMENT, message));
    if target.is_empty() {
        return invalid("Empty replica list specified in partition reassignment.".into());
    }
    let mut distinct = target.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() != target.len() {
        return invalid(format!(
            "Duplicate replica ids in partition reassignment replica list: {target:?}"
        ));
    }
    if target.iter().any(|&b| b < 0) {
        return invalid(format!("Invalid broker id in replica list: {target:?}"));
    }
    let adding_now = metadata
        .reassignments
        .get(&(topic.to_string(), partition))
        .map(|r| r.adding.clone())
        .unwrap_or_default();
    let original: Vec<i32> = info
        .replicas
        .iter()
        .copied()
        .filter(|r| !adding_now.contains(r))
        .collect();
    let live: Vec<i32> = metadata.brokers.iter().map(|b| b.node_id).collect();
    let adding: Vec<i32> = target
        .iter()
        .copied()
        .filter(|b| !original.contains(b))
        .collect();
    if adding.iter().any(|b| !live.contains(b)) {
        return invalid(format!(
            "Replica assignment has brokers that are not alive. Replica list: {adding:?}, live broker list: {live:?}"
        ));
    }
    Ok(())
}

pub fn handle_list(
    shard: &Shard,
    req: &Request,
    body: ListPartitionReassignmentsRequest,
) -> Response {
    // Kafka: Describe on the cluster.
    if !authorize::cluster(shard, req, Operation::Describe) {
        let denied = ListPartitionReassignmentsResponse::default()
            .with_error_code(ErrorCode::CLUSTER_AUTHORIZATION_FAILED.code())
            .with_error_message(Some(StrBytes::from_static_str(
                "Cluster authorization failed.",
            )));
        return req.respond(ApiKey::ListPartitionReassignments, &denied);
    }
    let metadata = shard.metadata();
    let asked = |topic: &str, p: i32| match &body.topics {
        None => true,
        Some(topics) => topics
            .iter()
            .any(|t| t.name.as_str() == topic && t.partition_indexes.contains(&p)),
    };
    let mut topics: BTreeMap<&str, Vec<OngoingPartitionReassignment>> = BTreeMap::new();
    for ((topic, p), moving) in &metadata.reassignments {
        let (Some(info), true) = (metadata.partition(topic, *p), asked(topic, *p)) else {
            continue;
        };
        let ids = |v: &[i32]| v.iter().map(|&b| BrokerId(b)).collect::<Vec<_>>();
        topics.entry(topic).or_default().push(
            OngoingPartitionReassignment::default()
                .with_partition_index(*p)
                .with_replicas(ids(&info.replicas))
                .with_adding_replicas(ids(&moving.adding))
                .with_removing_replicas(ids(&moving.removing)),
        );
    }
    let topics = topics
        .into_iter()
        .map(|(name, partitions)| {
            OngoingTopicReassignment::default()
                .with_name(StrBytes::from_string(name.to_string()).into())
                .with_partitions(partitions)
        })
        .collect();
    req.respond(
        ApiKey::ListPartitionReassignments,
        &ListPartitionReassignmentsResponse::default().with_topics(topics),
    )
}
