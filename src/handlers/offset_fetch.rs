//! OffsetFetch: a group's committed positions, exactly as committed (offset, leader epoch,
//! metadata); -1 where nothing was committed. v8 asks for several groups at once.

use super::{authorize, errors, Request, Response};
use crate::groups::coordinator::{CommittedOffsets as Committed, Fetched};
use crate::groups::{self, records::OffsetValue};
use crate::protocol::errors::ErrorCode;
use crate::security::acl::{Operation, ResourceType};
use crate::shard::Shard;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{ApiKey, OffsetFetchRequest, OffsetFetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeSet;

pub async fn handle(shard: &Shard, req: &Request, body: OffsetFetchRequest) -> Response {
    if req.version >= 8 {
        let mut groups_out = Vec::with_capacity(body.groups.len());
        for g in body.groups {
            let topics = g.topics.map(|ts| {
                ts.into_iter()
                    .map(|t| (t.name.to_string(), t.partition_indexes))
                    .collect()
            });
            let (code, committed, denied) = fetch(
                shard,
                req,
                g.group_id.to_string(),
                topics,
                body.require_stable,
            )
            .await;
            groups_out.push(
                OffsetFetchResponseGroup::default()
                    .with_group_id(g.group_id)
                    .with_error_code(code.code())
                    .with_topics(
                        committed
                            .into_iter()
                            .map(|(name, partitions)| {
                                let code = topic_code(&denied, &name);
                                OffsetFetchResponseTopics::default()
                                    .with_name(topic_name(name))
                                    .with_partitions(
                                        partitions
                                            .into_iter()
                                            .map(|(index, v)| {
                                                let (code, v) = stable(code, v);
                                                let (offset, epoch, metadata) = fields(v);
                                                OffsetFetchResponsePartitions::default()
                                                    .with_partition_index(index)
                                                    .with_committed_offset(offset)
                                                    .with_committed_leader_epoch(epoch)
                                                    .with_metadata(Some(metadata))
                                                    .with_error_code(code.code())
                                            })
                                            .collect(),
                                    )
                            })
                            .collect(),
                    ),
            );
        }
        return req.respond(
            ApiKey::OffsetFetch,
            &OffsetFetchResponse::default().with_groups(groups_out),
        );
    }
    let topics = body.topics.map(|ts| {
        ts.into_iter()
            .map(|t| (t.name.to_string(), t.partition_indexes))
            .collect()
    });
    let require_stable = req.version >= 7 && body.require_stable;
    let (code, committed, denied) = fetch(
        shard,
        req,
        body.group_id.to_string(),
        topics,
        require_stable,
    )
    .await;
    let topics = committed
        .into_iter()
        .map(|(name, partitions)| {
            let topic_code = topic_code(&denied, &name);
            OffsetFetchResponseTopic::default()
                .with_name(topic_name(name))
                .with_partitions(
                    partitions
                        .into_iter()
                        .map(|(index, v)| {
                            let (unstable, v) = stable(ErrorCode::NONE, v);
                            let (offset, epoch, metadata) = fields(v);
                            // Before v2 there is no top-level code: each partition carries it.
                            OffsetFetchResponsePartition::default()
                                .with_partition_index(index)
                                .with_committed_offset(offset)
                                .with_committed_leader_epoch(epoch)
                                .with_metadata(Some(metadata))
                                .with_error_code(if topic_code.is_error() {
                                    topic_code.code()
                                } else if unstable.is_error() {
                                    unstable.code()
                                } else if req.version < 2 {
                                    code.code()
                                } else {
                                    0
                                })
                        })
                        .collect(),
                )
        })
        .collect();
    req.respond(
        ApiKey::OffsetFetch,
        &OffsetFetchResponse::default()
            .with_topics(topics)
            .with_error_code(code.code()),
    )
}

/// TOPIC_AUTHORIZATION_FAILED for a topic the principal may not describe.
fn topic_code(denied: &BTreeSet<String>, topic: &str) -> ErrorCode {
    if denied.contains(topic) {
        ErrorCode::TOPIC_AUTHORIZATION_FAILED
    } else {
        ErrorCode::NONE
    }
}

/// The group's offsets, or a group-level error code with whatever was asked, unanswered;
/// and the asked topics the principal may not describe. Kafka: Describe on the group (else
/// GROUP_AUTHORIZATION_FAILED), then Describe on each topic: a denied topic asked by name is
/// answered TOPIC_AUTHORIZATION_FAILED, one among "all topics" is left out.
async fn fetch(
    shard: &Shard,
    req: &Request,
    group_id: String,
    topics: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
) -> (ErrorCode, Committed, BTreeSet<String>) {
    let (code, mut committed) =
        fetch_group(shard, req, group_id, topics.clone(), require_stable).await;
    let mut denied = BTreeSet::new();
    if code.is_error() {
        return (code, committed, denied);
    }
    match topics {
        Some(_) => {
            for (topic, _) in &committed {
                if !authorize::topic(shard, req, Operation::Describe, topic) {
                    denied.insert(topic.clone());
                }
            }
        }
        None => committed.retain(|(topic, _)| {
            authorize::allowed_quietly(shard, req, Operation::Describe, ResourceType::Topic, topic)
        }),
    }
    (code, committed, denied)
}

async fn fetch_group(
    shard: &Shard,
    req: &Request,
    group_id: String,
    topics: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
) -> (ErrorCode, Committed) {
    let unanswered = |topics: &Option<Vec<(String, Vec<i32>)>>| -> Committed {
        topics
            .iter()
            .flatten()
            .map(|(t, ps)| {
                (
                    t.clone(),
                    ps.iter().map(|p| (*p, Fetched::Committed(None))).collect(),
                )
            })
            .collect()
    };
    if !authorize::group(shard, req, Operation::Describe, &group_id) {
        return (ErrorCode::GROUP_AUTHORIZATION_FAILED, unanswered(&topics));
    }
    if group_id.is_empty() {
        errors::refused(
            shard,
            ApiKey::OffsetFetch,
            ErrorCode::INVALID_GROUP_ID,
            &"an empty group id",
        );
        return (ErrorCode::INVALID_GROUP_ID, unanswered(&topics));
    }
    let asked = topics.clone();
    let group = group_id.clone();
    match groups::on_coordinator(shard, &group_id, move |c, _| {
        Box::pin(async move { c.fetch(&group, asked, require_stable) })
    })
    .await
    {
        Ok(committed) => (ErrorCode::NONE, committed),
        Err(code) => {
            errors::refused(
                shard,
                ApiKey::OffsetFetch,
                code,
                &format_args!("group {group_id}"),
            );
            (code, unanswered(&topics))
        }
    }
}

fn topic_name(name: String) -> TopicName {
    TopicName(StrBytes::from_string(name))
}

/// A partition whose offset a transaction not yet ended holds, for a reader that asked for
/// stable offsets (v7+, `require_stable`): UNSTABLE_OFFSET_COMMIT and no offset, which the
/// client retries; otherwise `code` and the offset.
fn stable(code: ErrorCode, v: Fetched) -> (ErrorCode, Option<OffsetValue>) {
    match v {
        Fetched::Unstable => (ErrorCode::UNSTABLE_OFFSET_COMMIT, None),
        Fetched::Committed(v) => (code, v),
    }
}

/// (offset, leader epoch, metadata) as the response carries them; -1 when none.
fn fields(v: Option<OffsetValue>) -> (i64, i32, StrBytes) {
    match v {
        Some(v) => (v.offset, v.leader_epoch, StrBytes::from_string(v.metadata)),
        None => (-1, -1, StrBytes::default()),
    }
}
