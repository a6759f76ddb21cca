//! FindCoordinator: a group's coordinator is the leader of its `__consumer_offsets` partition
//! (on a single broker, this broker). The first group lookup creates `__consumer_offsets`, as
//! Kafka does, so the coordinator is ready when the client's JoinGroup arrives.

use super::{errors, Request, Response};
use crate::groups::records::coordinator_partition;
use crate::metadata::{ClusterMetadata, CONSUMER_OFFSETS_TOPIC};
use crate::server::shard::Shard;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{ApiKey, BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

/// FindCoordinator's key type for consumer groups.
const GROUP_KEY: i8 = 0;

pub async fn handle(shard: &Shard, req: &Request, body: FindCoordinatorRequest) -> Response {
    if body.key_type == GROUP_KEY {
        if let Err(code) = crate::groups::ensure_offsets_topic(shard).await {
            shard.metrics.error(ApiKey::FindCoordinator, code);
            let resp = FindCoordinatorResponse::default()
                .with_error_code(code)
                .with_node_id(BrokerId(-1));
            return req.respond(ApiKey::FindCoordinator, &resp);
        }
    }
    let metadata = shard.metadata();
    let coordinator_of = |key: &str| {
        let node = if body.key_type == GROUP_KEY {
            group_coordinator(&metadata, key)?
        } else {
            // Transactions are not supported: this broker answers, and InitProducerId refuses.
            shard.config.node_id
        };
        metadata.brokers.iter().find(|b| b.node_id == node).cloned()
    };
    let resp = if req.version >= 4 {
        FindCoordinatorResponse::default().with_coordinators(
            body.coordinator_keys
                .into_iter()
                .map(|key| {
                    let found = coordinator_of(key.as_str());
                    let c = Coordinator::default().with_key(key);
                    match found {
                        Some(b) => c
                            .with_node_id(BrokerId(b.node_id))
                            .with_host(StrBytes::from_string(b.host))
                            .with_port(b.port),
                        None => c
                            .with_error_code(errors::COORDINATOR_NOT_AVAILABLE)
                            .with_node_id(BrokerId(-1)),
                    }
                })
                .collect(),
        )
    } else {
        match coordinator_of(body.key.as_str()) {
            Some(b) => FindCoordinatorResponse::default()
                .with_node_id(BrokerId(b.node_id))
                .with_host(StrBytes::from_string(b.host))
                .with_port(b.port),
            None => FindCoordinatorResponse::default()
                .with_error_code(errors::COORDINATOR_NOT_AVAILABLE)
                .with_node_id(BrokerId(-1)),
        }
    };
    req.respond(ApiKey::FindCoordinator, &resp)
}

/// The leader of the group's `__consumer_offsets` partition, if it has one.
fn group_coordinator(metadata: &ClusterMetadata, group: &str) -> Option<i32> {
    let topic = metadata.topic(CONSUMER_OFFSETS_TOPIC)?;
    let partition = coordinator_partition(group, topic.partitions.len() as i32);
    let leader = topic.partitions.get(partition as usize)?.leader;
    (leader >= 0).then_some(leader)
}
