//! DescribeConfigs: a topic's configs (its overrides, else the broker defaults), or the broker's.
//!
//! Sources as Kafka reports them, most specific first: DYNAMIC_TOPIC_CONFIG for a topic
//! override, DYNAMIC_BROKER_CONFIG for a value altered on this broker, DYNAMIC_DEFAULT_BROKER_CONFIG
//! for the cluster default altered at run time, STATIC_BROKER_CONFIG for one set in the tuning
//! file or with `--set`, DEFAULT_CONFIG otherwise; synonyms list every level that has a value.
//! Unknown requested names are left out, as Kafka does. As Kafka's `ConfigHelper`: the broker
//! resource `""` describes only the cluster's dynamic defaults; this broker's id describes
//! every setting, read-only unless it is dynamic; another broker's id is INVALID_REQUEST.

use super::{authorize, errors, Request, Response};
use crate::config::{is_dynamic, BrokerSettings, KafkaConfigType, BROKER_KEYS};
use crate::metadata::{topic_config, ClusterMetadata, TopicInfo};
use crate::protocol::errors::ErrorCode;
use crate::security::acl::Operation;
use crate::shard::Shard;
use ferrite_shards::config::CONFIG_KEYS;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{ApiKey, DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const SOURCE_TOPIC: i8 = 1;
const SOURCE_DYNAMIC_BROKER: i8 = 2;
const SOURCE_DYNAMIC_DEFAULT: i8 = 3;
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;

/// Kafka's ConfigType codes.
fn config_type(name: &str) -> i8 {
    const BOOLEAN: i8 = 1;
    const STRING: i8 = 2;
    const INT: i8 = 3;
    const LONG: i8 = 5;
    const DOUBLE: i8 = 6;
    const LIST: i8 = 7;
    match name {
        "cleanup.policy" | "log.cleanup.policy" => LIST,
        "compression.type" | "message.timestamp.type" => STRING,
        "min.cleanable.dirty.ratio" => DOUBLE,
        n if n.ends_with(".enable") => BOOLEAN,
        "index.interval.bytes"
        | "max.message.bytes"
        | "min.insync.replicas"
        | "num.partitions"
        | "message.max.bytes"
        | "socket.request.max.bytes"
        | "default.replication.factor" => INT,
        _ => LONG,
    }
}

fn doc(name: &str) -> Option<&'static str> {
    CONFIG_KEYS
        .iter()
        .find(|k| k.name == name)
        .map(|k| k.doc)
        .or_else(|| BROKER_KEYS.iter().find(|k| k.name == name).map(|k| k.doc))
        .or_else(|| {
            topic_config::BROKER_TOPIC_KEYS
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, d)| *d)
        })
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

