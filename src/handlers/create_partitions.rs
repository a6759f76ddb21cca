//! CreatePartitions: grows topics to a new partition count (never shrinks).

use super::{authorize, errors, Request, Response};
use crate::controller::{self, TopicError};
use crate::security::acl::Operation;
use crate::shard::routing::on_controller;
use crate::shard::Shard;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{ApiKey, CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::protocol::StrBytes;

pub async fn handle(shard: &Shard, req: &Request, body: CreatePartitionsRequest) -> Response {
    let mut results = Vec::with_capacity(body.topics.len());
    // THROTTLING_QUOTA_EXCEEDED is an answer from v3 (KIP-599).
    let payer = super::throttle::mutation_payer(shard, req, 3);
    let mut throttle_ms = 0;
    for t in body.topics {
        let name = t.name.0.to_string();
        // Kafka: Alter on the topic.
        let outcome = if !authorize::topic(shard, req, Operation::Alter, &name) {
            Err(TopicError::TopicUnauthorized(
                "Authorization failed.".into(),
            ))
        } else if t.assignments.as_ref().is_some_and(|a| !a.is_empty()) {
            Err(TopicError::InvalidRequest(
                "Manual replica assignment is not supported.".into(),
            ))
        } else {
            let (count, validate_only, payer) = (t.count, body.validate_only, payer.clone());
            let answer = on_controller(shard, move |s| async move {
                let grown = controller::create_partitions(&s, &name, count, validate_only, &payer);
                let grown = grown.await;
                (grown, controller::mutation_throttle_ms(&s, &payer))
            })
            .await;
            match answer {
                Some((grown, throttle)) => {
                    throttle_ms = throttle;
                    grown
                }
                None => Err(TopicError::Storage("the controller did not answer".into())),
            }
        };
        let r = CreatePartitionsTopicResult::default().with_name(t.name);
        results.push(match outcome {
            Ok(()) => r,
            Err(e) => {
                errors::refused(shard, ApiKey::CreatePartitions, e.code(), &e.to_string());
                r.with_error_code(e.code().code())
                    .with_error_message(Some(StrBytes::from_string(e.to_string())))
            }
        });
    }
    req.respond(
        ApiKey::CreatePartitions,
        &CreatePartitionsResponse::default()
            .with_throttle_time_ms(throttle_ms)
            .with_results(results),
    )
}
