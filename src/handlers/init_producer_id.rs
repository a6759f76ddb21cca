//! InitProducerId: a new producer id (epoch 0) for an idempotent producer.
//!
//! Without a transactional id Kafka always hands out a fresh id, even when the request names
//! the producer's current one (KIP-360 epoch bumps only apply to transactional producers).
//! Transactions are not supported: a transactional id is refused.

use super::{authorize, errors, Request, Response};
use crate::controller;
use crate::protocol::errors::ErrorCode;
use crate::security::acl::{Operation, ResourceType};
use crate::shard::routing::on_controller;
use crate::shard::Shard;
use kafka_protocol::messages::{ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId};

pub async fn handle(shard: &Shard, req: &Request, body: InitProducerIdRequest) -> Response {
    if body.transactional_id.is_some() {
        errors::refused(
            shard,
            ApiKey::InitProducerId,
            ErrorCode::INVALID_REQUEST,
            &"a transactional id: transactions are not supported yet",
        );
        let resp = InitProducerIdResponse::default()
            .with_error_code(ErrorCode::INVALID_REQUEST.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        return req.respond(ApiKey::InitProducerId, &resp);
    }
    // Kafka (KIP-679): IdempotentWrite on the cluster, or Write on some topic.
    let may_write = authorize::allowed_quietly(
        shard,
        req,
        Operation::IdempotentWrite,
        ResourceType::Cluster,
        authorize::CLUSTER_NAME,
    ) || authorize::may_on_some(shard, req, Operation::Write, ResourceType::Topic);
    if !may_write {
        let code = ErrorCode::CLUSTER_AUTHORIZATION_FAILED;
        errors::refused(
            shard,
            ApiKey::InitProducerId,
            code,
            &"no Write on any topic",
        );
        let resp = InitProducerIdResponse::default()
            .with_error_code(code.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        return req.respond(ApiKey::InitProducerId, &resp);
    }
    let id = on_controller(shard, |s| async move {
        controller::allocate_producer_id(&s).await
    })
    .await;
    let resp = match id {
        Some(Ok(id)) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0),
        Some(Err(e)) => {
            tracing::error!(error = %e, "reserving producer ids failed");
            errors::refused(
                shard,
                ApiKey::InitProducerId,
                ErrorCode::KAFKA_STORAGE_ERROR,
                &e,
            );
            InitProducerIdResponse::default()
                .with_error_code(ErrorCode::KAFKA_STORAGE_ERROR.code())
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
        }
        None => {
            errors::refused(
                shard,
                ApiKey::InitProducerId,
                ErrorCode::COORDINATOR_NOT_AVAILABLE,
                &"the controller shard did not answer",
            );
            InitProducerIdResponse::default()
                .with_error_code(ErrorCode::COORDINATOR_NOT_AVAILABLE.code())
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
        }
    };
    req.respond(ApiKey::InitProducerId, &resp)
}