pub fn handle(shard: &Shard, req: &Request, body: DescribeConfigsRequest) -> Response {
    let results = body
        .resources
        .iter()
        .map(|r| {
            let wanted = |name: &str| {
                r.configuration_keys
                    .as_ref()
                    .is_none_or(|keys| keys.is_empty() || keys.iter().any(|k| k.as_str() == name))
            };
            let base = DescribeConfigsResult::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            let entry = |name: &str,
                         value: String,
                         source: i8,
                         read_only: bool,
                         synonyms: Vec<DescribeConfigsSynonym>| {
                DescribeConfigsResourceResult::default()
                    .with_name(s(name))
                    .with_value((!value.is_empty()).then(|| s(&value)))
                    .with_read_only(read_only)
                    .with_config_source(source)
                    // v0 has no source, only this flag (Kafka's own broker leaves it false;
                    // it is told truthfully here).
                    .with_is_default(req.version == 0 && source == SOURCE_DEFAULT)
                    .with_synonyms(if body.include_synonyms {
                        synonyms
                    } else {
                        Vec::new()
                    })
                    .with_config_type(config_type(name))
                    .with_documentation(if body.include_documentation {
                        doc(name).map(s)
                    } else {
                        None
                    })
            };
            // Kafka: DescribeConfigs on the topic, or on the cluster for broker resources.
            let (denied, code) = match r.resource_type {
                TOPIC => (
                    !authorize::topic(shard, req, Operation::DescribeConfigs, r.resource_name.as_str()),
                    ErrorCode::TOPIC_AUTHORIZATION_FAILED,
                ),
                BROKER => (
                    !authorize::cluster(shard, req, Operation::DescribeConfigs),
                    ErrorCode::CLUSTER_AUTHORIZATION_FAILED,
                ),
                _ => (false, ErrorCode::NONE),
            };
            if denied {
                return base
                    .with_error_code(code.code())
                    .with_error_message(Some(s("Authorization failed.")));
            }
            match r.resource_type {
                TOPIC => {
                    let metadata = shard.metadata();
                    let Some(topic) = metadata.topic(r.resource_name.as_str()) else {
                        errors::refused(
                            shard,
                            ApiKey::DescribeConfigs,
                            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                            &format_args!("topic {}", r.resource_name.as_str()),
                        );
                        return base
                            .with_error_code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code())
                            .with_error_message(Some(s("Topic does not exist")));
                    };
                    let configs = topic_entries(shard, topic)
                        .into_iter()
                        .filter(|e| wanted(e.name))
                        .map(|e| {
                            let synonyms = e
                                .synonyms
                                .iter()
                                .map(|(name, value, source)| {
                                    DescribeConfigsSynonym::default()
                                        .with_name(s(name))
                                        .with_value(value.as_deref().map(s))
                                        .with_source(*source)
                                })
                                .collect();
                            entry(e.name, e.value, e.source, false, synonyms)
                        })
                        .collect();
                    base.with_configs(configs)
                }
                BROKER => {
                    let me = shard.config.node_id;
                    let name = r.resource_name.as_str();
                    let metadata = shard.metadata();
                    let synonym = |(n, v, source): (&str, String, i8)| {
                        DescribeConfigsSynonym::default()
                            .with_name(s(n))
                            .with_value((!v.is_empty()).then(|| s(&v)))
                            .with_source(source)
                    };
                    if name.is_empty() {
                        let configs = metadata
                            .broker_configs
                            .of(None)
                            .iter()
                            .filter(|(n, _)| wanted(n))
                            .map(|(n, v)| {
                                let synonyms = vec![synonym((n, v.clone(), SOURCE_DYNAMIC_DEFAULT))];
                                entry(n, v.clone(), SOURCE_DYNAMIC_DEFAULT, false, synonyms)
                            })
                            .collect();
                        return base.with_configs(configs);
                    }
                    if name.parse::<i32>() != Ok(me) {
                        errors::refused(
                            shard,
                            ApiKey::DescribeConfigs,
                            ErrorCode::INVALID_REQUEST,
                            &format_args!("broker {name} is not this one"),
                        );
                        return base
                            .with_error_code(ErrorCode::INVALID_REQUEST.code())
                            .with_error_message(Some(s(&format!(
                                "Unexpected broker id, expected {me} or empty string, but received {name}"
                            ))));
                    }
                    let mut configs: Vec<_> = shard
                        .settings()
                        .entries()
                        .iter()
                        .filter(|(n, _)| wanted(n))
                        .map(|(n, v)| {
                            let levels = broker_levels(shard, &metadata, n);
                            let source = levels.first().map_or(SOURCE_DEFAULT, |l| l.2);
                            let synonyms = levels.into_iter().map(synonym).collect();
                            entry(n, v.clone(), source, !is_dynamic(n), synonyms)
                        })
                        .collect();
                    configs.extend(
                        security_entries(shard)
                            .into_iter()
                            .filter(|e| wanted(&e.name))
                            .map(|e| {
                                let value = if e.kind.is_sensitive() { String::new() } else { e.value };
                                let synonyms = vec![synonym((&e.name, value.clone(), e.source))];
                                // Not reconfigurable at run time: read-only.
                                entry(&e.name, value, e.source, true, synonyms)
                                    .with_is_sensitive(e.kind.is_sensitive())
                                    .with_config_type(e.kind as i8)
                            }),
                    );
                    base.with_configs(configs)
                }
                other => {
                    errors::refused(
                        shard,
                        ApiKey::DescribeConfigs,
                        ErrorCode::INVALID_REQUEST,
                        &format_args!("resource type {other}"),
                    );
                    base.with_error_code(ErrorCode::INVALID_REQUEST.code())
                        .with_error_message(Some(s(&format!(
                            "resource type {other} is not supported"
                        ))))
                }
            }
        })
        .collect();
    req.respond(
        ApiKey::DescribeConfigs,
        &DescribeConfigsResponse::default().with_results(results),
    )
}

