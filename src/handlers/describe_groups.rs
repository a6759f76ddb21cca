//! DescribeGroups: a group's state, protocol and members with their subscriptions and
//! assignments. A group that does not exist is described as Dead, as Kafka does.

use super::{authorize, authorized_operations, errors, Request, Response};
use crate::groups;
use crate::protocol::errors::ErrorCode;
use crate::security::acl::{Operation, ResourceType};
use crate::shard::Shard;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{ApiKey, DescribeGroupsRequest, DescribeGroupsResponse};
use kafka_protocol::protocol::StrBytes;

pub async fn handle(shard: &Shard, req: &Request, body: DescribeGroupsRequest) -> Response {
    let mut described = Vec::with_capacity(body.groups.len());
    for group_id in body.groups {
        let id = group_id.to_string();
        let out = DescribedGroup::default().with_group_id(group_id);
        if !authorize::group(shard, req, Operation::Describe, &id) {
            let code = ErrorCode::GROUP_AUTHORIZATION_FAILED;
            described.push(out.with_error_code(code.code()));
            continue;
        }
        if id.is_empty() {
            errors::refused(
                shard,
                ApiKey::DescribeGroups,
                ErrorCode::INVALID_GROUP_ID,
                &"an empty group id",
            );
            described.push(out.with_error_code(ErrorCode::INVALID_GROUP_ID.code()));
            continue;
        }
        let asked = id.clone();
        let result = groups::on_coordinator(shard, &id, move |c, _| {
            Box::pin(async move { c.describe(&asked) })
        })
        .await;
        let d = match result {
            Ok(d) => d,
            Err(code) => {
                errors::refused(
                    shard,
                    ApiKey::DescribeGroups,
                    code,
                    &format_args!("group {id}"),
                );
                described.push(out.with_error_code(code.code()));
                continue;
            }
        };
        described.push(
            out.with_error_code(d.error.code())
                .with_group_state(StrBytes::from_static_str(d.state))
                .with_protocol_type(StrBytes::from_string(d.protocol_type))
                .with_protocol_data(StrBytes::from_string(d.protocol))
                .with_authorized_operations(authorized_operations::if_asked(
                    body.include_authorized_operations,
                    authorize::operations(shard, req, ResourceType::Group, &id),
                ))
                .with_members(
                    d.members
                        .into_iter()
                        .map(|m| {
                            DescribedGroupMember::default()
                                .with_member_id(StrBytes::from_string(m.member_id))
                                .with_group_instance_id(m.instance_id.map(StrBytes::from_string))
                                .with_client_id(StrBytes::from_string(m.client_id))
                                .with_client_host(StrBytes::from_string(m.client_host))
                                .with_member_metadata(m.metadata)
                                .with_member_assignment(m.assignment)
                        })
                        .collect(),
                ),
        );
    }
    req.respond(
        ApiKey::DescribeGroups,
        &DescribeGroupsResponse::default().with_groups(described),
    )
}
