//! AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the producer's
//! transaction, so the offsets it commits there in the transaction end with it
//! (KafkaApis.handleAddOffsetsToTxnRequest).

use super::{authorize, errors, Request, Response};
use crate::metadata::CONSUMER_OFFSETS_TOPIC;
use crate::protocol::errors::ErrorCode;
use crate::security::acl::Operation;
use crate::shard::Shard;
use crate::transactions::{fenced_code_for, txn_coordinator_code, TXN_APIS_FENCED_FROM};
use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, ApiKey};

pub async fn handle(shard: &Shard, req: &Request, body: AddOffsetsToTxnRequest) -> Response {
    let id = body.transactional_id.to_string();
    let group = body.group_id.to_string();
    req.note_transaction_coordinator(shard, &id);
    let code = if !authorize::transactional_id(shard, req, Operation::Write, &id) {
        ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    } else if !authorize::group(shard, req, Operation::Read, &group) {
        ErrorCode::GROUP_AUTHORIZATION_FAILED
    } else {
        add(shard, &id, &group, body.producer_id.0, body.producer_epoch).await
    };
    let code = fenced_code_for(code, req.version, TXN_APIS_FENCED_FROM);
    errors::refused(
        shard,
        ApiKey::AddOffsetsToTxn,
        code,
        &format_args!("transactional id {id}, group {group}"),
    );
    req.respond(
        ApiKey::AddOffsetsToTxn,
        &AddOffsetsToTxnResponse::default().with_error_code(code.code()),
    )
}

async fn add(shard: &Shard, id: &str, group: &str, pid: i64, epoch: i16) -> ErrorCode {
    if let Err(code) = crate::groups::ensure_offsets_topic(shard).await {
        return code;
    }
    let partitions = shard
        .metadata()
        .topic(CONSUMER_OFFSETS_TOPIC)
        .map_or(1, |t| t.partitions.len() as i32);
    let partition = crate::groups::records::coordinator_partition(group, partitions);
    let key = id.to_string();
    txn_coordinator_code(shard, id, move |c| {
        Box::pin(async move {
            c.add_partitions(
                &key,
                pid,
                epoch,
                vec![(CONSUMER_OFFSETS_TOPIC.to_string(), partition)],
            )
            .await
        })
    })
    .await
}
