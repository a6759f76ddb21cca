//! ListGroups: every group this broker coordinates (each shard lists its own), optionally
//! filtered by state (v4+).

use super::{authorize, Request, Response};
use crate::security::acl::{Operation, ResourceType};
use crate::shard::Shard;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{ApiKey, GroupId, ListGroupsRequest, ListGroupsResponse};
use kafka_protocol::protocol::StrBytes;
use std::rc::Rc;

pub async fn handle(shard: &Shard, req: &Request, body: ListGroupsRequest) -> Response {
    let states: Vec<String> = body
        .states_filter
        .iter()
        .map(|s| s.to_ascii_lowercase())
        .collect();
    let per_shard = shard
        .router()
        .broadcast(|s: Rc<Shard>| {
            Box::pin(async move { s.service::<crate::groups::Coordinator>().list() })
        })
        .await;
    // Kafka: Describe on the cluster lists every group; otherwise only the groups the
    // principal may describe, silently.
    let all = authorize::allowed_quietly(
        shard,
        req,
        Operation::Describe,
        ResourceType::Cluster,
        authorize::CLUSTER_NAME,
    );
    let mut groups: Vec<crate::groups::ListedGroup> = per_shard
        .into_iter()
        .flatten()
        .flatten()
        .filter(|g| states.is_empty() || states.contains(&g.state.to_ascii_lowercase()))
        .filter(|g| {
            all || authorize::allowed_quietly(
                shard,
                req,
                Operation::Describe,
                ResourceType::Group,
                &g.group_id,
            )
        })
        .collect();
    groups.sort();
    let listed = groups
        .into_iter()
        .map(|g| {
            ListedGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(g.group_id)))
                .with_protocol_type(StrBytes::from_string(g.protocol_type))
                .with_group_state(StrBytes::from_static_str(g.state))
                .with_group_type(StrBytes::from_static_str("classic"))
        })
        .collect();
    req.respond(
        ApiKey::ListGroups,
        &ListGroupsResponse::default().with_groups(listed),
    )
}
