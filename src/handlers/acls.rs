//! CreateAcls (30), DescribeAcls (29) and DeleteAcls (31), as Kafka's `AclApis`: without an
//! authorizer each answers SECURITY_DISABLED; creating and deleting need Alter on the cluster,
//! describing needs Describe (CLUSTER_AUTHORIZATION_FAILED otherwise). A binding Kafka refuses
//! (an unknown or ANY element, a Cluster resource not named `kafka-cluster`, an empty name or
//! one with `/`, a principal that is not `Type:name`) is INVALID_REQUEST, alone: the others of
//! the request are created. Changes are in force on every shard (every broker) when answered.

use super::authorize::{self, CLUSTER_NAME};
use super::{errors, Request, Response};
use crate::controller::{self, TopicError};
use crate::protocol::errors::ErrorCode;
use crate::security::acl::{
    self, AccessEntry, AclBinding, AclFilter, Operation, PatternFilter, PatternType, Permission,
    ResourcePattern, ResourceType,
};
use crate::shard::routing::on_controller;
use crate::shard::Shard;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    ApiKey, CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

/// ANY in a filter, as Kafka's enums code it.
const ANY: i8 = 1;
/// MATCH, a pattern-type filter only.
const MATCH: i8 = 2;

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// Why the request is not served at all: no authorizer, or the principal may not.
fn refusal(
    shard: &Shard,
    req: &Request,
    operation: Operation,
) -> Option<(ErrorCode, &'static str)> {
    if shard.config.authorizer.is_none() {
        return Some((ErrorCode::SECURITY_DISABLED, "No Authorizer is configured."));
    }
    if !authorize::cluster(shard, req, operation) {
        return Some((
            ErrorCode::CLUSTER_AUTHORIZATION_FAILED,
            "Cluster authorization failed.",
        ));
    }
    None
}

/// Replaces the ACLs of the changed patterns, through the controller.
async fn store(
    shard: &Shard,
    changes: BTreeMap<ResourcePattern, BTreeSet<AccessEntry>>,
) -> Result<(), TopicError> {
    if changes.is_empty() {
        return Ok(());
    }
    let changes: Vec<_> = changes.into_iter().collect();
    on_controller(shard, move |s| async move {
        controller::alter_acls(&s, changes).await
    })
    .await
    .unwrap_or(Err(TopicError::Storage(
        "the controller did not answer".into(),
    )))
}

