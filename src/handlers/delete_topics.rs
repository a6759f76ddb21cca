//! DeleteTopics: removes topics and their data, by name (v0–v5) or by name or id (v6+, as
//! Kafka's `handleDeleteTopicsRequest`: both at once is INVALID_REQUEST, an id nobody has
//! UNKNOWN_TOPIC_ID).

use super::{authorize, errors, Request, Response};
use crate::controller;
use crate::protocol::errors::ErrorCode;
use crate::security::acl::Operation;
use crate::shard::routing::on_controller;
use crate::shard::Shard;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{ApiKey, DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

/// One topic the request names: its name (`None`: an id that resolves to nothing) and the id
/// it was named by (zero when named by name).
type Asked = (Option<String>, Uuid);

pub async fn handle(shard: &Shard, req: &Request, body: DeleteTopicsRequest) -> Response {
    let metadata = shard.metadata();
    let resolved = asked_topics(req.version, &body, |id| {
        metadata
            .topic_by_id(id.as_bytes())
            .map(|info| info.name.clone())
    });
    drop(metadata);
    let asked = match resolved {
        Ok(asked) => asked,
        Err(why) => return refuse_all(req, &body, why),
    };
    if !shard.config.broker.delete_topic_enable {
        let code = deletion_disabled_code(req.version);
        let responses = asked
            .into_iter()
            .map(|(name, id)| {
                errors::refused(
                    shard,
                    ApiKey::DeleteTopics,
                    code,
                    &"delete.topic.enable=false",
                );
                DeletableTopicResult::default()
                    .with_name(name.map(|n| TopicName(StrBytes::from_string(n))))
                    .with_topic_id(id)
                    .with_error_code(code.code())
                    .with_error_message(None)
            })
            .collect();
        return req.respond(
            ApiKey::DeleteTopics,
            &DeleteTopicsResponse::default().with_responses(responses),
        );
    }
    // Kafka: Delete on each topic (TOPIC_AUTHORIZATION_FAILED); a denied topic is not deleted.
    let denied: std::collections::BTreeSet<String> = asked
        .iter()
        .filter_map(|(n, _)| n.clone())
        .filter(|n| !authorize::topic(shard, req, Operation::Delete, n))
        .collect();
    let names: Vec<String> = asked
        .iter()
        .filter_map(|(n, _)| n.clone())
        .filter(|n| !denied.contains(n))
        .collect();
    // THROTTLING_QUOTA_EXCEEDED is an answer from v5 (KIP-599).
    let payer = super::throttle::mutation_payer(shard, req, 5);
    let (outcomes, throttle_ms) = on_controller(shard, move |s| async move {
        let outcomes = controller::delete_topics(&s, names, &payer).await;
        (outcomes, controller::mutation_throttle_ms(&s, &payer))
    })
    .await
    .unwrap_or_default();
    let responses = asked
        .into_iter()
        .map(|(name, id)| {
            let r = DeletableTopicResult::default()
                .with_name(name.clone().map(|n| TopicName(StrBytes::from_string(n))))
                .with_topic_id(id);
            let Some(name) = name else {
                errors::refused(
                    shard,
                    ApiKey::DeleteTopics,
                    ErrorCode::UNKNOWN_TOPIC_ID,
                    &format_args!("topic id {id}"),
                );
                return r.with_error_code(ErrorCode::UNKNOWN_TOPIC_ID.code());
            };
            if denied.contains(&name) {
                let code = ErrorCode::TOPIC_AUTHORIZATION_FAILED;
                return r.with_error_code(code.code());
            }
            match outcomes.iter().find(|(n, _)| *n == name).map(|(_, o)| o) {
                Some(Ok(())) => r,
                Some(Err(e)) => {
                    errors::refused(shard, ApiKey::DeleteTopics, e.code(), &e.to_string());
                    r.with_error_code(e.code().code())
                        .with_error_message(Some(StrBytes::from_string(e.to_string())))
                }
                None => {
                    let code = ErrorCode::KAFKA_STORAGE_ERROR;
                    errors::refused(
                        shard,
                        ApiKey::DeleteTopics,
                        code,
                        &"the controller did not answer",
                    );
                    r.with_error_code(code.code())
                }
            }
        })
        .collect();
    req.respond(
        ApiKey::DeleteTopics,
        &DeleteTopicsResponse::default()
            .with_throttle_time_ms(throttle_ms)
            .with_responses(responses),
    )
}

/// The topics a request names: by name before v6; from v6 by name or by id (looked up with
/// `name_of`), never both at once (Kafka fails the whole request).
fn asked_topics(
    version: i16,
    body: &DeleteTopicsRequest,
    name_of: impl Fn(&Uuid) -> Option<String>,
) -> Result<Vec<Asked>, &'static str> {
    if version < 6 {
        return Ok(body
            .topic_names
            .iter()
            .map(|n| (Some(n.0.to_string()), Uuid::nil()))
            .collect());
    }
    body.topics
        .iter()
        .map(|t| match &t.name {
            Some(_) if !t.topic_id.is_nil() => {
                Err("Topic name and topic ID can not both be specified.")
            }
            Some(n) => Ok((Some(n.0.to_string()), t.topic_id)),
            None => Ok((name_of(&t.topic_id), t.topic_id)),
        })
        .collect()
}

