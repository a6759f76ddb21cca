//! Heartbeat: a member says it is alive; the answer tells it when a rebalance has begun.

use super::{authorize, errors, Request, Response};
use crate::groups;
use crate::protocol::errors::ErrorCode;
use crate::security::acl::Operation;
use crate::shard::Shard;
use kafka_protocol::messages::{ApiKey, HeartbeatRequest, HeartbeatResponse};

pub async fn handle(shard: &Shard, req: &Request, body: HeartbeatRequest) -> Response {
    let group_id = body.group_id.to_string();
    let code = if !authorize::group(shard, req, Operation::Read, &group_id) {
        ErrorCode::GROUP_AUTHORIZATION_FAILED
    } else if group_id.is_empty() {
        ErrorCode::INVALID_GROUP_ID
    } else {
        let member_id = body.member_id.to_string();
        let instance_id = body.group_instance_id.map(|i| i.to_string());
        let generation = body.generation_id;
        let group = group_id.clone();
        groups::on_coordinator(shard, &group_id, move |c, _| {
            Box::pin(async move { c.heartbeat(&group, &member_id, &instance_id, generation) })
        })
        .await
        .unwrap_or_else(|code| code)
    };
    errors::refused(shard, ApiKey::Heartbeat, code, &"heartbeat");
    req.respond(
        ApiKey::Heartbeat,
        &HeartbeatResponse::default().with_error_code(code.code()),
    )
}
