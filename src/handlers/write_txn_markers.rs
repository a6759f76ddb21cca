//! WriteTxnMarkers: a transaction coordinator (or an operator aborting a hanging transaction,
//! KIP-664) ends a producer's transaction on partitions this broker leads
//! (KafkaApis.handleWriteTxnMarkersRequest). ClusterAction or Alter on the cluster; per
//! partition, UNKNOWN_TOPIC_OR_PARTITION for one that does not exist, else the append's answer.

use super::{authorize, errors, Request, Response};
use crate::protocol::errors::ErrorCode;
use crate::security::acl::Operation;
use crate::shard::Shard;
use crate::transactions::host::MarkerWrite;
use crate::transactions::write_marker_here;
use ferrite_shards::batch::control::{Marker, MarkerRecord};
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{ApiKey, WriteTxnMarkersRequest, WriteTxnMarkersResponse};

pub async fn handle(shard: &Shard, req: &Request, body: WriteTxnMarkersRequest) -> Response {
    let allowed = authorize::cluster(shard, req, Operation::ClusterAction)
        || authorize::cluster(shard, req, Operation::Alter);
    let mut results = Vec::with_capacity(body.markers.len());
    for m in body.markers {
        let marker = MarkerRecord {
            marker: if m.transaction_result {
                Marker::Commit
            } else {
                Marker::Abort
            },
            coordinator_epoch: m.coordinator_epoch,
        };
        let writes = m.topics.iter().flat_map(|t| {
            t.partition_indexes
                .iter()
                .map(move |&p| (t.name.to_string(), p))
        });
        let codes = futures::future::join_all(writes.map(|(topic, partition)| async move {
            let code = if !allowed {
                ErrorCode::CLUSTER_AUTHORIZATION_FAILED
            } else if shard.metadata().partition(&topic, partition).is_none() {
                ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
            } else {
                let write = MarkerWrite {
                    topic: topic.clone(),
                    partition,
                    producer_id: m.producer_id.0,
                    producer_epoch: m.producer_epoch,
                    marker,
                };
                write_marker_here(shard, write)
                    .await
                    .err()
                    .unwrap_or(ErrorCode::NONE)
            };
            errors::refused(
                shard,
                ApiKey::WriteTxnMarkers,
                code,
                &format_args!("{topic}-{partition}"),
            );
            code
        }))
        .await;
        let mut codes = codes.into_iter();
        let topics = m
            .topics
            .into_iter()
            .map(|t| {
                let partitions = t
                    .partition_indexes
                    .iter()
                    .map(|&p| {
                        WritableTxnMarkerPartitionResult::default()
                            .with_partition_index(p)
                            .with_error_code(codes.next().unwrap_or(ErrorCode::NONE).code())
                    })
                    .collect();
                WritableTxnMarkerTopicResult::default()
                    .with_name(t.name)
                    .with_partitions(partitions)
            })
            .collect();
        results.push(
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(topics),
        );
    }
    req.respond(
        ApiKey::WriteTxnMarkers,
        &WriteTxnMarkersResponse::default().with_markers(results),
    )
}
