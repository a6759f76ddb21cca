//! DescribeConfigs: a topic's configs (its overrides, else the broker defaults), or the broker's.
//!
//! Sources as Kafka reports them: TOPIC_CONFIG for a topic override, STATIC_BROKER_CONFIG for
//! a default set in the tuning file, DEFAULT_CONFIG otherwise. Unknown requested names are
//! left out, as Kafka does. Broker settings are read-only (no AlterConfigs).

use super::{errors, Request, Response};
use crate::config::{BrokerSettings, BROKER_KEYS};
use crate::metadata::{topic_config, TopicInfo};
use crate::protocol::errors::ErrorCode;
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
                    let configs = topic_entries(&shard.config.broker, topic)
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
                    let me = shard.metadata().controller_id.to_string();
                    let name = r.resource_name.as_str();
                    if !name.is_empty() && name != me {
                        errors::refused(
                            shard,
                            ApiKey::DescribeConfigs,
                            ErrorCode::INVALID_REQUEST,
                            &format_args!("broker {name} is not this one"),
                        );
                        return base
                            .with_error_code(ErrorCode::INVALID_REQUEST.code())
                            .with_error_message(Some(s(&format!("this is broker {me}"))));
                    }
                    let broker = &shard.config.broker;
                    let configs = broker
                        .entries()
                        .iter()
                        .filter(|(n, _)| wanted(n))
                        .map(|(n, v)| {
                            let source = if broker.explicit.iter().any(|e| e == n) {
                                SOURCE_STATIC_BROKER
                            } else {
                                SOURCE_DEFAULT
                            };
                            let synonyms = vec![DescribeConfigsSynonym::default()
                                .with_name(s(n))
                                .with_value((!v.is_empty()).then(|| s(v)))
                                .with_source(source)];
                            entry(n, v.clone(), source, true, synonyms)
                        })
                        .collect();
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
pub fn topic_entries(broker: &BrokerSettings, topic: &TopicInfo) -> Vec<TopicConfigEntry> {
    topic_config::all_names()
        .into_iter()
        .map(|name| {
            let overridden = topic.configs.get(name);
            let default = broker
                .log
                .get(name)
                .or_else(|| topic_config::broker_topic_default(name, broker.min_insync_replicas))
                .unwrap_or_default();
            // The broker settings this config falls back to, most precise first, those with
            // a value only (log.retention.ms is unset unless given; log.retention.hours is).
            let broker_synonyms: Vec<(&'static str, String, i8)> =
                BrokerSettings::synonyms_of(name)
                    .iter()
                    .filter_map(|&b| {
                        let value = broker_value(broker, b).filter(|v| !v.is_empty())?;
                        let source = if broker.explicit.iter().any(|e| e == b) {
                            SOURCE_STATIC_BROKER
                        } else {
                            SOURCE_DEFAULT
                        };
                        Some((b, value, source))
                    })
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

fn broker_value(broker: &BrokerSettings, name: &str) -> Option<String> {
    broker
        .entries()
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.clone())
}
