//! AlterConfigs (v0–2: a resource's whole config set) and IncrementalAlterConfigs (v0–1:
//! SET, DELETE, APPEND, SUBTRACT on single keys), as Kafka's `ConfigAdminManager` and
//! `ZkAdminManager` answer them.
//!
//! - A resource named twice in one request: INVALID_REQUEST for each copy ("Each resource must
//!   appear at most once."); a key twice in one resource: INVALID_REQUEST ("Error due to
//!   duplicate config keys"); a null value for anything but DELETE: INVALID_REQUEST.
//! - Topics: an unknown topic is UNKNOWN_TOPIC_OR_PARTITION; the new set is checked as
//!   CreateTopics checks configs (INVALID_CONFIG), written where the topic's metadata lives
//!   (`meta/`, or `/config/topics/<t>` with a `/config/changes` notification) and in force on
//!   every shard at once. APPEND and SUBTRACT are for list configs only (`cleanup.policy`),
//!   starting from the default when unset; DELETE of a name that is not set does nothing.
//! - Brokers: the name is "" (the cluster default, every broker) or this broker's id (else
//!   INVALID_REQUEST, as Kafka's `ZkAdminManager.getBrokerId`). Only the dynamic settings
//!   (`config::broker::DYNAMIC_BROKER_KEYS`: the topic defaults and the cleaner's) can change;
//!   any other is INVALID_CONFIG ("Cannot update these configs dynamically"). Kept in
//!   `meta/broker-configs.json`, or `/config/brokers/<default>` and `/config/brokers/<id>`;
//!   a broker's own value wins over the cluster default, which wins over the static one.
//! - Broker loggers and other resource types: INVALID_REQUEST.