/// A creation as a binding, or why Kafka refuses it.
fn binding_of(c: &AclCreation, version: i16) -> Result<AclBinding, String> {
    let resource_type =
        ResourceType::from_code(c.resource_type).ok_or("ACL binding contains unknown elements")?;
    // v0 has no pattern type: every pattern is literal.
    let pattern_type = if version == 0 {
        PatternType::Literal
    } else {
        PatternType::from_code(c.resource_pattern_type)
            .ok_or("ACL binding contains unknown elements")?
    };
    let operation =
        Operation::from_code(c.operation).ok_or("ACL binding contains unknown elements")?;
    let permission =
        Permission::from_code(c.permission_type).ok_or("ACL binding contains unknown elements")?;
    let name = c.resource_name.to_string();
    if resource_type == ResourceType::Cluster && name != CLUSTER_NAME {
        return Err(format!(
            "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        ));
    }
    if name.is_empty() {
        return Err("Invalid empty resource name".into());
    }
    if name.contains('/') {
        return Err(format!(
            "ACL binding contains invalid resource name: {name}"
        ));
    }
    let principal = c.principal.to_string();
    if !principal
        .split_once(':')
        .is_some_and(|(t, n)| !t.is_empty() && !n.is_empty())
    {
        return Err(format!("Could not parse principal from `{principal}` (no colon is present separating the principal type from the principal name)"));
    }
    Ok(AclBinding {
        pattern: ResourcePattern {
            resource_type,
            name,
            pattern_type,
        },
        entry: AccessEntry {
            principal,
            host: c.host.to_string(),
            operation,
            permission,
        },
    })
}

pub async fn handle_create(shard: &Rc<Shard>, req: &Request, body: CreateAclsRequest) -> Response {
    let result = |code: ErrorCode, message: Option<String>| {
        AclCreationResult::default()
            .with_error_code(code.code())
            .with_error_message(message.map(StrBytes::from_string))
    };
    if let Some((code, message)) = refusal(shard, req, Operation::Alter) {
        errors::refused(shard, ApiKey::CreateAcls, code, &message);
        let results = body
            .creations
            .iter()
            .map(|_| result(code, Some(message.to_string())))
            .collect();
        return req.respond(
            ApiKey::CreateAcls,
            &CreateAclsResponse::default().with_results(results),
        );
    }
    let parsed: Vec<Result<AclBinding, String>> = body
        .creations
        .iter()
        .map(|c| binding_of(c, req.version))
        .collect();
    let mut changes: BTreeMap<ResourcePattern, BTreeSet<AccessEntry>> = BTreeMap::new();
    {
        let metadata = shard.metadata();
        for b in parsed.iter().flatten() {
            changes
                .entry(b.pattern.clone())
                .or_insert_with(|| metadata.acls.get(&b.pattern).cloned().unwrap_or_default())
                .insert(b.entry.clone());
        }
    }
    let stored = store(shard, changes).await;
    let results = parsed
        .into_iter()
        .map(|p| match (p, &stored) {
            (Err(why), _) => {
                errors::refused(shard, ApiKey::CreateAcls, ErrorCode::INVALID_REQUEST, &why);
                result(ErrorCode::INVALID_REQUEST, Some(why))
            }
            (Ok(_), Ok(())) => result(ErrorCode::NONE, None),
            (Ok(_), Err(e)) => {
                let code = e.code();
                errors::refused(shard, ApiKey::CreateAcls, code, e);
                result(code, Some(e.to_string()))
            }
        })
        .collect();
    req.respond(
        ApiKey::CreateAcls,
        &CreateAclsResponse::default().with_results(results),
    )
}

/// A DescribeAcls or DeleteAcls filter from its wire codes; `None` if a code is unknown.
#[allow(clippy::too_many_arguments)]
fn filter_of(
    version: i16,
    resource_type: i8,
    name: Option<&StrBytes>,
    pattern_type: i8,
    principal: Option<&StrBytes>,
    host: Option<&StrBytes>,
    operation: i8,
    permission: i8,
) -> Option<AclFilter> {
    let pattern = match (version, pattern_type) {
        (0, _) => PatternFilter::Exactly(PatternType::Literal),
        (_, ANY) => PatternFilter::Any,
        (_, MATCH) => PatternFilter::Match,
        (_, code) => PatternFilter::Exactly(PatternType::from_code(code)?),
    };
    Some(AclFilter {
        resource_type: match resource_type {
            ANY => None,
            code => Some(ResourceType::from_code(code)?),
        },
        name: name.map(|n| n.to_string()),
        pattern,
        principal: principal.map(|p| p.to_string()),
        host: host.map(|h| h.to_string()),
        operation: match operation {
            ANY => None,
            code => Some(Operation::from_code(code)?),
        },
        permission: match permission {
            ANY => None,
            code => Some(Permission::from_code(code)?),
        },
    })
}

pub fn handle_describe(shard: &Shard, req: &Request, body: DescribeAclsRequest) -> Response {
    let answer = |code: ErrorCode, message: &str| {
        DescribeAclsResponse::default()
            .with_error_code(code.code())
            .with_error_message(Some(text(message)))
    };
    if let Some((code, message)) = refusal(shard, req, Operation::Describe) {
        errors::refused(shard, ApiKey::DescribeAcls, code, &message);
        return req.respond(ApiKey::DescribeAcls, &answer(code, message));
    }
    let Some(filter) = filter_of(
        req.version,
        body.resource_type_filter,
        body.resource_name_filter.as_ref(),
        body.pattern_type_filter,
        body.principal_filter.as_ref(),
        body.host_filter.as_ref(),
        body.operation,
        body.permission_type,
    ) else {
        errors::refused(
            shard,
            ApiKey::DescribeAcls,
            ErrorCode::INVALID_REQUEST,
            &"filter",
        );
        return req.respond(
            ApiKey::DescribeAcls,
            &answer(
                ErrorCode::INVALID_REQUEST,
                "the filter has unknown elements",
            ),
        );
    };
    let metadata = shard.metadata();
    let mut grouped: BTreeMap<ResourcePattern, Vec<AclDescription>> = BTreeMap::new();
    for b in acl::bindings(&metadata.acls).filter(|b| filter.matches(b)) {
        grouped.entry(b.pattern).or_default().push(
            AclDescription::default()
                .with_principal(text(&b.entry.principal))
                .with_host(text(&b.entry.host))
                .with_operation(b.entry.operation.code())
                .with_permission_type(b.entry.permission.code()),
        );
    }
    let resources = grouped
        .into_iter()
        .map(|(p, acls)| {
            DescribeAclsResource::default()
                .with_resource_type(p.resource_type.code())
                .with_resource_name(text(&p.name))
                .with_pattern_type(p.pattern_type.code())
                .with_acls(acls)
        })
        .collect();
    let ok = DescribeAclsResponse::default()
        .with_error_message(None)
        .with_resources(resources);
    req.respond(ApiKey::DescribeAcls, &ok)
}

fn filter_of_delete(version: i16, f: &DeleteAclsFilter) -> Option<AclFilter> {
    filter_of(
        version,
        f.resource_type_filter,
        f.resource_name_filter.as_ref(),
        f.pattern_type_filter,
        f.principal_filter.as_ref(),
        f.host_filter.as_ref(),
        f.operation,
        f.permission_type,
    )
}

pub async fn handle_delete(shard: &Rc<Shard>, req: &Request, body: DeleteAclsRequest) -> Response {
    let failed = |code: ErrorCode, message: String| {
        DeleteAclsFilterResult::default()
            .with_error_code(code.code())
            .with_error_message(Some(StrBytes::from_string(message)))
    };
    if let Some((code, message)) = refusal(shard, req, Operation::Alter) {
        errors::refused(shard, ApiKey::DeleteAcls, code, &message);
        let results = body
            .filters
            .iter()
            .map(|_| failed(code, message.to_string()))
            .collect();
        return req.respond(
            ApiKey::DeleteAcls,
            &DeleteAclsResponse::default().with_filter_results(results),
        );
    }
    let filters: Vec<Option<AclFilter>> = body
        .filters
        .iter()
        .map(|f| filter_of_delete(req.version, f))
        .collect();
    // Each filter's matches in the ACLs as they are now; a binding two filters match is
    // reported by both, as Kafka does.
    let (matched, changes) = {
        let metadata = shard.metadata();
        let all: Vec<AclBinding> = acl::bindings(&metadata.acls).collect();
        let matched: Vec<Option<Vec<AclBinding>>> = filters
            .iter()
            .map(|f| {
                f.as_ref()
                    .map(|f| all.iter().filter(|b| f.matches(b)).cloned().collect())
            })
            .collect();
        let mut changes: BTreeMap<ResourcePattern, BTreeSet<AccessEntry>> = BTreeMap::new();
        for b in matched.iter().flatten().flatten() {
            changes
                .entry(b.pattern.clone())
                .or_insert_with(|| metadata.acls.get(&b.pattern).cloned().unwrap_or_default())
                .remove(&b.entry);
        }
        (matched, changes)
    };
    let stored = store(shard, changes).await;
    let results = matched
        .into_iter()
        .map(|m| match (m, &stored) {
            (None, _) => {
                errors::refused(
                    shard,
                    ApiKey::DeleteAcls,
                    ErrorCode::INVALID_REQUEST,
                    &"filter",
                );
                failed(
                    ErrorCode::INVALID_REQUEST,
                    "the filter has unknown elements".into(),
                )
            }
            (Some(bindings), Ok(())) => DeleteAclsFilterResult::default().with_matching_acls(
                bindings
                    .into_iter()
                    .map(|b| {
                        DeleteAclsMatchingAcl::default()
                            .with_resource_type(b.pattern.resource_type.code())
                            .with_resource_name(text(&b.pattern.name))
                            .with_pattern_type(b.pattern.pattern_type.code())
                            .with_principal(text(&b.entry.principal))
                            .with_host(text(&b.entry.host))
                            .with_operation(b.entry.operation.code())
                            .with_permission_type(b.entry.permission.code())
                    })
                    .collect(),
            ),
            (Some(_), Err(e)) => {
                let code = e.code();
                errors::refused(shard, ApiKey::DeleteAcls, code, e);
                failed(code, e.to_string())
            }
        })
        .collect();
    req.respond(
        ApiKey::DeleteAcls,
        &DeleteAclsResponse::default().with_filter_results(results),
    )
}
