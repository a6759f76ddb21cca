//! InitProducerId: a producer id and epoch for an idempotent or transactional producer.
//!
//! Without a transactional id Kafka always hands out a fresh id, epoch 0, even when the request
//! names the producer's current one (KIP-360 epoch bumps only apply to transactional
//! producers). With one, the id's transaction coordinator answers (`transactions`): the id's
//! producer id with its epoch bumped, fencing any older producer of the same id.

use super::{authorize, errors, Request, Response};
use crate::controller;
use crate::protocol::errors::ErrorCode;
use crate::security::acl::{Operation, ResourceType};
use crate::shard::routing::on_controller;
use crate::shard::Shard;
use crate::transactions::{fenced_code_for, on_txn_coordinator, InitArgs};
use kafka_protocol::messages::{ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId};

/// PRODUCER_FENCED is answered from this version; INVALID_PRODUCER_EPOCH before.
const PRODUCER_FENCED_FROM: i16 = 4;

pub async fn handle(shard: &Shard, req: &Request, body: InitProducerIdRequest) -> Response {
    let answer = match body.transactional_id.as_ref().map(|t| t.to_string()) {
        Some(id) => transactional(shard, req, &body, id).await,
        None => idempotent(shard, req).await,
    };
    let resp = match answer {
        Ok((id, epoch)) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(epoch),
        Err((code, why)) => {
            let code = fenced_code_for(code, req.version, PRODUCER_FENCED_FROM);
            errors::refused(shard, ApiKey::InitProducerId, code, &why);
            InitProducerIdResponse::default()
                .with_error_code(code.code())
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
        }
    };
    req.respond(ApiKey::InitProducerId, &resp)
}

type Answer = Result<(i64, i16), (ErrorCode, String)>;

/// Kafka's checks, in order: Write on the transactional id, the (producer id, epoch) pair
/// (v3+: both -1 or neither), an empty id; then the coordinator.
async fn transactional(
    shard: &Shard,
    req: &Request,
    body: &InitProducerIdRequest,
    id: String,
) -> Answer {
    req.note_transaction_coordinator(shard, &id);
    if !authorize::transactional_id(shard, req, Operation::Write, &id) {
        return Err((
            ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            format!("Write on transactional id {id} denied"),
        ));
    }
    let (pid, epoch) = (body.producer_id.0, body.producer_epoch);
    let expected = match (req.version >= 3, pid, epoch) {
        (false, _, _) | (true, -1, -1) => None,
        (true, -1, _) | (true, _, -1) => {
            return Err((
                ErrorCode::INVALID_REQUEST,
                format!("producer id {pid} with epoch {epoch}: both or neither must be -1"),
            ))
        }
        (true, pid, epoch) => Some((pid, epoch)),
    };
    if id.is_empty() {
        return Err((
            ErrorCode::INVALID_REQUEST,
            "an empty transactional id".to_string(),
        ));
    }
    let args = InitArgs {
        transactional_id: id.clone(),
        timeout_ms: body.transaction_timeout_ms,
        expected,
    };
    on_txn_coordinator(shard, &id, move |c| {
        Box::pin(async move { c.init_producer_id(args).await })
    })
    .await
    .and_then(|r| r)
    .map_err(|code| (code, format!("transactional id {id}")))
}

/// Kafka (KIP-679): IdempotentWrite on the cluster, or Write on some topic.
async fn idempotent(shard: &Shard, req: &Request) -> Answer {
    let may_write = authorize::allowed_quietly(
        shard,
        req,
        Operation::IdempotentWrite,
        ResourceType::Cluster,
        authorize::CLUSTER_NAME,
    ) || authorize::may_on_some(shard, req, Operation::Write, ResourceType::Topic);
    if !may_write {
        return Err((
            ErrorCode::CLUSTER_AUTHORIZATION_FAILED,
            "no Write on any topic".to_string(),
        ));
    }
    let id = on_controller(shard, |s| async move {
        controller::allocate_producer_id(&s).await
    })
    .await;
    match id {
        Some(Ok(id)) => Ok((id, 0)),
        Some(Err(e)) => {
            tracing::error!(error = %e, "reserving producer ids failed");
            Err((ErrorCode::KAFKA_STORAGE_ERROR, e.to_string()))
        }
        None => Err((
            ErrorCode::COORDINATOR_NOT_AVAILABLE,
            "the controller shard did not answer".to_string(),
        )),
    }
}
