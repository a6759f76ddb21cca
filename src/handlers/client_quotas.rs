//! DescribeClientQuotas (v0–1) and AlterClientQuotas (v0–1), as Kafka's `ZkAdminManager`
//! answers them, for user and client-id entities (and both together), `<default>` included
//! (a null name):
//! - Describe: a filter of components, at most one per entity type, each an exact name, the
//!   default, or any; `strict` leaves out entities with parts the filter does not name. A
//!   component twice, an empty type or an EXACT without a name is INVALID_REQUEST for the whole
//!   request; another entity type (Kafka's custom ones) is UNSUPPORTED_VERSION.
//! - Alter: per entity, an empty entity, an unknown entity type, an empty name, an unknown key
//!   or a fractional value for a LONG key (the byte rates) is INVALID_REQUEST; `remove` deletes
//!   the key. Each entity's new set is written where the metadata lives, and is in force on
//!   every shard at once (`shard::client_quotas`).
//! - IP entities (`connection_creation_rate`) are not kept: they are INVALID_REQUEST
//!   ("IP quotas are not supported by Ferrite"), and an ip filter component finds nothing.

use super::{authorize, errors, Request, Response};
use crate::controller::{self, TopicError};
use crate::metadata::client_quotas::{self, EntityName, Match, QuotaEntity};
use crate::protocol::errors::ErrorCode;
use crate::security::acl::Operation;
use crate::shard::routing::on_controller;
use crate::shard::Shard;
use kafka_protocol::messages::{
    alter_client_quotas_response, describe_client_quotas_response, AlterClientQuotasRequest,
    AlterClientQuotasResponse, ApiKey, DescribeClientQuotasRequest, DescribeClientQuotasResponse,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;

const USER: &str = "user";
const CLIENT_ID: &str = "client-id";
const IP: &str = "ip";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// An entity's parts on the wire: (type, name; null is the default).
fn wire_parts(entity: &QuotaEntity) -> Vec<(&'static str, Option<String>)> {
    let name = |n: &EntityName| match n {
        EntityName::Default => None,
        EntityName::Named(s) => Some(s.clone()),
    };
    let mut parts = Vec::new();
    if let Some(u) = &entity.user {
        parts.push((USER, name(u)));
    }
    if let Some(c) = &entity.client_id {
        parts.push((CLIENT_ID, name(c)));
    }
    parts
}

pub fn handle_describe(
    shard: &Shard,
    req: &Request,
    body: DescribeClientQuotasRequest,
) -> Response {
    // Kafka: DescribeConfigs on the cluster.
    if !authorize::cluster(shard, req, Operation::DescribeConfigs) {
        let denied = DescribeClientQuotasResponse::default()
            .with_error_code(ErrorCode::CLUSTER_AUTHORIZATION_FAILED.code())
            .with_error_message(Some(StrBytes::from_static_str(
                "Cluster authorization failed.",
            )));
        return req.respond(ApiKey::DescribeClientQuotas, &denied);
    }
    let answer = match filter(&body) {
        Err((code, message)) => {
            errors::refused(shard, ApiKey::DescribeClientQuotas, code, &message);
            DescribeClientQuotasResponse::default()
                .with_error_code(code.code())
                .with_error_message(Some(s(&message)))
                .with_entries(None)
        }
        Ok(None) => DescribeClientQuotasResponse::default().with_entries(Some(Vec::new())),
        Ok(Some((user, client_id))) => {
            let metadata = shard.metadata();
            let entries = metadata
                .client_quotas
                .iter()
                .filter(|(e, values)| {
                    !values.is_empty()
                        && client_quotas::matches(user.as_ref(), e.user.as_ref(), body.strict)
                        && client_quotas::matches(
                            client_id.as_ref(),
                            e.client_id.as_ref(),
                            body.strict,
                        )
                })
                .map(|(e, values)| {
                    let entity = wire_parts(e)
                        .into_iter()
                        .map(|(t, n)| {
                            describe_client_quotas_response::EntityData::default()
                                .with_entity_type(s(t))
                                .with_entity_name(n.as_deref().map(s))
                        })
                        .collect();
                    let values = values
                        .iter()
                        .filter_map(|(k, v)| {
                            Some(
                                describe_client_quotas_response::ValueData::default()
                                    .with_key(s(k))
                                    .with_value(v.parse().ok()?),
                            )
                        })
                        .collect();
                    describe_client_quotas_response::EntryData::default()
                        .with_entity(entity)
                        .with_values(values)
                })
                .collect();
            DescribeClientQuotasResponse::default().with_entries(Some(entries))
        }
    };
    req.respond(ApiKey::DescribeClientQuotas, &answer)
}

/// The user and client-id components of a filter; `None` when it asks for IP entities only.
type Filter = (Option<Match>, Option<Match>);

fn filter(body: &DescribeClientQuotasRequest) -> Result<Option<Filter>, (ErrorCode, String)> {
    let invalid = |m: String| Err((ErrorCode::INVALID_REQUEST, m));
    let (mut user, mut client_id, mut ip) = (None, None, false);
    for c in &body.components {
        let wanted = match (c.match_type, c._match.as_ref()) {
            (0, Some(name)) => Match::Exact(name.to_string()),
            (0, None) => return invalid("MATCH_TYPE_EXACT needs a match string".into()),
            (1, _) => Match::Default,
            (2, _) => Match::Any,
            (other, _) => return invalid(format!("Unexpected match type: {other}")),
        };
        let slot = match c.entity_type.as_str() {
            USER => &mut user,
            CLIENT_ID => &mut client_id,
            IP => {
                if ip {
                    return invalid("Duplicate ip filter component entity type".into());
                }
                ip = true;
                continue;
            }
            "" => return invalid("Unexpected empty filter component entity type".into()),
            other => {
                return Err((
                    ErrorCode::UNSUPPORTED_VERSION,
                    format!("Custom entity type '{other}' not supported"),
                ))
            }
        };
        if slot.is_some() {
            return invalid(format!(
                "Duplicate {} filter component entity type",
                c.entity_type.as_str()
            ));
        }
        *slot = Some(wanted);
    }
    if ip && (user.is_some() || client_id.is_some()) {
        return invalid("Invalid entity filter component combination, IP filter component should not be used with user or clientId filter component.".into());
    }
    Ok((!ip).then_some((user, client_id)))
}

pub async fn handle_alter(
    shard: &Shard,
    req: &Request,
    body: AlterClientQuotasRequest,
) -> Response {
    let mut entries = Vec::with_capacity(body.entries.len());
    // Kafka: AlterConfigs on the cluster, else every entry CLUSTER_AUTHORIZATION_FAILED.
    let authorized = authorize::cluster(shard, req, Operation::AlterConfigs);
    for entry in &body.entries {
        let checked = if authorized {
            alteration(shard, entry)
        } else {
            Err((
                ErrorCode::CLUSTER_AUTHORIZATION_FAILED,
                "Cluster authorization failed.".to_string(),
            ))
        };
        let outcome = match checked {
            Err(e) => Err(e),
            Ok(_) if body.validate_only => Ok(()),
            Ok((entity, quotas)) => on_controller(shard, move |s| async move {
                controller::alter_client_quotas(&s, entity, quotas).await
            })
            .await
            .unwrap_or(Err(TopicError::Storage(
                "the controller did not answer".into(),
            )))
            .map_err(|e| (e.code(), e.to_string())),
        };
        let (code, message) = match outcome {
            Ok(()) => (0, None),
            Err((code, message)) => {
                errors::refused(shard, ApiKey::AlterClientQuotas, code, &message);
                (code.code(), Some(s(&message)))
            }
        };
        let entity = entry
            .entity
            .iter()
            .map(|p| {
                alter_client_quotas_response::EntityData::default()
                    .with_entity_type(p.entity_type.clone())
                    .with_entity_name(p.entity_name.clone())
            })
            .collect();
        entries.push(
            alter_client_quotas_response::EntryData::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_entity(entity),
        );
    }
    req.respond(
        ApiKey::AlterClientQuotas,
        &AlterClientQuotasResponse::default().with_entries(entries),
    )
}

/// The entity an AlterClientQuotas entry names and its new set of values, or Kafka's refusal.
fn alteration(
    shard: &Shard,
    entry: &kafka_protocol::messages::alter_client_quotas_request::EntryData,
) -> Result<(QuotaEntity, BTreeMap<String, String>), (ErrorCode, String)> {
    let invalid = |m: String| Err((ErrorCode::INVALID_REQUEST, m));
    if entry.entity.is_empty() {
        return invalid("Invalid empty client quota entity".into());
    }
    let mut entity = QuotaEntity::default();
    for part in &entry.entity {
        let name = match &part.entity_name {
            None => EntityName::Default,
            Some(n) if n.is_empty() => {
                return invalid(format!("Empty {} not supported", part.entity_type.as_str()))
            }
            Some(n) => EntityName::Named(n.to_string()),
        };
        match part.entity_type.as_str() {
            USER => entity.user = Some(name),
            CLIENT_ID => entity.client_id = Some(name),
            IP => return invalid("IP quotas are not supported by Ferrite".into()),
            other => return invalid(format!("Unhandled client quota entity type: {other}")),
        }
    }
    let mut quotas = shard
        .metadata()
        .client_quotas
        .get(&entity)
        .cloned()
        .unwrap_or_default();
    for op in &entry.ops {
        let key = op.key.to_string();
        if op.remove {
            quotas.remove(&key);
        } else {
            let value = client_quotas::stored_value(&key, op.value)
                .map_err(|m| (ErrorCode::INVALID_REQUEST, m))?;
            quotas.insert(key, value);
        }
    }
    Ok((entity, quotas))
}
