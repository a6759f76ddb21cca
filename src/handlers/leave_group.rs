//! LeaveGroup: members leave at once (v3+: several, by member or instance id) instead of
//! waiting for their sessions to expire.

use super::{authorize, errors, Request, Response};
use crate::groups;
use crate::protocol::errors::ErrorCode;
use crate::security::acl::Operation;
use crate::shard::Shard;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{ApiKey, LeaveGroupRequest, LeaveGroupResponse};
use kafka_protocol::protocol::StrBytes;

pub async fn handle(shard: &Shard, req: &Request, body: LeaveGroupRequest) -> Response {
    let group_id = body.group_id.to_string();
    let members: Vec<(String, Option<String>)> = if req.version >= 3 {
        body.members
            .into_iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.group_instance_id.map(|i| i.to_string()),
                )
            })
            .collect()
    } else {
        vec![(body.member_id.to_string(), None)]
    };
    let results: Result<Vec<ErrorCode>, ErrorCode> =
        if !authorize::group(shard, req, Operation::Read, &group_id) {
            Err(ErrorCode::GROUP_AUTHORIZATION_FAILED)
        } else if group_id.is_empty() {
            Err(ErrorCode::INVALID_GROUP_ID)
        } else {
            let (group, asked) = (group_id.clone(), members.clone());
            groups::on_coordinator(shard, &group_id, move |c, partition| {
                Box::pin(async move { c.leave(partition, &group, asked) })
            })
            .await
        };
    match &results {
        Err(code) => errors::refused(shard, ApiKey::LeaveGroup, *code, &"leave"),
        Ok(codes) => codes.iter().for_each(|&code| {
            errors::refused(shard, ApiKey::LeaveGroup, code, &"a member's leave")
        }),
    }
    let resp = match results {
        Err(code) => LeaveGroupResponse::default().with_error_code(code.code()),
        Ok(codes) if req.version >= 3 => LeaveGroupResponse::default().with_members(
            members
                .into_iter()
                .zip(codes)
                .map(|((id, instance), code)| {
                    MemberResponse::default()
                        .with_member_id(StrBytes::from_string(id))
                        .with_group_instance_id(instance.map(StrBytes::from_string))
                        .with_error_code(code.code())
                })
                .collect(),
        ),
        Ok(codes) => LeaveGroupResponse::default()
            .with_error_code(codes.first().copied().unwrap_or_default().code()),
    };
    req.respond(ApiKey::LeaveGroup, &resp)
}
