//! DescribeCluster (KIP-700): the brokers, the controller and the cluster id, as Kafka's
//! `handleDescribeCluster` and `AuthHelper.computeDescribeClusterResponse` answer it.
//!
//! A broker serves the "brokers" endpoint type (1). Asking it for controllers (2) is
//! MISMATCHED_ENDPOINT_TYPE, any other type UNSUPPORTED_ENDPOINT_TYPE; v0 cannot carry those
//! codes and gets INVALID_REQUEST. A controller id not among the brokers is answered as -1.

use super::{authorize, authorized_operations, errors, Request, Response};
use crate::protocol::errors::ErrorCode;
use crate::security::acl::Operation;
use crate::shard::Shard;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{ApiKey, BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::StrBytes;

const BROKERS_ENDPOINT: i8 = 1;
const CONTROLLERS_ENDPOINT: i8 = 2;

pub fn handle(shard: &Shard, req: &Request, body: DescribeClusterRequest) -> Response {
    // Kafka: Describe on the cluster.
    if !authorize::cluster(shard, req, Operation::Describe) {
        let denied = DescribeClusterResponse::default()
            .with_error_code(ErrorCode::CLUSTER_AUTHORIZATION_FAILED.code())
            .with_error_message(Some(StrBytes::from_static_str(
                "Cluster authorization failed.",
            )));
        return req.respond(ApiKey::DescribeCluster, &denied);
    }
    let endpoint = if req.version == 0 {
        BROKERS_ENDPOINT
    } else {
        body.endpoint_type
    };
    if endpoint != BROKERS_ENDPOINT {
        let (code, message) = match (req.version, endpoint) {
            (0, _) => (ErrorCode::INVALID_REQUEST, format!("Unsupported endpoint type {endpoint}")),
            (_, CONTROLLERS_ENDPOINT) => (
                ErrorCode::MISMATCHED_ENDPOINT_TYPE,
                "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER".to_string(),
            ),
            _ => (
                ErrorCode::UNSUPPORTED_ENDPOINT_TYPE,
                format!("Unsupported endpoint type {endpoint}"),
            ),
        };
        errors::refused(shard, ApiKey::DescribeCluster, code, &message);
        let refused = DescribeClusterResponse::default()
            .with_error_code(code.code())
            .with_error_message(Some(StrBytes::from_string(message)));
        return req.respond(ApiKey::DescribeCluster, &refused);
    }
    let metadata = shard.metadata();
    let brokers: Vec<DescribeClusterBroker> = metadata
        .brokers_on(&req.connection.listener.name)
        .map(|(b, e)| {
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(b.node_id))
                .with_host(StrBytes::from_string(e.host.clone()))
                .with_port(e.port)
                .with_rack(b.rack.clone().map(StrBytes::from_string))
        })
        .collect();
    let controller = metadata.controller_id;
    let known = metadata.brokers.iter().any(|b| b.node_id == controller);
    let resp = DescribeClusterResponse::default()
        .with_cluster_id(StrBytes::from_string(metadata.cluster_id.clone()))
        .with_controller_id(BrokerId(if known { controller } else { -1 }))
        .with_cluster_authorized_operations(authorized_operations::if_asked(
            body.include_cluster_authorized_operations,
            authorized_operations::CLUSTER,
        ))
        .with_endpoint_type(BROKERS_ENDPOINT)
        .with_brokers(brokers);
    req.respond(ApiKey::DescribeCluster, &resp)
}
