//! OffsetCommit: stores a group's positions (offset, leader epoch, metadata) durably in
//! `__consumer_offsets`; one error code per partition.

use super::{authorize, errors, Request, Response};
use crate::groups::{self, CommitArgs, CommitOffset};
use crate::protocol::errors::ErrorCode;
use crate::security::acl::Operation;
use crate::shard::Shard;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ApiKey, OffsetCommitRequest, OffsetCommitResponse};

pub async fn handle(shard: &Shard, req: &Request, body: OffsetCommitRequest) -> Response {
    let group_id = body.group_id.to_string();
    // Kafka: Read on the group (else every partition GROUP_AUTHORIZATION_FAILED), then Read
    // on each topic (a denied topic's partitions TOPIC_AUTHORIZATION_FAILED, not committed).
    let group_allowed = authorize::group(shard, req, Operation::Read, &group_id);
    let topic_allowed: Vec<bool> = body
        .topics
        .iter()
        .map(|t| !group_allowed || authorize::topic(shard, req, Operation::Read, t.name.as_str()))
        .collect();
    let offsets: Vec<CommitOffset> = body
        .topics
        .iter()
        .zip(&topic_allowed)
        .filter(|(_, allowed)| **allowed)
        .flat_map(|(t, _)| {
            t.partitions.iter().map(|p| CommitOffset {
                topic: t.name.to_string(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: p.committed_leader_epoch,
                metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
            })
        })
        .collect();
    let count = offsets.len();
    let codes: Vec<ErrorCode> = if !group_allowed {
        vec![ErrorCode::GROUP_AUTHORIZATION_FAILED; count]
    } else if group_id.is_empty() {
        vec![ErrorCode::INVALID_GROUP_ID; count]
    } else {
        let args = CommitArgs {
            group_id: group_id.clone(),
            generation: body.generation_id_or_member_epoch,
            member_id: body.member_id.to_string(),
            instance_id: body.group_instance_id.map(|i| i.to_string()),
            offsets,
        };
        groups::on_coordinator(shard, &group_id, move |c, partition| {
            Box::pin(async move { c.commit(partition, args).await })
        })
        .await
        .unwrap_or_else(|code| vec![code; count])
    };
    for &code in &codes {
        errors::refused(
            shard,
            ApiKey::OffsetCommit,
            code,
            &format_args!("group {group_id}"),
        );
    }
    let mut codes = codes.into_iter();
    let topics = body
        .topics
        .into_iter()
        .zip(topic_allowed)
        .map(|(t, allowed)| {
            OffsetCommitResponseTopic::default()
                .with_name(t.name)
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            let code = if allowed {
                                codes.next().unwrap_or(ErrorCode::NONE)
                            } else {
                                ErrorCode::TOPIC_AUTHORIZATION_FAILED
                            };
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code.code())
                        })
                        .collect(),
                )
        })
        .collect();
    req.respond(
        ApiKey::OffsetCommit,
        &OffsetCommitResponse::default().with_topics(topics),
    )
}
