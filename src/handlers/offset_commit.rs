//! OffsetCommit: stores a group's positions (offset, leader epoch, metadata) durably in
//! `__consumer_offsets`; one error code per partition.

use super::{errors, Request, Response};
use crate::groups::{self, CommitArgs, CommitOffset};
use crate::protocol::errors::ErrorCode;
use crate::shard::Shard;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ApiKey, OffsetCommitRequest, OffsetCommitResponse};

pub async fn handle(shard: &Shard, req: &Request, body: OffsetCommitRequest) -> Response {
    let group_id = body.group_id.to_string();
    let offsets: Vec<CommitOffset> = body
        .topics
        .iter()
        .flat_map(|t| {
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
    let codes: Vec<ErrorCode> = if group_id.is_empty() {
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
        .map(|t| {
            OffsetCommitResponseTopic::default()
                .with_name(t.name)
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(codes.next().unwrap_or(ErrorCode::NONE).code())
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
