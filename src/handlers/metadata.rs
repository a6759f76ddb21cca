//! Metadata: brokers, and topics with their partitions' leaders, replicas and ISR.
//!
//! A requested topic that does not exist is created when both the broker
//! (`auto.create.topics.enable`) and the request (v4+) allow it, with `num.partitions` and
//! `default.replication.factor`; the answer then already lists it.

use super::authorize::{self, CLUSTER_NAME};
use super::errors;
use super::{authorized_operations, Request, Response};
use crate::controller::{self, NewTopic};
use crate::metadata::{validate_topic_name, ClusterMetadata, PartitionInfo, TopicInfo};
use crate::protocol::errors::ErrorCode;
use crate::security::acl::{Operation, ResourceType};
use crate::shard::routing::on_controller;
use crate::shard::Shard;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{ApiKey, BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

/// What a request asks for: every topic, topics by name, or (v12+, KIP-516) topics by id.
enum Asked {
    All,
    Names(Vec<String>),
    Ids(Vec<Uuid>),
}

pub async fn handle(shard: &Shard, req: &Request, body: MetadataRequest) -> Response {
    let version = req.version;
    // v8+ (the cluster's until v10, when DescribeCluster took over) may ask for the
    // authorized operations; the fields exist only in those versions.
    let operations = AskedOperations {
        cluster: (8..=10).contains(&version) && body.include_cluster_authorized_operations,
        topics: version >= 8 && body.include_topic_authorized_operations,
    };
    let asked = match body.topics {
        None => Asked::All,
        // v0 has no null: an empty list asks for every topic.
        Some(list) if list.is_empty() && version == 0 => Asked::All,
        Some(list) => {
            if names_topics_by_id_too_early(version, &list) {
                return invalid_request(req, &list);
            }
            let ids: Vec<Uuid> = list
                .iter()
                .map(|t| t.topic_id)
                .filter(|id| !id.is_nil())
                .collect();
            if ids.is_empty() {
                Asked::Names(
                    list.into_iter()
                        .filter_map(|t| t.name.map(|n| n.0.to_string()))
                        .collect(),
                )
            } else {
                Asked::Ids(ids)
            }
        }
    };
    // Kafka's order: Describe is checked before existence (a denied name is
    // TOPIC_AUTHORIZATION_FAILED whether it exists or not), then Create for auto-creation.
    let may_describe = |name: &str| authorize::topic(shard, req, Operation::Describe, name);
    let denied = |name: Option<&str>, id: Uuid| {
        refused_topic(shard, ErrorCode::TOPIC_AUTHORIZATION_FAILED, name, id)
    };
    if let Asked::Ids(ids) = asked {
        let metadata = shard.metadata();
        let listing = Listing {
            metadata: &metadata,
            listener: &req.connection.listener.name,
            version,
        };
        let topics = ids
            .iter()
            .map(|id| match metadata.topic_by_id(id.as_bytes()) {
                // Topic ids are not secret: the id is answered, the name is not.
                Some(t) if !may_describe(&t.name) => denied(None, *id),
                Some(t) => listing.topic(t),
                None => refused_topic(shard, ErrorCode::UNKNOWN_TOPIC_ID, None, *id),
            })
            .collect();
        return respond(shard, req, topics, operations);
    }
    let requested = match asked {
        Asked::Names(names) => Some(names),
        _ => None,
    };
    let describable: BTreeSet<&str> = requested
        .iter()
        .flatten()
        .map(String::as_str)
        .filter(|n| may_describe(n))
        .collect();
    let allow_auto =
        shard.config.broker.auto_create_topics && (version < 4 || body.allow_auto_topic_creation);
    let mut may_not_create = BTreeSet::new();
    if let (true, Some(names)) = (allow_auto, &requested) {
        let missing: Vec<String> = {
            let metadata = shard.metadata();
            names
                .iter()
                .filter(|n| describable.contains(n.as_str()) && metadata.topic(n).is_none())
                .cloned()
                .collect()
        };
        let (creatable, refused): (Vec<String>, Vec<String>) = if authorize::allowed_quietly(
            shard,
            req,
            Operation::Create,
            ResourceType::Cluster,
            CLUSTER_NAME,
        ) {
            (missing, Vec::new())
        } else {
            missing
                .into_iter()
                .partition(|n| authorize::topic(shard, req, Operation::Create, n))
        };
        may_not_create.extend(refused);
        auto_create(shard, &creatable).await;
    }
    let metadata = shard.metadata();
    let listing = Listing {
        metadata: &metadata,
        listener: &req.connection.listener.name,
        version,
    };
    let topics: Vec<MetadataResponseTopic> = match &requested {
        // Every topic: those the principal may not describe are left out, unannounced.
        None => metadata
            .topics
            .values()
            .filter(|t| {
                authorize::allowed_quietly(
                    shard,
                    req,
                    Operation::Describe,
                    ResourceType::Topic,
                    &t.name,
                )
            })
            .map(|t| listing.topic(t))
            .collect(),
        Some(names) => names
            .iter()
            .map(|name| match metadata.topic(name) {
                _ if !describable.contains(name.as_str()) || may_not_create.contains(name) => {
                    denied(Some(name), Uuid::nil())
                }
                Some(t) => listing.topic(t),
                None => {
                    let code = if validate_topic_name(name).is_err() {
                        ErrorCode::INVALID_TOPIC_EXCEPTION
                    } else {
                        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
                    };
                    refused_topic(shard, code, Some(name), Uuid::nil())
                }
            })
            .collect(),
    };
    drop(metadata);
    respond(shard, req, topics, operations)
}

/// Which authorized-operations sets the client asked for.
#[derive(Clone, Copy)]
struct AskedOperations {
    cluster: bool,
    topics: bool,
}

/// The answer: this view's brokers, cluster id and controller, and `topics`.
fn respond(
    shard: &Shard,
    req: &Request,
    mut topics: Vec<MetadataResponseTopic>,
    operations: AskedOperations,
) -> Response {
    if operations.topics {
        for t in topics.iter_mut().filter(|t| t.error_code == 0) {
            let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
            t.topic_authorized_operations =
                authorize::operations(shard, req, ResourceType::Topic, &name);
        }
    }
    let cluster_operations = if !operations.cluster {
        authorized_operations::NOT_REQUESTED
    } else if authorize::cluster(shard, req, Operation::Describe) {
        authorize::operations(shard, req, ResourceType::Cluster, CLUSTER_NAME)
    } else {
        0
    };
    let metadata = shard.metadata();
    let brokers = metadata
        .brokers_on(&req.connection.listener.name)
        .map(|(b, e)| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(b.node_id))
                .with_host(StrBytes::from_string(e.host.clone()))
                .with_port(e.port)
                .with_rack(b.rack.clone().map(StrBytes::from_string))
        })
        .collect();
    let resp = MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id(Some(StrBytes::from_string(metadata.cluster_id.clone())))
        .with_controller_id(BrokerId(metadata.controller_id))
        .with_cluster_authorized_operations(cluster_operations)
        .with_topics(topics);
    req.respond(ApiKey::Metadata, &resp)
}

