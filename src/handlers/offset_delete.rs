//! OffsetDelete: removes a group's committed offsets for the asked partitions, as Kafka's
//! `handleOffsetDeleteRequest` and `GroupCoordinator.handleDeleteOffsets`. Partitions of
//! topics that do not exist are UNKNOWN_TOPIC_OR_PARTITION; the group's own answer
//! (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, NOT_COORDINATOR, ...) is the top-level error, and
//! then no partition of an existing topic is listed; partitions of topics the group's members
//! consume are GROUP_SUBSCRIBED_TO_TOPIC.

use super::{authorize, errors, Request, Response};
use crate::groups;
use crate::protocol::errors::ErrorCode;
use crate::security::acl::Operation;
use crate::shard::Shard;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{ApiKey, OffsetDeleteRequest, OffsetDeleteResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;

pub async fn handle(shard: &Shard, req: &Request, body: OffsetDeleteRequest) -> Response {
    let group_id = body.group_id.to_string();
    let metadata = shard.metadata();
    let mut answers: BTreeMap<String, Vec<(i32, ErrorCode)>> = BTreeMap::new();
    let mut asked = Vec::new();
    // Kafka: Delete on the group (below), Read on each topic, checked before existence.
    for t in &body.topics {
        let name = t.name.to_string();
        let readable = authorize::topic(shard, req, Operation::Read, &name);
        for p in &t.partitions {
            if !readable {
                answers
                    .entry(name.clone())
                    .or_default()
                    .push((p.partition_index, ErrorCode::TOPIC_AUTHORIZATION_FAILED));
            } else if metadata.partition(&name, p.partition_index).is_some() {
                asked.push((name.clone(), p.partition_index));
            } else {
                answers
                    .entry(name.clone())
                    .or_default()
                    .push((p.partition_index, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION));
            }
        }
    }
    drop(metadata);
    let group_error = if !authorize::group(shard, req, Operation::Delete, &group_id) {
        ErrorCode::GROUP_AUTHORIZATION_FAILED
    } else if group_id.is_empty() {
        ErrorCode::INVALID_GROUP_ID
    } else if asked.is_empty() {
        ErrorCode::NONE
    } else {
        let id = group_id.clone();
        let deleted = groups::on_coordinator(shard, &group_id, move |c, partition| {
            Box::pin(async move { c.delete_offsets(partition, &id, asked).await })
        })
        .await
        .and_then(|r| r);
        match deleted {
            Ok(partitions) => {
                for ((topic, index), code) in partitions {
                    answers.entry(topic).or_default().push((index, code));
                }
                ErrorCode::NONE
            }
            Err(code) => code,
        }
    };
    if group_error != ErrorCode::NONE {
        errors::refused(
            shard,
            ApiKey::OffsetDelete,
            group_error,
            &format_args!("group {group_id:?}"),
        );
    }
    let topics = answers
        .into_iter()
        .map(|(name, mut partitions)| {
            partitions.sort_by_key(|(i, _)| *i);
            OffsetDeleteResponseTopic::default()
                .with_name(TopicName(StrBytes::from_string(name)))
                .with_partitions(
                    partitions
                        .into_iter()
                        .map(|(i, code)| {
                            OffsetDeleteResponsePartition::default()
                                .with_partition_index(i)
                                .with_error_code(code.code())
                        })
                        .collect(),
                )
        })
        .collect();
    req.respond(
        ApiKey::OffsetDelete,
        &OffsetDeleteResponse::default()
            .with_error_code(group_error.code())
            .with_topics(topics),
    )
}
