//! WriteTxnMarkers: a transaction coordinator (or an operator aborting a hanging transaction,
//! KIP-664) ends a producer's transaction on partitions this broker leads
//! (KafkaApis.handleWriteTxnMarkersRequest). ClusterAction or Alter on the cluster; per
//! partition, UNKNOWN_TOPIC_OR_PARTITION for one that does not exist, else the append's answer.

use super::{authorize, errors, Request, Response};
use crate::protocol::errors::ErrorCode;
use crate::security::acl::Operation;
use crate::shard::Shard;
use crate::transactions::host::TxnMarker;
use crate::transactions::write_markers_here;
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
        let partitions: Vec<(String, i32)> = m
            .topics
            .iter()
            .flat_map(|t| {
                t.partition_indexes
                    .iter()
                    .map(move |&p| (t.name.to_string(), p))
            })
            .collect();
        let codes: Vec<ErrorCode> = if allowed {
            let txn = TxnMarker {
                producer_id: m.producer_id.0,
                producer_epoch: m.producer_epoch,
                marker,
            };
            write_markers_here(shard, txn, partitions.clone())
                .await
                .into_iter()
                .map(|r| r.err().unwrap_or(ErrorCode::NONE))
                .collect()
        } else {
            vec![ErrorCode::CLUSTER_AUTHORIZATION_FAILED; partitions.len()]
        };
        for ((topic, partition), code) in partitions.iter().zip(&codes) {
            errors::refused(
                shard,
                ApiKey::WriteTxnMarkers,
                *code,
                &format_args!("{topic}-{partition}"),
            );
        }
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
