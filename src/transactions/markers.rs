//! Transactions across brokers: markers for partitions another broker leads (WriteTxnMarkers
//! v1 to that leader, every partition it leads in one request; the coordinator's completion
//! retries the partitions that fail), and KIP-890's verification at a
//! coordinator on another broker (AddPartitionsToTxn v4, `verify_only`, as
//! `AddPartitionsToTxnManager` asks).

use super::host::{TopicPartition, TxnMarker};
use crate::protocol::errors::ErrorCode;
use crate::replication::calls::call_broker;
use crate::shard::Shard;
use ferrite_shards::batch::control::Marker;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, ProducerId, TopicName,
    TransactionalId, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use kafka_protocol::protocol::StrBytes;
use std::time::Duration;

/// The version brokers send (Kafka 3.9's newest).
const WRITE_TXN_MARKERS_VERSION: i16 = 1;
/// Longest wait for the leader's answer: it waits for its ISR first.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Writes `marker` on `partitions`, all led by broker `leader`, in one request (as
/// `TransactionMarkerChannelManager` drains its queue per broker); its answer per partition,
/// in order. A failed call answers NOT_LEADER_OR_FOLLOWER for all of them (retried).
pub async fn send(
    shard: &Shard,
    leader: i32,
    marker: TxnMarker,
    partitions: &[TopicPartition],
) -> Vec<Result<(), ErrorCode>> {
    let mut topics: Vec<WritableTxnMarkerTopic> = Vec::new();
    for (topic, partition) in partitions {
        match topics.iter_mut().find(|t| t.name.as_str() == topic) {
            Some(t) => t.partition_indexes.push(*partition),
            None => topics.push(
                WritableTxnMarkerTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partition_indexes(vec![*partition]),
            ),
        }
    }
    let request =
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(ProducerId(marker.producer_id))
            .with_producer_epoch(marker.producer_epoch)
            .with_transaction_result(marker.marker.marker == Marker::Commit)
            .with_coordinator_epoch(marker.marker.coordinator_epoch)
            .with_topics(topics)]);
    let answer: WriteTxnMarkersResponse = match call_broker(
        shard,
        leader,
        ApiKey::WriteTxnMarkers,
        WRITE_TXN_MARKERS_VERSION,
        &request,
        CALL_TIMEOUT,
    )
    .await
    {
        Ok(answer) => answer,
        Err(e) => {
            tracing::debug!(leader, error = %e, "WriteTxnMarkers failed");
            return vec![Err(ErrorCode::NOT_LEADER_OR_FOLLOWER); partitions.len()];
        }
    };
    partitions
        .iter()
        .map(|(topic, partition)| {
            let code = answer
                .markers
                .iter()
                .flat_map(|m| m.topics.iter())
                .filter(|t| t.name.as_str() == topic)
                .flat_map(|t| t.partitions.iter())
                .find(|p| p.partition_index == *partition)
                .map_or(ErrorCode::UNKNOWN_SERVER_ERROR, |p| {
                    ErrorCode::from_code(p.error_code)
                });
            if code.is_error() {
                Err(code)
            } else {
                Ok(())
            }
        })
        .collect()
}

/// The batched, broker-only version of AddPartitionsToTxn.
const VERIFY_VERSION: i16 = 4;

/// Asks the coordinator on broker `coordinator` whether `partition` is in the producer's
/// transaction; its per-partition answer (a top-level refusal of this broker,
/// CLUSTER_AUTHORIZATION_FAILED, becomes INVALID_TXN_STATE as in `AddPartitionsToTxnManager`;
/// a failed call COORDINATOR_NOT_AVAILABLE, which the produce path answers as retriable).
pub async fn verify_at(
    shard: &Shard,
    coordinator: i32,
    transactional_id: &str,
    producer_id: i64,
    epoch: i16,
    partition: &(String, i32),
) -> Result<(), ErrorCode> {
    let request = AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(
                transactional_id.to_string(),
            )))
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(epoch)
            .with_verify_only(true)
            .with_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(TopicName(StrBytes::from_string(partition.0.clone())))
                .with_partitions(vec![partition.1])]),
    ]);
    let answer: AddPartitionsToTxnResponse = call_broker(
        shard,
        coordinator,
        ApiKey::AddPartitionsToTxn,
        VERIFY_VERSION,
        &request,
        CALL_TIMEOUT,
    )
    .await
    .map_err(|e| {
        tracing::debug!(coordinator, error = %e, "verifying a transaction failed");
        ErrorCode::COORDINATOR_NOT_AVAILABLE
    })?;
    let top = ErrorCode::from_code(answer.error_code);
    if top == ErrorCode::CLUSTER_AUTHORIZATION_FAILED {
        return Err(ErrorCode::INVALID_TXN_STATE);
    }
    if top.is_error() {
        return Err(top);
    }
    let code = answer
        .results_by_transaction
        .iter()
        .flat_map(|t| t.topic_results.iter())
        .flat_map(|t| t.results_by_partition.iter())
        .find(|p| p.partition_index == partition.1)
        .map_or(ErrorCode::UNKNOWN_SERVER_ERROR, |p| {
            ErrorCode::from_code(p.partition_error_code)
        });
    if code.is_error() {
        Err(code)
    } else {
        Ok(())
    }
}
