//! DeleteGroups: removes empty groups and their committed offsets (tombstones in
//! `__consumer_offsets`); a group with members is NON_EMPTY_GROUP.

use super::{authorize, errors, Request, Response};
use crate::groups;
use crate::protocol::errors::ErrorCode;
use crate::security::acl::Operation;
use crate::shard::Shard;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{ApiKey, DeleteGroupsRequest, DeleteGroupsResponse};

pub async fn handle(shard: &Shard, req: &Request, body: DeleteGroupsRequest) -> Response {
    let mut results = Vec::with_capacity(body.groups_names.len());
    for group_id in body.groups_names {
        let id = group_id.to_string();
        let code = if !authorize::group(shard, req, Operation::Delete, &id) {
            ErrorCode::GROUP_AUTHORIZATION_FAILED
        } else if id.is_empty() {
            ErrorCode::INVALID_GROUP_ID
        } else {
            let asked = id.clone();
            groups::on_coordinator(shard, &id, move |c, partition| {
                Box::pin(async move { c.delete(partition, &asked).await })
            })
            .await
            .unwrap_or_else(|code| code)
        };
        errors::refused(
            shard,
            ApiKey::DeleteGroups,
            code,
            &format_args!("group {id:?}"),
        );
        results.push(
            DeletableGroupResult::default()
                .with_group_id(group_id)
                .with_error_code(code.code()),
        );
    }
    req.respond(
        ApiKey::DeleteGroups,
        &DeleteGroupsResponse::default().with_results(results),
    )
}
