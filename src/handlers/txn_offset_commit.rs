//! TxnOffsetCommit: a transactional producer commits a group's offsets inside its transaction
//! (KafkaApis.handleTxnOffsetCommitRequest, GroupCoordinator.handleTxnCommitOffsets). They are
//! stored at once and count when the transaction commits.
//!
//! Checks in Kafka's order: Write on the transactional id, Read on the group, Read on each
//! topic, each partition's existence; then KIP-890's verification that the group's partition
//! is in the transaction (AddOffsetsToTxn put it there), then the group coordinator.

use super::{authorize, errors, Request, Response};
use crate::groups::{self, CommitArgs, CommitOffset, TxnCommitArgs};
use crate::metadata::CONSUMER_OFFSETS_TOPIC;
use crate::protocol::errors::ErrorCode;
use crate::security::acl::Operation;
use crate::shard::Shard;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ApiKey, TxnOffsetCommitRequest, TxnOffsetCommitResponse};

/// TRANSACTION_ABORTABLE is answered from this version; INVALID_TXN_STATE before.
const ABORTABLE_FROM: i16 = 4;

pub async fn handle(shard: &Shard, req: &Request, body: TxnOffsetCommitRequest) -> Response {
    let id = body.transactional_id.to_string();
    let group_id = body.group_id.to_string();
    let whole = if !authorize::transactional_id(shard, req, Operation::Write, &id) {
        Some(ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    } else if !authorize::group(shard, req, Operation::Read, &group_id) {
        Some(ErrorCode::GROUP_AUTHORIZATION_FAILED)
    } else {
        None
    };
    let topic_allowed: Vec<bool> = body
        .topics
        .iter()
        .map(|t| authorize::topic(shard, req, Operation::Read, t.name.as_str()))
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
    let codes = match whole {
        Some(code) => vec![code; count],
        None if count == 0 => Vec::new(),
        None => {
            let args = TxnCommitArgs {
                commit: CommitArgs {
                    group_id: group_id.clone(),
                    generation: body.generation_id,
                    member_id: body.member_id.to_string(),
                    instance_id: body.group_instance_id.map(|i| i.to_string()),
                    offsets,
                },
                producer_id: body.producer_id.0,
                producer_epoch: body.producer_epoch,
                guard: None,
            };
            commit(shard, req.version, &id, args)
                .await
                .unwrap_or_else(|code| vec![code; count])
        }
    };
    for &code in &codes {
        errors::refused(
            shard,
            ApiKey::TxnOffsetCommit,
            code,
            &format_args!("transactional id {id}, group {group_id}"),
        );
    }
    let mut codes = codes.into_iter();
    let topics = body
        .topics
        .into_iter()
        .zip(topic_allowed)
        .map(|(t, allowed)| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let code = match whole {
                        Some(code) => code,
                        None if allowed => codes.next().unwrap_or(ErrorCode::NONE),
                        None => ErrorCode::TOPIC_AUTHORIZATION_FAILED,
                    };
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code.code())
                })
                .collect();
            TxnOffsetCommitResponseTopic::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    req.respond(
        ApiKey::TxnOffsetCommit,
        &TxnOffsetCommitResponse::default().with_topics(topics),
    )
}

/// The guard, the verification, then the commit on the group's coordinator.
async fn commit(
    shard: &Shard,
    version: i16,
    id: &str,
    mut args: TxnCommitArgs,
) -> Result<Vec<ErrorCode>, ErrorCode> {
    let group_id = args.commit.group_id.clone();
    if group_id.is_empty() {
        return Err(ErrorCode::INVALID_GROUP_ID);
    }
    let pid = args.producer_id;
    let guarded = groups::on_coordinator(shard, &group_id, move |c, partition| {
        Box::pin(async move { (partition, c.start_txn_verification(partition, pid)) })
    })
    .await
    .map_err(|code| old_code(version, code))?;
    let (partition, guard) = guarded;
    if guard.is_some() && shard.config.broker.transactions.verification {
        // `maybeConvertOffsetCommitError` after verification: a coordinator that cannot answer
        // is COORDINATOR_LOAD_IN_PROGRESS, a partition not in the transaction INVALID_TXN_STATE
        // (TRANSACTION_ABORTABLE from v4).
        crate::transactions::verify_for_produce(
            shard,
            id,
            pid,
            args.producer_epoch,
            CONSUMER_OFFSETS_TOPIC,
            partition,
            if version >= ABORTABLE_FROM { 11 } else { 10 },
        )
        .await
        .map_err(|code| match code {
            ErrorCode::NOT_ENOUGH_REPLICAS => {
                old_code(version, ErrorCode::COORDINATOR_LOAD_IN_PROGRESS)
            }
            other => other,
        })?;
    }
    args.guard = guard;
    groups::on_coordinator(shard, &group_id, move |c, partition| {
        Box::pin(async move { c.txn_commit(partition, args).await })
    })
    .await
    .map_err(|code| old_code(version, code))
}

/// Before v2 COORDINATOR_LOAD_IN_PROGRESS was not known to clients here: Kafka answers
/// COORDINATOR_NOT_AVAILABLE instead.
fn old_code(version: i16, code: ErrorCode) -> ErrorCode {
    if version < 2 && code == ErrorCode::COORDINATOR_LOAD_IN_PROGRESS {
        ErrorCode::COORDINATOR_NOT_AVAILABLE
    } else {
        code
    }
}