/// A topic answered with `code` alone, by name or by id (the id is nil when asked by name),
/// the refusal counted and logged.
fn refused_topic(
    shard: &Shard,
    code: ErrorCode,
    name: Option<&str>,
    id: Uuid,
) -> MetadataResponseTopic {
    match name {
        Some(name) => errors::refused(
            shard,
            ApiKey::Metadata,
            code,
            &format_args!("topic {name:?}"),
        ),
        None => errors::refused(
            shard,
            ApiKey::Metadata,
            code,
            &format_args!("topic id {id}"),
        ),
    }
    MetadataResponseTopic::default()
        .with_error_code(code.code())
        .with_name(name.map(|n| TopicName(StrBytes::from_string(n.to_string()))))
        .with_topic_id(id)
}

/// Kafka: a null topic name, or a topic id, before v12 fails the whole request
/// (`handleTopicMetadataRequest`: "Topic IDs are not supported in requests for version").
fn names_topics_by_id_too_early(version: i16, asked: &[MetadataRequestTopic]) -> bool {
    version < 12
        && asked
            .iter()
            .any(|t| t.name.is_none() || !t.topic_id.is_nil())
}

/// Kafka's error response for an invalid Metadata request: every topic INVALID_REQUEST.
fn invalid_request(req: &Request, asked: &[MetadataRequestTopic]) -> Response {
    tracing::debug!("Metadata refused: a null topic name or a topic id before v12");
    let topics = asked
        .iter()
        .map(|t| {
            MetadataResponseTopic::default()
                .with_error_code(ErrorCode::INVALID_REQUEST.code())
                .with_name(t.name.clone())
        })
        .collect();
    req.respond(
        ApiKey::Metadata,
        &MetadataResponse::default().with_topics(topics),
    )
}