/// One of a topic's configs as Kafka reports it: its value, where that value comes from, and
/// the synonyms it was chosen from (the topic's override, then the broker's default).
pub struct TopicConfigEntry {
    pub name: &'static str,
    pub value: String,
    pub source: i8,
    /// (name, value, source), most specific first.
    pub synonyms: Vec<(&'static str, Option<String>, i8)>,
}

/// Every config of `topic`, in DescribeConfigs order (CreateTopics v5+ answers with the same).
pub fn topic_entries(shard: &Shard, topic: &TopicInfo) -> Vec<TopicConfigEntry> {
    let metadata = shard.metadata();
    let settings = shard.settings();
    topic_config::all_names()
        .into_iter()
        .map(|name| {
            let overridden = topic.configs.get(name);
            let default = settings
                .log
                .get(name)
                .or_else(|| topic_config::broker_topic_default(name, settings.min_insync_replicas))
                .unwrap_or_default();
            // The broker settings this config falls back to, most precise first, each at every
            // level that gives it a value (log.retention.ms is unset unless given;
            // log.retention.hours is always set).
            let broker_synonyms: Vec<(&'static str, String, i8)> =
                BrokerSettings::synonyms_of(name)
                    .iter()
                    .flat_map(|b| broker_levels(shard, &metadata, b))
                    .collect();
            let broker_source = broker_synonyms
                .first()
                .map_or(SOURCE_DEFAULT, |&(_, _, source)| source);
            let mut synonyms = Vec::new();
            if let Some(v) = overridden {
                synonyms.push((name, Some(v.clone()), SOURCE_TOPIC));
            }
            synonyms.extend(
                broker_synonyms
                    .into_iter()
                    .map(|(b, value, source)| (b, Some(value), source)),
            );
            match overridden {
                Some(v) => TopicConfigEntry {
                    name,
                    value: v.clone(),
                    source: SOURCE_TOPIC,
                    synonyms,
                },
                None => TopicConfigEntry {
                    name,
                    value: default,
                    source: broker_source,
                    synonyms,
                },
            }
        })
        .collect()
}

/// A security setting as DescribeConfigs describes it.
struct SecurityEntry {
    name: String,
    value: String,
    source: i8,
    kind: KafkaConfigType,
}

/// The listener settings in force, then every other security setting given (`ssl.*`,
/// `sasl.*`, per listener or not, the authorizer's), as Kafka's `ConfigHelper.allConfigs`
/// lists a broker's originals. Passwords, key material and keys Kafka cannot type are
/// described without their value (`KafkaConfig.maybeSensitive`).
fn security_entries(shard: &Shard) -> Vec<SecurityEntry> {
    let given = &shard.config.broker.security;
    let in_force = shard.config.listeners.in_force();
    let listener_keys: Vec<&str> = in_force.iter().map(|(n, _)| *n).collect();
    let listeners = in_force.into_iter().map(|(name, value)| SecurityEntry {
        name: name.to_string(),
        value,
        source: if given.get(name).is_some() {
            SOURCE_STATIC_BROKER
        } else {
            SOURCE_DEFAULT
        },
        kind: KafkaConfigType::of(name),
    });
    let others = given
        .given()
        .filter(|(name, _)| !listener_keys.contains(name))
        .map(|(name, value)| SecurityEntry {
            name: name.to_string(),
            value: value.to_string(),
            source: SOURCE_STATIC_BROKER,
            kind: KafkaConfigType::of(name),
        });
    listeners.chain(others).collect()
}

/// A broker setting's value at each level that has one, most specific first (Kafka's
/// synonyms): altered for this broker, altered for the cluster, static, Ferrite's default.
fn broker_levels(
    shard: &Shard,
    metadata: &ClusterMetadata,
    name: &'static str,
) -> Vec<(&'static str, String, i8)> {
    let dynamic = &metadata.broker_configs;
    let mut levels = Vec::new();
    if let Some(v) = dynamic.of(Some(shard.config.node_id)).get(name) {
        levels.push((name, v.clone(), SOURCE_DYNAMIC_BROKER));
    }
    if let Some(v) = dynamic.of(None).get(name) {
        levels.push((name, v.clone(), SOURCE_DYNAMIC_DEFAULT));
    }
    let fixed = &shard.config.broker;
    if let Some(v) = broker_value(fixed, name).filter(|v| !v.is_empty()) {
        let source = if fixed.explicit.iter().any(|e| e == name) {
            SOURCE_STATIC_BROKER
        } else {
            SOURCE_DEFAULT
        };
        levels.push((name, v, source));
    }
    levels
}

fn broker_value(broker: &BrokerSettings, name: &str) -> Option<String> {
    broker
        .entries()
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.clone())
}
