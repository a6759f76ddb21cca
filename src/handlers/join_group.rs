//! JoinGroup: a member asks to join (or rejoin) a group and waits until the join phase of the
//! rebalance completes; the leader's answer carries every member's subscription.

use super::{authorize, errors, Request, Response};
use crate::groups::{self, JoinArgs, JoinReply};
use crate::protocol::errors::ErrorCode;
use crate::security::acl::Operation;
use crate::shard::Shard;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{ApiKey, JoinGroupRequest, JoinGroupResponse};
use kafka_protocol::protocol::StrBytes;
use std::time::Duration;

pub async fn handle(shard: &Shard, req: &Request, body: JoinGroupRequest) -> Response {
    let group_id = body.group_id.to_string();
    let member_id = body.member_id.to_string();
    // Kafka checks Read on the group first.
    let reply = if !authorize::group(shard, req, Operation::Read, &group_id) {
        JoinReply::error(ErrorCode::GROUP_AUTHORIZATION_FAILED, &member_id)
    } else if group_id.is_empty() {
        JoinReply::error(ErrorCode::INVALID_GROUP_ID, &member_id)
    } else {
        // v0 has no rebalance timeout: the session timeout stands for both.
        let rebalance_timeout_ms = if req.version == 0 {
            body.session_timeout_ms
        } else {
            body.rebalance_timeout_ms
        };
        let args = JoinArgs {
            group_id: group_id.clone(),
            member_id: member_id.clone(),
            instance_id: body.group_instance_id.map(|i| i.to_string()),
            protocol_type: body.protocol_type.to_string(),
            protocols: body
                .protocols
                .into_iter()
                .map(|p| (p.name.to_string(), p.metadata))
                .collect(),
            session_timeout: millis(body.session_timeout_ms),
            rebalance_timeout: millis(rebalance_timeout_ms),
            client_id: req.client_id.clone(),
            client_host: req.client_host.to_string(),
            version: req.version,
        };
        groups::on_coordinator(shard, &group_id, move |c, partition| {
            Box::pin(async move { c.join(partition, args).await })
        })
        .await
        .unwrap_or_else(|code| JoinReply::error(code, &member_id))
    };
    errors::refused(
        shard,
        ApiKey::JoinGroup,
        reply.error,
        &format_args!("group {group_id}"),
    );
    req.respond(ApiKey::JoinGroup, &response(req.version, reply))
}

fn millis(ms: i32) -> Duration {
    Duration::from_millis(ms.max(0) as u64)
}

fn response(version: i16, r: JoinReply) -> JoinGroupResponse {
    // Before v7 the protocol name is not nullable: an error answers "".
    let protocol = r.protocol.or_else(|| (version < 7).then(String::new));
    JoinGroupResponse::default()
        .with_error_code(r.error.code())
        .with_generation_id(r.generation)
        .with_protocol_type(r.protocol_type.map(StrBytes::from_string))
        .with_protocol_name(protocol.map(StrBytes::from_string))
        .with_leader(StrBytes::from_string(r.leader))
        .with_member_id(StrBytes::from_string(r.member_id))
        .with_skip_assignment(r.skip_assignment && version >= 9)
        .with_members(
            r.members
                .into_iter()
                .map(|m| {
                    JoinGroupResponseMember::default()
                        .with_member_id(StrBytes::from_string(m.member_id))
                        .with_group_instance_id(m.instance_id.map(StrBytes::from_string))
                        .with_metadata(m.metadata)
                })
                .collect(),
        )
}