async fn auto_create(shard: &Shard, names: &[String]) {
    let metadata = shard.metadata();
    let missing: Vec<NewTopic> = names
        .iter()
        .filter(|n| metadata.topic(n).is_none() && validate_topic_name(n).is_ok())
        .map(|n| NewTopic {
            name: n.clone(),
            partitions: -1,
            replication_factor: -1,
            configs: BTreeMap::new(),
        })
        .collect();
    if missing.is_empty() {
        return;
    }
    let results = on_controller(shard, move |s| async move {
        controller::create_topics(&s, missing, false, &controller::Payer::Broker).await
    })
    .await
    .unwrap_or_default();
    for (name, r) in results {
        match r {
            Ok(_) => tracing::info!(topic = %name, "auto-created topic"),
            // Another request may have created it meanwhile; anything else is logged.
            Err(crate::controller::TopicError::AlreadyExists) => {}
            Err(e) => {
                tracing::warn!(topic = %name, error = %e, "auto-creating topic failed")
            }
        }
    }
}

/// How one request sees the partitions: through its listener, at its version.
struct Listing<'a> {
    metadata: &'a ClusterMetadata,
    listener: &'a str,
    version: i16,
}

impl Listing<'_> {
    fn topic(&self, t: &TopicInfo) -> MetadataResponseTopic {
        let partitions = t.partitions.iter().map(|p| self.partition(p)).collect();
        MetadataResponseTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(t.name.clone()))))
            .with_topic_id(Uuid::from_bytes(t.id))
            .with_is_internal(t.is_internal())
            .with_partitions(partitions)
    }

    /// Kafka's `ZkMetadataCache.getPartitionMetadata`: a leader that is not registered is
    /// LEADER_NOT_AVAILABLE; a registered leader without this request's listener is
    /// LISTENER_NOT_FOUND from v6 (LEADER_NOT_AVAILABLE before), with no leader id either way,
    /// so a client never connects to another listener's address. v0 alone lists only the
    /// replicas reachable on the listener and says REPLICA_NOT_AVAILABLE when it left any out.
    fn partition(&self, p: &PartitionInfo) -> MetadataResponsePartition {
        let reachable = |id: i32| {
            self.metadata
                .brokers
                .iter()
                .any(|b| b.node_id == id && b.endpoint(self.listener).is_some())
        };
        let only_reachable = |ids: &[i32]| -> Vec<BrokerId> {
            ids.iter()
                .filter(|&&id| self.version > 0 || reachable(id))
                .map(|&id| BrokerId(id))
                .collect()
        };
        let (replicas, isr) = (only_reachable(&p.replicas), only_reachable(&p.isr));
        let registered = self.metadata.brokers.iter().any(|b| b.node_id == p.leader);
        let (error, leader) = if p.leader < 0 || !registered {
            // No leader (offline, or not elected yet): clients wait and ask again.
            (ErrorCode::LEADER_NOT_AVAILABLE, -1)
        } else if !reachable(p.leader) {
            tracing::debug!(
                leader = p.leader,
                listener = self.listener,
                "Metadata: the leader has no such listener"
            );
            let error = if self.version >= 6 {
                ErrorCode::LISTENER_NOT_FOUND
            } else {
                ErrorCode::LEADER_NOT_AVAILABLE
            };
            (error, -1)
        } else if replicas.len() < p.replicas.len() || isr.len() < p.isr.len() {
            (ErrorCode::REPLICA_NOT_AVAILABLE, p.leader)
        } else {
            (ErrorCode::NONE, p.leader)
        };
        MetadataResponsePartition::default()
            .with_error_code(error.code())
            .with_partition_index(p.index)
            .with_leader_id(BrokerId(leader))
            .with_leader_epoch(p.leader_epoch)
            .with_replica_nodes(replicas)
            .with_isr_nodes(isr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_are_asked_by_id_only_from_v12() {
        let by_name = MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str("t"))));
        let by_id = MetadataRequestTopic::default()
            .with_name(None)
            .with_topic_id(Uuid::from_bytes([1; 16]));
        assert!(!names_topics_by_id_too_early(
            11,
            std::slice::from_ref(&by_name)
        ));
        assert!(names_topics_by_id_too_early(
            11,
            std::slice::from_ref(&by_id)
        ));
        assert!(!names_topics_by_id_too_early(12, &[by_id, by_name]));
    }
}
