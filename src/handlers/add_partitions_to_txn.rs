//! AddPartitionsToTxn: the partitions a transactional producer is about to write join its
//! transaction (KafkaApis.handleAddPartitionsToTxnRequest).
//!
//! v0–3 come from producers: one transaction, Write on its id and on each topic. If any
//! partition is refused (TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION), none is added
//! and the others get OPERATION_NOT_ATTEMPTED. v4–5 come from brokers (KIP-890): a batch of
//! transactions, each either added or only verified (`verify_only`: is each partition in it?),
//! under ClusterAction.

use super::produce_checks::is_internal_topic;
use super::{authorize, errors, Request, Response};
use crate::protocol::errors::ErrorCode;
use crate::security::acl::Operation;
use crate::shard::Shard;
use crate::transactions::{
    fenced_code_for, on_txn_coordinator, txn_coordinator_code, TXN_APIS_FENCED_FROM,
};
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, TopicName,
};

/// The batched, broker-only form starts here.
const BATCHED_FROM: i16 = 4;

pub async fn handle(shard: &Shard, req: &Request, body: AddPartitionsToTxnRequest) -> Response {
    if req.version < BATCHED_FROM {
        let txn = AddPartitionsToTxnTransaction::default()
            .with_transactional_id(body.v3_and_below_transactional_id)
            .with_producer_id(body.v3_and_below_producer_id)
            .with_producer_epoch(body.v3_and_below_producer_epoch)
            .with_topics(body.v3_and_below_topics);
        let results = from_producer(shard, req, txn).await;
        return req.respond(
            ApiKey::AddPartitionsToTxn,
            &AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results),
        );
    }
    if !authorize::cluster(shard, req, Operation::ClusterAction) {
        let code = ErrorCode::CLUSTER_AUTHORIZATION_FAILED;
        errors::refused(
            shard,
            ApiKey::AddPartitionsToTxn,
            code,
            &"ClusterAction denied",
        );
        return req.respond(
            ApiKey::AddPartitionsToTxn,
            &AddPartitionsToTxnResponse::default().with_error_code(code.code()),
        );
    }
    let mut results = Vec::with_capacity(body.transactions.len());
    for txn in body.transactions {
        let id = txn.transactional_id.clone();
        let topic_results = if txn.verify_only {
            verify(shard, txn).await
        } else {
            add(shard, req.version, txn, |_| None).await
        };
        results.push(
            AddPartitionsToTxnResult::default()
                .with_transactional_id(id)
                .with_topic_results(topic_results),
        );
    }
    req.respond(
        ApiKey::AddPartitionsToTxn,
        &AddPartitionsToTxnResponse::default().with_results_by_transaction(results),
    )
}

/// A producer's request: its authorizations first.
async fn from_producer(
    shard: &Shard,
    req: &Request,
    txn: AddPartitionsToTxnTransaction,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let id = txn.transactional_id.to_string();
    req.note_transaction_coordinator(shard, &id);
    if !authorize::transactional_id(shard, req, Operation::Write, &id) {
        let code = ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
        errors::refused(shard, ApiKey::AddPartitionsToTxn, code, &id);
        return answer_all(&txn.topics, |_| code);
    }
    // Kafka leaves internal topics out of the authorized set, so they fail as unauthorized.
    add(shard, req.version, txn, |topic| {
        (is_internal_topic(topic) || !authorize::topic(shard, req, Operation::Write, topic))
            .then_some(ErrorCode::TOPIC_AUTHORIZATION_FAILED)
    })
    .await
}

/// Adds the transaction's partitions, unless one is refused (`refuse_topic`, or unknown).
async fn add(
    shard: &Shard,
    version: i16,
    txn: AddPartitionsToTxnTransaction,
    refuse_topic: impl Fn(&str) -> Option<ErrorCode>,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let id = txn.transactional_id.to_string();
    let metadata = shard.metadata();
    let mut refusals: Vec<((String, i32), ErrorCode)> = Vec::new();
    let mut partitions = Vec::new();
    for t in &txn.topics {
        let name = t.name.0.to_string();
        let refused = refuse_topic(&name);
        for &p in &t.partitions {
            let code = refused.or_else(|| {
                metadata
                    .partition(&name, p)
                    .is_none()
                    .then_some(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
            });
            match code {
                Some(code) => refusals.push(((name.clone(), p), code)),
                None => partitions.push((name.clone(), p)),
            }
        }
    }
    drop(metadata);
    if !refusals.is_empty() {
        for ((topic, p), code) in &refusals {
            errors::refused(
                shard,
                ApiKey::AddPartitionsToTxn,
                *code,
                &format_args!("{topic}-{p} ({id})"),
            );
        }
        return answer_each(&txn.topics, |topic, p| {
            refusals
                .iter()
                .find(|((t, i), _)| t == topic && *i == p)
                .map_or(ErrorCode::OPERATION_NOT_ATTEMPTED, |(_, code)| *code)
        });
    }
    let (pid, epoch) = (txn.producer_id.0, txn.producer_epoch);
    let key = id.clone();
    let code = txn_coordinator_code(shard, &id, move |c| {
        Box::pin(async move { c.add_partitions(&key, pid, epoch, partitions).await })
    })
    .await;
    let code = fenced_code_for(code, version, TXN_APIS_FENCED_FROM);
    errors::refused(
        shard,
        ApiKey::AddPartitionsToTxn,
        code,
        &format_args!("transactional id {id}"),
    );
    answer_all(&txn.topics, |_| code)
}

/// KIP-890's verification for another broker's produce path: no write, an answer per partition.
async fn verify(
    shard: &Shard,
    txn: AddPartitionsToTxnTransaction,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let id = txn.transactional_id.to_string();
    let (pid, epoch) = (txn.producer_id.0, txn.producer_epoch);
    let asked: Vec<(String, i32)> = txn
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|&p| (t.name.0.to_string(), p)))
        .collect();
    let key = id.clone();
    let answers = on_txn_coordinator(shard, &id, move |c| {
        Box::pin(async move {
            asked
                .iter()
                .map(|tp| {
                    c.verify_partition(&key, pid, epoch, tp)
                        .err()
                        .unwrap_or(ErrorCode::NONE)
                })
                .collect::<Vec<_>>()
        })
    })
    .await;
    match answers {
        Ok(codes) => {
            let mut codes = codes.into_iter();
            answer_each(&txn.topics, |_, _| codes.next().unwrap_or(ErrorCode::NONE))
        }
        Err(code) => answer_all(&txn.topics, |_| code),
    }
}

fn answer_all(
    topics: &[AddPartitionsToTxnTopic],
    code: impl Fn(&str) -> ErrorCode,
) -> Vec<AddPartitionsToTxnTopicResult> {
    answer_each(topics, |topic, _| code(topic))
}

fn answer_each(
    topics: &[AddPartitionsToTxnTopic],
    mut code: impl FnMut(&str, i32) -> ErrorCode,
) -> Vec<AddPartitionsToTxnTopicResult> {
    topics
        .iter()
        .map(|t| {
            let name = t.name.0.to_string();
            AddPartitionsToTxnTopicResult::default()
                .with_name(TopicName(t.name.0.clone()))
                .with_results_by_partition(
                    t.partitions
                        .iter()
                        .map(|&p| {
                            AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(p)
                                .with_partition_error_code(code(&name, p).code())
                        })
                        .collect(),
                )
        })
        .collect()
}
