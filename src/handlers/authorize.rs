//! Asking the authorizer, as KafkaApis' `AuthHelper` does: the connection's principal and host,
//! an operation on a resource, the ACLs of the current metadata. Without
//! `authorizer.class.name` everything is allowed. A denial is counted per API and principal
//! (`ferrite_authorization_denied_total`) and logged, at most once a second per shard.

use super::authorized_operations;
use super::Request;
use crate::security::acl::{Operation, ResourceType};
use crate::shard::Shard;

/// The one Cluster resource's name (Kafka's `CLUSTER_NAME`).
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// Whether the request's principal may do `operation` on the resource; a denial is counted
/// and logged.
pub fn allowed(
    shard: &Shard,
    req: &Request,
    operation: Operation,
    kind: ResourceType,
    name: &str,
) -> bool {
    let ok = allowed_quietly(shard, req, operation, kind, name);
    if !ok {
        let principal = req.connection.principal.borrow().to_string();
        if shard.metrics.denied(req.api_key, &principal) {
            tracing::info!(
                api = ?req.api_key,
                %principal,
                host = host(req),
                operation = operation.name(),
                resource = %format_args!("{}:{name}", kind.name()),
                "authorization denied (further denials this second are only counted)"
            );
        }
    }
    ok
}

/// As `allowed`, neither counted nor logged: for filtering (Metadata for all topics leaves out
/// what the principal may not see, as Kafka does without logging) and for fallbacks.
pub fn allowed_quietly(
    shard: &Shard,
    req: &Request,
    operation: Operation,
    kind: ResourceType,
    name: &str,
) -> bool {
    let Some(authorizer) = &shard.config.authorizer else {
        return true;
    };
    let metadata = shard.metadata();
    let principal = req.connection.principal.borrow();
    authorizer.authorize(&metadata.acls, &principal, host(req), operation, kind, name)
}

/// Whether the principal may do `operation` on some resource of `kind` (Kafka's
/// `authorizeByResourceType`).
pub fn may_on_some(shard: &Shard, req: &Request, operation: Operation, kind: ResourceType) -> bool {
    let Some(authorizer) = &shard.config.authorizer else {
        return true;
    };
    let metadata = shard.metadata();
    let principal = req.connection.principal.borrow();
    authorizer.authorize_any(&metadata.acls, &principal, host(req), operation, kind)
}

/// `operation` on the Cluster resource.
pub fn cluster(shard: &Shard, req: &Request, operation: Operation) -> bool {
    allowed(shard, req, operation, ResourceType::Cluster, CLUSTER_NAME)
}

/// `operation` on the topic.
pub fn topic(shard: &Shard, req: &Request, operation: Operation, name: &str) -> bool {
    allowed(shard, req, operation, ResourceType::Topic, name)
}

/// `operation` on the group.
pub fn group(shard: &Shard, req: &Request, operation: Operation, name: &str) -> bool {
    allowed(shard, req, operation, ResourceType::Group, name)
}

pub fn transactional_id(shard: &Shard, req: &Request, operation: Operation, id: &str) -> bool {
    allowed(shard, req, operation, ResourceType::TransactionalId, id)
}

/// The client's address as ACL hosts name it (no leading `/`).
fn host(req: &Request) -> &str {
    req.client_host.trim_start_matches('/')
}

/// The operations the principal may do on the resource, as KIP-430's bit set (Kafka's
/// `authorizedOperations`): every operation the type supports that the authorizer allows.
pub fn operations(shard: &Shard, req: &Request, kind: ResourceType, name: &str) -> i32 {
    let supported = match kind {
        ResourceType::Topic => authorized_operations::TOPIC,
        ResourceType::Group => authorized_operations::GROUP,
        ResourceType::Cluster => authorized_operations::CLUSTER,
        _ => 0,
    };
    if shard.config.authorizer.is_none() {
        return supported;
    }
    Operation::ALL
        .into_iter()
        .filter(|op| supported & (1 << op.code()) != 0)
        .filter(|op| allowed_quietly(shard, req, *op, kind, name))
        .fold(0, |set, op| set | (1 << op.code()))
}
