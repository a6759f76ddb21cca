//! ListTransactions (KIP-664; v1's duration filter from KIP-994): the transactional ids this
//! broker coordinates (each shard lists its own), filtered by state, producer id and how long
//! they have been open; only those the caller may describe. Unknown state names are echoed
//! back in `unknown_state_filters`, as Kafka does.

use super::{authorize, Request, Response};
use crate::protocol::errors::ErrorCode;
use crate::security::acl::{Operation, ResourceType};
use crate::shard::Shard;
use crate::transactions::{is_state_name, ListedTxn, TxnCoordinator};
use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ApiKey, ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use std::rc::Rc;

pub async fn handle(shard: &Shard, req: &Request, body: ListTransactionsRequest) -> Response {
    let (known, unknown): (Vec<String>, Vec<String>) = body
        .state_filters
        .iter()
        .map(|s| s.to_string())
        .partition(|s| is_state_name(s));
    let producer_ids: Vec<i64> = body.producer_id_filters.iter().map(|p| p.0).collect();
    let duration = if req.version >= 1 {
        body.duration_filter
    } else {
        -1
    };
    let resp = ListTransactionsResponse::default().with_unknown_state_filters(
        unknown
            .iter()
            .map(|s| StrBytes::from_string(s.clone()))
            .collect(),
    );
    // Filtering by unknown states only matches nothing.
    if known.is_empty() && !unknown.is_empty() {
        return req.respond(ApiKey::ListTransactions, &resp);
    }
    let per_shard = shard
        .router()
        .broadcast(move |s: Rc<Shard>| {
            let (known, producer_ids) = (known.clone(), producer_ids.clone());
            Box::pin(async move {
                s.service::<TxnCoordinator>()
                    .list(&known, &producer_ids, duration)
            })
        })
        .await;
    let mut listed: Vec<ListedTxn> = Vec::new();
    let mut code = ErrorCode::NONE;
    for answer in per_shard.into_iter().flatten() {
        match answer {
            Ok(l) => listed.extend(l),
            Err(c) => code = c,
        }
    }
    let all = authorize::allowed_quietly(
        shard,
        req,
        Operation::Describe,
        ResourceType::Cluster,
        authorize::CLUSTER_NAME,
    );
    listed.retain(|t| {
        all || authorize::allowed_quietly(
            shard,
            req,
            Operation::Describe,
            ResourceType::TransactionalId,
            &t.transactional_id,
        )
    });
    listed.sort();
    let states = listed
        .into_iter()
        .map(|t| {
            TransactionState::default()
                .with_transactional_id(TransactionalId(StrBytes::from_string(t.transactional_id)))
                .with_producer_id(ProducerId(t.producer_id))
                .with_transaction_state(StrBytes::from_static_str(t.state))
        })
        .collect();
    req.respond(
        ApiKey::ListTransactions,
        &resp
            .with_error_code(code.code())
            .with_transaction_states(states),
    )
}
