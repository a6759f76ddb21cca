//! CreateTopics: new topics with their partition count, replication factor and configs;
//! `validate_only` checks everything and changes nothing.

use super::{authorize, Request, Response};
use crate::controller::{self, NewTopic, TopicError};
use crate::metadata::TopicInfo;
use crate::protocol::errors::ErrorCode;
use crate::security::acl::{Operation, ResourceType};
use crate::shard::routing::on_controller;
use crate::shard::Shard;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{ApiKey, CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::protocol::StrBytes;
use std::collections::{BTreeMap, HashSet};
use uuid::Uuid;

pub async fn handle(shard: &Shard, req: &Request, body: CreateTopicsRequest) -> Response {
    let mut seen = HashSet::new();
    let duplicates: HashSet<String> = body
        .topics
        .iter()
        .map(|t| t.name.0.to_string())
        .filter(|n| !seen.insert(n.clone()))
        .collect();
    let mut asks = Vec::new();
    let mut refused: BTreeMap<String, TopicError> = BTreeMap::new();
    for t in &body.topics {
        let name = t.name.0.to_string();
        if duplicates.contains(&name) {
            refused.insert(
                name,
                TopicError::InvalidRequest("Duplicate topic name.".into()),
            );
            continue;
        }
        // Kafka: Create on the cluster, else on the topic.
        let may_create = authorize::allowed_quietly(
            shard,
            req,
            Operation::Create,
            ResourceType::Cluster,
            authorize::CLUSTER_NAME,
        ) || authorize::topic(shard, req, Operation::Create, &name);
        if !may_create {
            refused.insert(
                name,
                TopicError::TopicUnauthorized("Authorization failed.".into()),
            );
            continue;
        }
        if !t.assignments.is_empty() {
            refused.insert(
                name,
                TopicError::InvalidRequest("Manual replica assignment is not supported.".into()),
            );
            continue;
        }
        let mut configs = BTreeMap::new();
        for c in &t.configs {
            match &c.value {
                Some(v) => {
                    configs.insert(c.name.to_string(), v.to_string());
                }
                None => {
                    refused.insert(
                        name.clone(),
                        TopicError::InvalidConfig(format!("Null value for {}", c.name.as_str())),
                    );
                }
            }
        }
        if refused.contains_key(&name) {
            continue;
        }
        asks.push(NewTopic {
            name,
            partitions: t.num_partitions,
            replication_factor: t.replication_factor,
            configs,
        });
    }
    let validate_only = body.validate_only;
    // THROTTLING_QUOTA_EXCEEDED is an answer from v6 (KIP-599).
    let payer = super::throttle::mutation_payer(shard, req, 6);
    let (created, throttle_ms) = if asks.is_empty() {
        (Vec::new(), 0)
    } else {
        on_controller(shard, move |s| async move {
            let created = controller::create_topics(&s, asks, validate_only, &payer).await;
            (created, controller::mutation_throttle_ms(&s, &payer))
        })
        .await
        .unwrap_or_default()
    };
    let mut by_name: BTreeMap<String, Result<_, TopicError>> = created.into_iter().collect();
    let results = body
        .topics
        .iter()
        .map(|t| {
            let name = t.name.0.to_string();
            let r = CreatableTopicResult::default().with_name(t.name.clone());
            let outcome = refused
                .get(&name)
                .cloned()
                .map(Err)
                .or_else(|| by_name.remove(&name))
                .unwrap_or(Err(TopicError::Storage(
                    "the controller did not answer".into(),
                )));
            match outcome {
                Ok(info) => {
                    let r = r
                        // Kafka sends null here on success (ApiError.NONE has no message).
                        .with_error_message(None)
                        .with_topic_id(Uuid::from_bytes(info.id))
                        .with_num_partitions(info.partitions.len() as i32)
                        .with_replication_factor(
                            info.partitions
                                .first()
                                .map(|p| p.replicas.len() as i16)
                                .unwrap_or(1),
                        );
                    // The new topic's configs need DescribeConfigs on it (KIP-525).
                    let visible = authorize::allowed_quietly(
                        shard,
                        req,
                        Operation::DescribeConfigs,
                        ResourceType::Topic,
                        &name,
                    );
                    if visible {
                        r.with_configs(created_configs(shard, req.version, &info))
                    } else {
                        r.with_topic_config_error_code(ErrorCode::TOPIC_AUTHORIZATION_FAILED.code())
                    }
                }
                Err(e) => {
                    super::errors::refused(shard, ApiKey::CreateTopics, e.code(), &e.to_string());
                    r.with_error_code(e.code().code())
                        .with_error_message(Some(StrBytes::from_string(e.to_string())))
                        .with_num_partitions(-1)
                        .with_replication_factor(-1)
                }
            }
        })
        .collect();
    req.respond(
        ApiKey::CreateTopics,
        &CreateTopicsResponse::default()
            .with_throttle_time_ms(throttle_ms)
            .with_topics(results),
    )
}

/// CreateTopics v5+ tells the creator every config of the new topic (KIP-525), as
/// DescribeConfigs would report it.
fn created_configs(
    shard: &Shard,
    version: i16,
    info: &TopicInfo,
) -> Option<Vec<CreatableTopicConfigs>> {
    if version < 5 {
        return None;
    }
    let configs = super::describe_configs::topic_entries(shard, info)
        .into_iter()
        .map(|e| {
            CreatableTopicConfigs::default()
                .with_name(StrBytes::from_string(e.name.to_string()))
                .with_value(Some(StrBytes::from_string(e.value)))
                .with_read_only(false)
                .with_config_source(e.source)
                .with_is_sensitive(false)
        })
        .collect();
    Some(configs)
}
