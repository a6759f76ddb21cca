//! SyncGroup: after the join phase, the leader sends the assignment and every member waits to
//! receive its own share.

use super::{authorize, errors, Request, Response};
use crate::groups::{self, SyncArgs, SyncReply};
use crate::protocol::errors::ErrorCode;
use crate::security::acl::Operation;
use crate::shard::Shard;
use kafka_protocol::messages::{ApiKey, SyncGroupRequest, SyncGroupResponse};
use kafka_protocol::protocol::StrBytes;

pub async fn handle(shard: &Shard, req: &Request, body: SyncGroupRequest) -> Response {
    let group_id = body.group_id.to_string();
    let reply = if !authorize::group(shard, req, Operation::Read, &group_id) {
        SyncReply::error(ErrorCode::GROUP_AUTHORIZATION_FAILED)
    } else if group_id.is_empty() {
        SyncReply::error(ErrorCode::INVALID_GROUP_ID)
    } else {
        let args = SyncArgs {
            group_id: group_id.clone(),
            generation: body.generation_id,
            member_id: body.member_id.to_string(),
            instance_id: body.group_instance_id.map(|i| i.to_string()),
            protocol_type: body.protocol_type.map(|p| p.to_string()),
            protocol: body.protocol_name.map(|p| p.to_string()),
            assignments: body
                .assignments
                .into_iter()
                .map(|a| (a.member_id.to_string(), a.assignment))
                .collect(),
        };
        groups::on_coordinator(shard, &group_id, move |c, partition| {
            Box::pin(async move { c.sync(partition, args).await })
        })
        .await
        .unwrap_or_else(SyncReply::error)
    };
    errors::refused(shard, ApiKey::SyncGroup, reply.error, &"sync");
    let resp = SyncGroupResponse::default()
        .with_error_code(reply.error.code())
        .with_protocol_type(reply.protocol_type.map(StrBytes::from_string))
        .with_protocol_name(reply.protocol.map(StrBytes::from_string))
        .with_assignment(reply.assignment);
    req.respond(ApiKey::SyncGroup, &resp)
}
