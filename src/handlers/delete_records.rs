//! DeleteRecords: moves each partition's log start offset up to the asked offset (-1: the high
//! watermark), as Kafka's `ReplicaManager.deleteRecords` and `Partition.deleteRecordsOnLeader`:
//! only the leader does it (NOT_LEADER_OR_FOLLOWER), a topic without the delete cleanup
//! policy refuses it (POLICY_VIOLATION), an offset past the high watermark or below -1 is
//! OFFSET_OUT_OF_RANGE. The answer's low watermark is the log start after the move; segments
//! wholly below it are gone, and followers move theirs when they next fetch.
//!
//! As Kafka's `DelayedDeleteRecords`, the answer waits until every in-sync replica's log start
//! has reached the offset (the low watermark), at most `timeout_ms`; then REQUEST_TIMED_OUT.

use super::{authorize, errors, Request, Response};
use crate::protocol::errors::{code_for, ErrorCode};
use crate::security::acl::Operation;
use crate::shard::routing::on_partition;
use crate::shard::Shard;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{ApiKey, DeleteRecordsRequest, DeleteRecordsResponse};

pub async fn handle(shard: &Shard, req: &Request, body: DeleteRecordsRequest) -> Response {
    let timeout = std::time::Duration::from_millis(body.timeout_ms.max(0) as u64);
    let mut topics = Vec::with_capacity(body.topics.len());
    for t in body.topics {
        let name = t.name.0.to_string();
        // Kafka: Delete on the topic.
        let authorized = authorize::topic(shard, req, Operation::Delete, &name);
        let moves = t.partitions.iter().map(|p| {
            let (name, index, offset) = (name.clone(), p.partition_index, p.offset);
            async move {
                if !authorized {
                    return DeleteRecordsPartitionResult::default()
                        .with_partition_index(index)
                        .with_low_watermark(-1)
                        .with_error_code(ErrorCode::TOPIC_AUTHORIZATION_FAILED.code());
                }
                let moved = on_partition(shard, &name, index, move |part| {
                    Box::pin(async move {
                        if !part.log().config().cleanup_policy.deletes() {
                            return Err(ErrorCode::POLICY_VIOLATION);
                        }
                        let start = part
                            .delete_records_before(offset)
                            .await
                            .map_err(|e| code_for(&e))?;
                        match part.wait_low_watermark(start, timeout).await {
                            (low, true) => Ok(low),
                            (_, false) => Err(ErrorCode::REQUEST_TIMED_OUT),
                        }
                    })
                })
                .await;
                let r = DeleteRecordsPartitionResult::default().with_partition_index(index);
                match moved.and_then(|inner| inner) {
                    Ok(low_watermark) => r.with_low_watermark(low_watermark),
                    Err(code) => {
                        errors::refused(
                            shard,
                            ApiKey::DeleteRecords,
                            code,
                            &format_args!("{name}-{index} before {offset}"),
                        );
                        r.with_low_watermark(-1).with_error_code(code.code())
                    }
                }
            }
        });
        let partitions = futures::future::join_all(moves).await;
        topics.push(
            DeleteRecordsTopicResult::default()
                .with_name(t.name)
                .with_partitions(partitions),
        );
    }
    req.respond(
        ApiKey::DeleteRecords,
        &DeleteRecordsResponse::default().with_topics(topics),
    )
}
