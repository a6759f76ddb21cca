//! EndTxn: commit or abort the producer's transaction. Answered once the coordinator has stored
//! PrepareCommit/PrepareAbort; the markers follow (KafkaApis.handleEndTxnRequest).

use super::{authorize, errors, Request, Response};
use crate::protocol::errors::ErrorCode;
use crate::security::acl::Operation;
use crate::shard::Shard;
use crate::transactions::{fenced_code_for, on_txn_coordinator};
use kafka_protocol::messages::{ApiKey, EndTxnRequest, EndTxnResponse};

/// PRODUCER_FENCED is answered from this version; INVALID_PRODUCER_EPOCH before.
const PRODUCER_FENCED_FROM: i16 = 2;

pub async fn handle(shard: &Shard, req: &Request, body: EndTxnRequest) -> Response {
    let id = body.transactional_id.to_string();
    let code = if !authorize::transactional_id(shard, req, Operation::Write, &id) {
        ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    } else if id.is_empty() {
        ErrorCode::INVALID_REQUEST
    } else {
        let (pid, epoch, commit) = (body.producer_id.0, body.producer_epoch, body.committed);
        let key = id.clone();
        on_txn_coordinator(shard, &id, move |c| {
            Box::pin(async move { c.end_transaction(&key, pid, epoch, commit).await })
        })
        .await
        .and_then(|r| r)
        .err()
        .unwrap_or(ErrorCode::NONE)
    };
    let code = fenced_code_for(code, req.version, PRODUCER_FENCED_FROM);
    errors::refused(
        shard,
        ApiKey::EndTxn,
        code,
        &format_args!("transactional id {id}"),
    );
    req.respond(
        ApiKey::EndTxn,
        &EndTxnResponse::default().with_error_code(code.code()),
    )
}
