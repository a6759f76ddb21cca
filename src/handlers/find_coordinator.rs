//! FindCoordinator: a group's coordinator is the leader of its `__consumer_offsets` partition,
//! a transactional id's the leader of its `__transaction_state` partition (on a single broker,
//! this broker). The first lookup creates the topic, as Kafka does, so the coordinator is ready
//! when the client's next request arrives.

use super::{authorize, errors, Request, Response};
use crate::groups::records::coordinator_partition;
use crate::metadata::{BrokerEndpoint, ClusterMetadata, CONSUMER_OFFSETS_TOPIC};
use crate::protocol::errors::ErrorCode;
use crate::security::acl::{Operation, ResourceType};
use crate::shard::Shard;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{ApiKey, BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

/// FindCoordinator's key types: consumer groups, transactional ids, share groups (KIP-932).
const GROUP_KEY: i8 = 0;
const TRANSACTION_KEY: i8 = 1;
const SHARE_KEY: i8 = 2;

pub async fn handle(shard: &Shard, req: &Request, body: FindCoordinatorRequest) -> Response {
    let ensured = match body.key_type {
        GROUP_KEY => crate::groups::ensure_offsets_topic(shard).await,
        TRANSACTION_KEY => crate::transactions::ensure_transaction_topic(shard).await,
        _ => Ok(()),
    };
    if let Err(code) = ensured {
        errors::refused(
            shard,
            ApiKey::FindCoordinator,
            code,
            &"the coordinator's topic is not ready",
        );
        let resp = FindCoordinatorResponse::default()
            .with_error_code(code.code())
            .with_node_id(BrokerId(-1));
        return req.respond(ApiKey::FindCoordinator, &resp);
    }
    let keys: Vec<&str> = if req.version >= 4 {
        body.coordinator_keys.iter().map(|k| k.as_str()).collect()
    } else {
        vec![body.key.as_str()]
    };
    let mut not_ready = Vec::new();
    for key in &keys {
        let ready = match body.key_type {
            GROUP_KEY => crate::groups::coordinator_ready(shard, key).await,
            TRANSACTION_KEY => crate::transactions::coordinator_ready(shard, key).await,
            _ => true,
        };
        if !ready {
            not_ready.push(key.to_string());
        }
    }
    let metadata = shard.metadata();
    // Kafka's `getCoordinator`, per key.
    let coordinator_of = |key: &str| -> Result<(i32, BrokerEndpoint), ErrorCode> {
        let kind = key_kind(req.version, body.key_type)?;
        // Kafka: Describe on the group or the transactional id, checked first.
        match kind {
            KeyKind::Group if !authorize::group(shard, req, Operation::Describe, key) => {
                return Err(ErrorCode::GROUP_AUTHORIZATION_FAILED)
            }
            KeyKind::Transaction
                if !authorize::allowed(
                    shard,
                    req,
                    Operation::Describe,
                    ResourceType::TransactionalId,
                    key,
                ) =>
            {
                return Err(ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            }
            _ => {}
        }
        if not_ready.iter().any(|k| k == key) {
            return Err(ErrorCode::COORDINATOR_NOT_AVAILABLE);
        }
        let node = match kind {
            KeyKind::Group => group_coordinator(&metadata, key),
            KeyKind::Transaction => crate::transactions::coordinator_of(shard, key)
                .map(|(_, leader)| leader)
                .filter(|&leader| leader >= 0),
        }
        .ok_or(ErrorCode::COORDINATOR_NOT_AVAILABLE)?;
        metadata
            .brokers
            .iter()
            .find(|b| b.node_id == node)
            .and_then(|b| b.endpoint(&req.connection.listener.name))
            .map(|e| (node, e.clone()))
            .ok_or(ErrorCode::COORDINATOR_NOT_AVAILABLE)
    };
    let refused = |code: ErrorCode, key: &str| {
        errors::refused(
            shard,
            ApiKey::FindCoordinator,
            code,
            &format_args!("key type {} key {key:?}", body.key_type),
        )
    };
    let resp = if req.version >= 4 {
        FindCoordinatorResponse::default().with_coordinators(
            body.coordinator_keys
                .iter()
                .map(|key| {
                    let c = Coordinator::default().with_key(key.clone());
                    match coordinator_of(key.as_str()) {
                        Ok((node, e)) => c
                            .with_node_id(BrokerId(node))
                            .with_host(StrBytes::from_string(e.host))
                            .with_port(e.port),
                        Err(code) => {
                            refused(code, key.as_str());
                            c.with_error_code(code.code()).with_node_id(BrokerId(-1))
                        }
                    }
                })
                .collect(),
        )
    } else {
        match coordinator_of(body.key.as_str()) {
            Ok((node, e)) => FindCoordinatorResponse::default()
                .with_node_id(BrokerId(node))
                .with_host(StrBytes::from_string(e.host))
                .with_port(e.port),
            Err(code) => {
                refused(code, body.key.as_str());
                FindCoordinatorResponse::default()
                    .with_error_code(code.code())
                    .with_node_id(BrokerId(-1))
            }
        }
    };
    req.respond(ApiKey::FindCoordinator, &resp)
}

/// What a key names.
#[derive(Debug, PartialEq, Eq)]
enum KeyKind {
    Group,
    Transaction,
}

/// Kafka's key types as `getCoordinator` takes them: share groups (KIP-932) came with v6 and
/// have no coordinator in 3.9; an unknown type is INVALID_REQUEST.
fn key_kind(version: i16, key_type: i8) -> Result<KeyKind, ErrorCode> {
    match key_type {
        GROUP_KEY => Ok(KeyKind::Group),
        TRANSACTION_KEY => Ok(KeyKind::Transaction),
        SHARE_KEY if version < 6 => Err(ErrorCode::INVALID_REQUEST),
        SHARE_KEY => Err(ErrorCode::COORDINATOR_NOT_AVAILABLE),
        _ => Err(ErrorCode::INVALID_REQUEST),
    }
}

/// The leader of the group's `__consumer_offsets` partition, if it has one.
fn group_coordinator(metadata: &ClusterMetadata, group: &str) -> Option<i32> {
    let topic = metadata.topic(CONSUMER_OFFSETS_TOPIC)?;
    let partition = coordinator_partition(group, topic.partitions.len() as i32);
    let leader = topic.partitions.get(partition as usize)?.leader;
    (leader >= 0).then_some(leader)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_types_are_kafkas() {
        assert_eq!(key_kind(0, GROUP_KEY), Ok(KeyKind::Group));
        assert_eq!(key_kind(1, TRANSACTION_KEY), Ok(KeyKind::Transaction));
        assert_eq!(key_kind(5, SHARE_KEY), Err(ErrorCode::INVALID_REQUEST));
        assert_eq!(
            key_kind(6, SHARE_KEY),
            Err(ErrorCode::COORDINATOR_NOT_AVAILABLE)
        );
        assert_eq!(key_kind(6, 9), Err(ErrorCode::INVALID_REQUEST));
    }
}
