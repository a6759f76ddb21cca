//! DescribeTransactions (KIP-664): each transactional id's state at its coordinator. Describe
//! on the id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED; the partitions of topics the caller
//! may not describe are left out (KafkaApis.handleDescribeTransactionsRequest).

use super::{authorize, errors, Request, Response};
use crate::protocol::errors::ErrorCode;
use crate::security::acl::Operation;
use crate::shard::Shard;
use crate::transactions::on_txn_coordinator;
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    ApiKey, DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;

pub async fn handle(shard: &Shard, req: &Request, body: DescribeTransactionsRequest) -> Response {
    let mut states = Vec::with_capacity(body.transactional_ids.len());
    for id in body.transactional_ids {
        let name = id.to_string();
        let out = TransactionState::default().with_transactional_id(id);
        let described = if !authorize::transactional_id(shard, req, Operation::Describe, &name) {
            Err(ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        } else if name.is_empty() {
            Err(ErrorCode::INVALID_REQUEST)
        } else {
            let key = name.clone();
            on_txn_coordinator(shard, &name, move |c| {
                Box::pin(async move { c.describe(&key) })
            })
            .await
            .and_then(|r| r)
        };
        states.push(match described {
            Ok(d) => {
                let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
                for (topic, p) in d.partitions {
                    by_topic.entry(topic).or_default().push(p);
                }
                let topics = by_topic
                    .into_iter()
                    .filter(|(t, _)| authorize::topic(shard, req, Operation::Describe, t))
                    .map(|(t, ps)| {
                        TopicData::default()
                            .with_topic(TopicName(StrBytes::from_string(t)))
                            .with_partitions(ps)
                    })
                    .collect();
                out.with_transaction_state(StrBytes::from_static_str(d.state))
                    .with_transaction_timeout_ms(d.timeout_ms)
                    .with_transaction_start_time_ms(d.start_ms)
                    .with_producer_id(ProducerId(d.producer_id))
                    .with_producer_epoch(d.producer_epoch)
                    .with_topics(topics)
            }
            Err(code) => {
                errors::refused(shard, ApiKey::DescribeTransactions, code, &name);
                out.with_error_code(code.code())
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1)
                    .with_transaction_start_time_ms(-1)
                    .with_transaction_timeout_ms(-1)
            }
        });
    }
    req.respond(
        ApiKey::DescribeTransactions,
        &DescribeTransactionsResponse::default().with_transaction_states(states),
    )
}