use super::{authorize, errors, Request, Response};
use crate::controller::{self, TopicError};
use crate::protocol::errors::ErrorCode;
use crate::security::acl::Operation;
use crate::shard::routing::on_controller;
use crate::shard::Shard;
use kafka_protocol::messages::{
    alter_configs_response, incremental_alter_configs_response, AlterConfigsRequest,
    AlterConfigsResponse, ApiKey, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::{BTreeMap, HashMap};

const TOPIC: i8 = 2;
const BROKER: i8 = 4;

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

/// Configs whose values are comma-separated lists (Kafka's `ConfigDef.Type.LIST`).
const LIST_TOPIC_CONFIGS: &[&str] = &["cleanup.policy"];
const LIST_BROKER_CONFIGS: &[&str] = &["log.cleanup.policy"];

/// One key's change, as either API asks it.
struct Change {
    name: String,
    op: i8,
    value: Option<String>,
}

/// One resource's answer.
type Outcome = Result<(), (ErrorCode, String)>;

pub async fn handle_incremental(
    shard: &Shard,
    req: &Request,
    body: IncrementalAlterConfigsRequest,
) -> Response {
    let asked: Vec<(i8, String, Vec<Change>)> = body
        .resources
        .into_iter()
        .map(|r| {
            let changes = r
                .configs
                .into_iter()
                .map(|c| Change {
                    name: c.name.to_string(),
                    op: c.config_operation,
                    value: c.value.map(|v| v.to_string()),
                })
                .collect();
            (r.resource_type, r.resource_name.to_string(), changes)
        })
        .collect();
    let outcomes = alter(shard, req, &asked, false, body.validate_only).await;
    let responses = asked
        .iter()
        .zip(outcomes)
        .map(|((kind, name, _), outcome)| {
            let (code, message) = answer(shard, ApiKey::IncrementalAlterConfigs, name, outcome);
            incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_resource_type(*kind)
                .with_resource_name(StrBytes::from_string(name.clone()))
        })
        .collect();
    req.respond(
        ApiKey::IncrementalAlterConfigs,
        &IncrementalAlterConfigsResponse::default().with_responses(responses),
    )
}

pub async fn handle_legacy(shard: &Shard, req: &Request, body: AlterConfigsRequest) -> Response {
    let asked: Vec<(i8, String, Vec<Change>)> = body
        .resources
        .into_iter()
        .map(|r| {
            let changes = r
                .configs
                .into_iter()
                .map(|c| Change {
                    name: c.name.to_string(),
                    op: SET,
                    value: c.value.map(|v| v.to_string()),
                })
                .collect();
            (r.resource_type, r.resource_name.to_string(), changes)
        })
        .collect();
    let outcomes = alter(shard, req, &asked, true, body.validate_only).await;
    let responses = asked
        .iter()
        .zip(outcomes)
        .map(|((kind, name, _), outcome)| {
            let (code, message) = answer(shard, ApiKey::AlterConfigs, name, outcome);
            alter_configs_response::AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_resource_type(*kind)
                .with_resource_name(StrBytes::from_string(name.clone()))
        })
        .collect();
    req.respond(
        ApiKey::AlterConfigs,
        &AlterConfigsResponse::default().with_responses(responses),
    )
}

fn answer(shard: &Shard, api: ApiKey, name: &str, outcome: Outcome) -> (i16, Option<StrBytes>) {
    match outcome {
        Ok(()) => (0, None),
        Err((code, message)) => {
            errors::refused(shard, api, code, &format_args!("{name}: {message}"));
            (code.code(), Some(StrBytes::from_string(message)))
        }
    }
}

/// Each resource's outcome, in request order. `replace`: the changes are the whole new set
/// (AlterConfigs) rather than operations on the current one.
async fn alter(
    shard: &Shard,
    req: &Request,
    asked: &[(i8, String, Vec<Change>)],
    replace: bool,
    validate_only: bool,
) -> Vec<Outcome> {
    let mut seen: HashMap<(i8, &str), usize> = HashMap::new();
    for (kind, name, _) in asked {
        *seen.entry((*kind, name.as_str())).or_default() += 1;
    }
    let mut outcomes = Vec::with_capacity(asked.len());
    for (kind, name, changes) in asked {
        let outcome = if seen[&(*kind, name.as_str())] > 1 {
            Err(invalid_request("Each resource must appear at most once."))
        } else if let Some(denied) = unauthorized(shard, req, *kind, name) {
            Err(denied)
        } else {
            match checked(changes) {
                Err(e) => Err(e),
                Ok(()) => match *kind {
                    TOPIC => alter_topic(shard, name, changes, replace, validate_only).await,
                    BROKER => alter_broker(shard, name, changes, replace, validate_only).await,
                    other => Err(invalid_request(&format!(
                        "Ferrite cannot alter configs of resource type {other}"
                    ))),
                },
            }
        };
        outcomes.push(outcome);
    }
    outcomes
}

/// Kafka: AlterConfigs on the topic, or on the cluster for broker resources.
fn unauthorized(shard: &Shard, req: &Request, kind: i8, name: &str) -> Option<(ErrorCode, String)> {
    let (allowed, code) = match kind {
        TOPIC => (
            authorize::topic(shard, req, Operation::AlterConfigs, name),
            ErrorCode::TOPIC_AUTHORIZATION_FAILED,
        ),
        BROKER => (
            authorize::cluster(shard, req, Operation::AlterConfigs),
            ErrorCode::CLUSTER_AUTHORIZATION_FAILED,
        ),
        _ => (true, ErrorCode::NONE),
    };
    (!allowed).then(|| (code, "Authorization failed.".to_string()))
}

fn invalid_request(message: &str) -> (ErrorCode, String) {
    (ErrorCode::INVALID_REQUEST, message.to_string())
}

fn invalid_config(message: String) -> (ErrorCode, String) {
    (ErrorCode::INVALID_CONFIG, message)
}

/// Kafka's `preprocess`: no key twice, no null value except for DELETE.
fn checked(changes: &[Change]) -> Outcome {
    let mut names: Vec<&str> = changes.iter().map(|c| c.name.as_str()).collect();
    names.sort_unstable();
    if names.windows(2).any(|w| w[0] == w[1]) {
        return Err(invalid_request("Error due to duplicate config keys"));
    }
    let nulls: Vec<&str> = changes
        .iter()
        .filter(|c| c.op != DELETE && c.value.is_none())
        .map(|c| c.name.as_str())
        .collect();
    if !nulls.is_empty() {
        return Err(invalid_request(&format!(
            "Null value not supported for : {}",
            nulls.join(", ")
        )));
    }
    Ok(())
}

/// `changes` applied to an entity's `configs`. APPEND and SUBTRACT are for the `lists` only,
/// starting from the value in force (`in_force`) when the entity sets none.
fn applied(
    mut configs: BTreeMap<String, String>,
    changes: &[Change],
    lists: &[&str],
    in_force: impl Fn(&str) -> Option<String>,
) -> Result<BTreeMap<String, String>, (ErrorCode, String)> {
    for c in changes {
        let value = c.value.clone().unwrap_or_default();
        match c.op {
            SET => {
                configs.insert(c.name.clone(), value);
            }
            DELETE => {
                configs.remove(&c.name);
            }
            APPEND | SUBTRACT => {
                let verb = if c.op == APPEND { "append" } else { "subtract" };
                if !lists.contains(&c.name.as_str()) {
                    return Err(invalid_config(format!(
                        "Config value {verb} is not allowed for config key: {}",
                        c.name
                    )));
                }
                let current = configs
                    .get(&c.name)
                    .cloned()
                    .or_else(|| in_force(&c.name))
                    .unwrap_or_default();
                let mut items: Vec<String> = current
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect();
                let given = value.split(',').map(str::to_string);
                if c.op == APPEND {
                    for item in given {
                        if !items.contains(&item) {
                            items.push(item);
                        }
                    }
                } else {
                    let gone: Vec<String> = given.collect();
                    items.retain(|i| !gone.contains(i));
                }
                configs.insert(c.name.clone(), items.join(","));
            }
            other => {
                return Err(invalid_request(&format!(
                    "Unknown config operation {other} for {}",
                    c.name
                )))
            }
        }
    }
    Ok(configs)
}

async fn alter_topic(
    shard: &Shard,
    topic: &str,
    changes: &[Change],
    replace: bool,
    validate_only: bool,
) -> Outcome {
    let Some(info) = shard.metadata().topic(topic).cloned() else {
        return Err((
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            TopicError::UnknownTopic.to_string(),
        ));
    };
    let current = if replace {
        BTreeMap::new()
    } else {
        info.configs.clone()
    };
    let settings = shard.settings();
    let configs = applied(current, changes, LIST_TOPIC_CONFIGS, |n| {
        settings.log.get(n)
    })?;
    let name = topic.to_string();
    let altered = on_controller(shard, move |s| async move {
        controller::alter_topic_configs(&s, &name, configs, validate_only).await
    })
    .await
    .unwrap_or(Err(TopicError::Storage(
        "the controller did not answer".into(),
    )));
    altered.map_err(|e| (e.code(), e.to_string()))
}

/// A broker resource: `""` (the cluster default) or this broker's id. The new set is built as
/// for a topic, from the entity's dynamic settings (not the static ones: those stay in the
/// tuning file), then checked: any setting Ferrite cannot change at run time is INVALID_CONFIG
/// ("Cannot update these configs dynamically", Kafka's `ConfigException`), and so is a name it
/// does not know, since no plugin could read it.
async fn alter_broker(
    shard: &Shard,
    name: &str,
    changes: &[Change],
    replace: bool,
    validate_only: bool,
) -> Outcome {
    let broker = if name.is_empty() {
        None
    } else {
        match name.parse::<i32>() {
            Err(_) => {
                return Err(invalid_request(&format!(
                    "Broker id must be an integer, but it is: {name}"
                )))
            }
            Ok(id) if id != shard.config.node_id => {
                return Err(invalid_request(&format!(
                    "Unexpected broker id, expected {}, but received {name}",
                    shard.config.node_id
                )))
            }
            Ok(id) => Some(id),
        }
    };
    let current = if replace {
        BTreeMap::new()
    } else {
        shard.metadata().broker_configs.of(broker).clone()
    };
    let settings = shard.settings();
    let configs = applied(current, changes, LIST_BROKER_CONFIGS, |n| {
        settings
            .entries()
            .iter()
            .find(|(k, _)| *k == n)
            .map(|(_, v)| v.clone())
    })?;
    on_controller(shard, move |s| async move {
        controller::alter_broker_configs(&s, broker, configs, validate_only).await
    })
    .await
    .unwrap_or(Err(TopicError::Storage(
        "the controller did not answer".into(),
    )))
    .map_err(|e| (e.code(), e.to_string()))
}
