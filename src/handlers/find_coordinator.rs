//! FindCoordinator: on a single broker, this broker coordinates every group (and would every
//! transaction). The first group lookup creates `__consumer_offsets`, as Kafka does, so the
//! coordinator is ready when the client's JoinGroup arrives.

use super::{errors, Request, Response};
use crate::server::shard::Shard;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{ApiKey, BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

/// FindCoordinator's key type for consumer groups.
const GROUP_KEY: i8 = 0;

pub async fn handle(shard: &Shard, req: &Request, body: FindCoordinatorRequest) -> Response {
    if body.key_type == GROUP_KEY {
        if let Err(code) = crate::groups::ensure_offsets_topic(shard).await {
            let resp = FindCoordinatorResponse::default()
                .with_error_code(code)
                .with_node_id(BrokerId(-1));
            return req.respond(ApiKey::FindCoordinator, &resp);
        }
    }
    let metadata = shard.metadata();
    let Some(me) = metadata
        .brokers
        .iter()
        .find(|b| b.node_id == metadata.controller_id)
        .cloned()
    else {
        let resp = FindCoordinatorResponse::default()
            .with_error_code(errors::COORDINATOR_NOT_AVAILABLE)
            .with_node_id(BrokerId(-1));
        return req.respond(ApiKey::FindCoordinator, &resp);
    };
    let host = StrBytes::from_string(me.host.clone());
    let resp = if req.version >= 4 {
        FindCoordinatorResponse::default().with_coordinators(
            body.coordinator_keys
                .into_iter()
                .map(|key| {
                    Coordinator::default()
                        .with_key(key)
                        .with_node_id(BrokerId(me.node_id))
                        .with_host(host.clone())
                        .with_port(me.port)
                })
                .collect(),
        )
    } else {
        FindCoordinatorResponse::default()
            .with_node_id(BrokerId(me.node_id))
            .with_host(host)
            .with_port(me.port)
    };
    req.respond(ApiKey::FindCoordinator, &resp)
}