/// `delete.topic.enable=false`: versions before 3 have no TOPIC_DELETION_DISABLED and get
/// INVALID_REQUEST, as Kafka answers them.
fn deletion_disabled_code(version: i16) -> ErrorCode {
    if version < 3 {
        ErrorCode::INVALID_REQUEST
    } else {
        ErrorCode::TOPIC_DELETION_DISABLED
    }
}

/// Every topic of the request answered with INVALID_REQUEST (Kafka throws for the request).
fn refuse_all(req: &Request, body: &DeleteTopicsRequest, why: &str) -> Response {
    tracing::debug!(reason = why, "DeleteTopics refused");
    let responses = body
        .topics
        .iter()
        .map(|t| {
            DeletableTopicResult::default()
                .with_name(t.name.clone())
                .with_topic_id(t.topic_id)
                .with_error_code(ErrorCode::INVALID_REQUEST.code())
                .with_error_message(Some(StrBytes::from_string(why.to_string())))
        })
        .collect();
    req.respond(
        ApiKey::DeleteTopics,
        &DeleteTopicsResponse::default().with_responses(responses),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_v6_topics_are_named_by_name_or_id_but_not_both() {
        use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
        let id = Uuid::from_bytes([4; 16]);
        let name = |n: &str| Some(TopicName(StrBytes::from_string(n.to_string())));
        let lookup = |asked: &Uuid| (*asked == id).then(|| "by-id".to_string());
        let body = DeleteTopicsRequest::default().with_topics(vec![
            DeleteTopicState::default().with_name(name("by-name")),
            DeleteTopicState::default()
                .with_name(None)
                .with_topic_id(id),
            DeleteTopicState::default()
                .with_name(None)
                .with_topic_id(Uuid::from_bytes([5; 16])),
        ]);
        let asked = asked_topics(6, &body, lookup).unwrap();
        let names: Vec<Option<&str>> = asked.iter().map(|(n, _)| n.as_deref()).collect();
        assert_eq!(names, [Some("by-name"), Some("by-id"), None]);
        let both = DeleteTopicsRequest::default().with_topics(vec![DeleteTopicState::default()
            .with_name(name("x"))
            .with_topic_id(id)]);
        assert!(asked_topics(6, &both, lookup).is_err());
        let old = DeleteTopicsRequest::default()
            .with_topic_names(vec![TopicName(StrBytes::from_static_str("t"))]);
        assert_eq!(
            asked_topics(5, &old, lookup).unwrap()[0].0.as_deref(),
            Some("t")
        );
    }

    #[test]
    fn disabled_deletion_is_told_in_each_versions_terms() {
        assert_eq!(deletion_disabled_code(2), ErrorCode::INVALID_REQUEST);
        assert_eq!(
            deletion_disabled_code(3),
            ErrorCode::TOPIC_DELETION_DISABLED
        );
        assert_eq!(
            deletion_disabled_code(6),
            ErrorCode::TOPIC_DELETION_DISABLED
        );
    }
}
