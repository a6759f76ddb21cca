//! OffsetForLeaderEpoch (KIP-101): where a leader epoch ended in the leader's log, so a
//! returning replica cuts what the leader never had before it fetches again.

use super::{authorize, errors, Request, Response};
use crate::protocol::errors::ErrorCode;
use crate::security::acl::Operation;
use crate::shard::routing::on_partition;
use crate::shard::Shard;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{ApiKey, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

/// Kafka's answer for an epoch older than anything in the log.
const UNDEFINED: i64 = -1;

pub async fn handle(shard: &Shard, req: &Request, body: OffsetForLeaderEpochRequest) -> Response {
    let mut topics = Vec::with_capacity(body.topics.len());
    // Kafka: a follower (replica id >= 0, v3+) needs ClusterAction on the cluster, a client
    // Describe on each topic; denied partitions are TOPIC_AUTHORIZATION_FAILED.
    let follower = req.version >= 3 && body.replica_id.0 >= 0;
    let follower_allowed = !follower || authorize::cluster(shard, req, Operation::ClusterAction);
    for t in body.topics {
        let name = t.topic.0.to_string();
        let authorized = if follower {
            follower_allowed
        } else {
            authorize::topic(shard, req, Operation::Describe, &name)
        };
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in t.partitions {
            let (epoch, current) = (p.leader_epoch, p.current_leader_epoch);
            let found = if !authorized {
                Err(ErrorCode::TOPIC_AUTHORIZATION_FAILED)
            } else {
                on_partition(shard, &name, p.partition, move |part| {
                    Box::pin(async move {
                        // A requester that knows a newer leader epoch than ours is ahead of us.
                        if current >= 0 && current > part.leader_epoch() {
                            return Err(ErrorCode::UNKNOWN_LEADER_EPOCH);
                        }
                        if current >= 0 && current < part.leader_epoch() {
                            return Err(ErrorCode::FENCED_LEADER_EPOCH);
                        }
                        Ok(part.log().end_offset_for_epoch(epoch))
                    })
                })
                .await
                .and_then(|r| r)
            };
            let out = EpochEndOffset::default().with_partition(p.partition);
            partitions.push(match found {
                Ok(Some((e, end))) => out.with_leader_epoch(e).with_end_offset(end),
                Ok(None) => out.with_leader_epoch(-1).with_end_offset(UNDEFINED),
                Err(code) => {
                    errors::refused(
                        shard,
                        ApiKey::OffsetForLeaderEpoch,
                        code,
                        &format_args!("{name}-{} epoch {epoch}", p.partition),
                    );
                    out.with_error_code(code.code())
                        .with_leader_epoch(-1)
                        .with_end_offset(UNDEFINED)
                }
            });
        }
        topics.push(
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic)
                .with_partitions(partitions),
        );
    }
    req.respond(
        ApiKey::OffsetForLeaderEpoch,
        &OffsetForLeaderEpochResponse::default().with_topics(topics),
    )
}
