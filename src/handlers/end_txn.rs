//! EndTxn: commit or abort the producer's transaction. Answered once the coordinator has stored
//! PrepareCommit/PrepareAbort; the markers follow (KafkaApis.handleEndTxnRequest).

use super::{authorize, errors, Request, Response};
use crate::protocol::errors::ErrorCode;
use crate::security::acl::Operation;
use crate::shard::Shard;
use crate::transactions::{fenced_code_for, txn_coordinator_code, TXN_APIS_FENCED_FROM};
use kafka_protocol::messages::{ApiKey, EndTxnRequest, EndTxnResponse};

pub async fn handle(shard: &Shard, req: &Request, body: EndTxnRequest) -> Response {
    let id = body.transactional_id.to_string();
    req.note_transaction_coordinator(shard, &id);
    let code = if !authorize::transactional_id(shard, req, Operation::Write, &id) {
        ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    } else if id.is_empty() {
        ErrorCode::INVALID_REQUEST
    } else {
        let (pid, epoch, commit) = (body.producer_id.0, body.producer_epoch, body.committed);
        let key = id.clone();
        txn_coordinator_code(shard, &id, move |c| {
            Box::pin(async move { c.end_transaction(&key, pid, epoch, commit).await })
        })
        .await
    };
    let code = fenced_code_for(code, req.version, TXN_APIS_FENCED_FROM);
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
