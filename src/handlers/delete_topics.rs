//! DeleteTopics: removes topics and their data, by name (v1–v5).

use super::routing::on_controller;
use super::{Request, Response};
use crate::controller;
use crate::server::shard::Shard;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{ApiKey, DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use std::rc::Rc;

pub async fn handle(shard: &Shard, req: &Request, body: DeleteTopicsRequest) -> Response {
    let names: Vec<String> = body.topic_names.iter().map(|n| n.0.to_string()).collect();
    let asked = names.clone();
    let outcomes = on_controller(shard, move |s: Rc<Shard>| {
        Box::pin(async move { controller::delete_topics(&s, names).await })
    })
    .await
    .unwrap_or_default();
    let responses = asked
        .into_iter()
        .map(|name| {
            let r = DeletableTopicResult::default()
                .with_name(Some(TopicName(StrBytes::from_string(name.clone()))));
            match outcomes.iter().find(|(n, _)| *n == name).map(|(_, o)| o) {
                Some(Ok(())) => r,
                Some(Err(e)) => {
                    shard.metrics.error(ApiKey::DeleteTopics, e.code());
                    r.with_error_code(e.code())
                        .with_error_message(Some(StrBytes::from_string(e.message())))
                }
                None => {
                    let code = super::errors::KAFKA_STORAGE_ERROR;
                    shard.metrics.error(ApiKey::DeleteTopics, code);
                    r.with_error_code(code)
                }
            }
        })
        .collect();
    req.respond(
        ApiKey::DeleteTopics,
        &DeleteTopicsResponse::default().with_responses(responses),
    )
}
