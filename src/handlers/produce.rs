//! Produce: append each partition's record set on the shard that owns the partition.
//!
//! A request carries batches for partitions that live on different cores, so each partition's
//! append is sent to its owner; all of them start at once, in request order, which keeps a
//! connection's pipelined requests in order on every partition they share.

use super::routing::on_partition;
use super::{errors, Request, Response};
use crate::server::shard::Shard;
use ferrite_shards::log::AppendInfo;
use ferrite_shards::partition::Partition;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use std::time::Duration;

type Outcome = Result<AppendInfo, (i16, String)>;

pub async fn handle(shard: &Shard, req: &Request, body: ProduceRequest) -> Response {
    let acks = body.acks;
    let timeout = Duration::from_millis(body.timeout_ms.max(0) as u64);
    let refusal = if !(-1..=1).contains(&acks) {
        Some((
            errors::INVALID_REQUIRED_ACKS,
            format!("acks={acks} is not 0, 1 or -1"),
        ))
    } else if body.transactional_id.is_some() {
        Some((
            errors::INVALID_REQUEST,
            "transactions are not supported".to_string(),
        ))
    } else {
        None
    };
    let mut calls = Vec::new();
    let mut layout = Vec::with_capacity(body.topic_data.len());
    for topic in body.topic_data {
        let name = topic.name.0.to_string();
        let mut indexes = Vec::with_capacity(topic.partition_data.len());
        for p in topic.partition_data {
            indexes.push(p.index);
            let refusal = refusal.clone();
            let name = name.clone();
            calls.push(async move {
                if let Some(r) = refusal {
                    return Err(r);
                }
                let Some(records) = p.records else {
                    return Err((
                        errors::CORRUPT_MESSAGE,
                        "the record set is null".to_string(),
                    ));
                };
                let required = required_isr(shard, &name);
                if acks == -1 {
                    if let Some(e) = not_enough_replicas(shard, &name, p.index, required) {
                        return Err(e);
                    }
                }
                let outcome = on_partition(shard, &name, p.index, move |part| {
                    Box::pin(async move {
                        let epoch = part.leader_epoch();
                        let info = part
                            .produce(&records)
                            .await
                            .map_err(|e| (errors::code_for(&e), e.to_string()))?;
                        if acks == -1 {
                            committed(&part, &info, epoch, required, timeout).await?;
                        }
                        Ok(info)
                    })
                })
                .await;
                match outcome {
                    Ok(r) => r,
                    Err(code) => Err((code, String::new())),
                }
            });
        }
        layout.push((topic.name, indexes));
    }
    let outcomes: Vec<Outcome> = futures::future::join_all(calls).await;
    for (code, _) in outcomes.iter().filter_map(|o| o.as_ref().err()) {
        shard.metrics.error(ApiKey::Produce, *code);
    }
    let mut outcomes = outcomes.into_iter();
    if acks == 0 {
        return Response::Nothing;
    }
    let responses = layout
        .into_iter()
        .map(|(name, indexes)| {
            let partition_responses = indexes
                .into_iter()
                .map(|index| {
                    let outcome = outcomes.next().expect("one outcome per partition");
                    partition_response(index, outcome)
                })
                .collect();
            TopicProduceResponse::default()
                .with_name(name)
                .with_partition_responses(partition_responses)
        })
        .collect();
    req.respond(
        ApiKey::Produce,
        &ProduceResponse::default().with_responses(responses),
    )
}

fn partition_response(index: i32, outcome: Outcome) -> PartitionProduceResponse {
    let r = PartitionProduceResponse::default()
        .with_index(index)
        .with_log_append_time_ms(-1);
    match outcome {
        Ok(info) => r
            .with_base_offset(info.base_offset)
            .with_log_start_offset(info.log_start_offset),
        Err((code, message)) => {
            if code != errors::NOT_LEADER_OR_FOLLOWER && code != errors::UNKNOWN_TOPIC_OR_PARTITION
            {
                tracing::debug!(partition = index, code, %message, "produce refused");
            }
            r.with_error_code(code)
                .with_base_offset(-1)
                .with_log_start_offset(-1)
                .with_error_message((!message.is_empty()).then(|| StrBytes::from_string(message)))
        }
    }
}

/// `min.insync.replicas` of the topic (its override, else the broker's).
fn required_isr(shard: &Shard, topic: &str) -> i32 {
    shard
        .metadata()
        .topic(topic)
        .and_then(|t| t.configs.get("min.insync.replicas").cloned())
        .and_then(|v| v.parse::<i32>().ok())
        .unwrap_or(shard.config.broker.min_insync_replicas)
}

/// acks=all needs `min.insync.replicas` replicas in the ISR.
fn not_enough_replicas(
    shard: &Shard,
    topic: &str,
    index: i32,
    required: i32,
) -> Option<(i16, String)> {
    let metadata = shard.metadata();
    let partition = metadata.partition(topic, index)?;
    let isr = partition.isr.len() as i32;
    (isr < required).then(|| {
        (
            errors::NOT_ENOUGH_REPLICAS,
            format!("the in-sync replicas ({isr}) are fewer than min.insync.replicas ({required})"),
        )
    })
}

/// acks=all: the batch is acknowledged once the high watermark has passed it (every ISR
/// member has it), with the ISR still at `min.insync.replicas` or more.
async fn committed(
    part: &Partition,
    info: &AppendInfo,
    epoch: i32,
    required: i32,
    timeout: Duration,
) -> Result<(), (i16, String)> {
    let done = part
        .wait_committed(info.last_offset, epoch, timeout)
        .await
        .map_err(|e| (errors::code_for(&e), e.to_string()))?;
    if !done {
        return Err((
            errors::REQUEST_TIMED_OUT,
            format!(
                "offset {} was not replicated to the ISR within {timeout:?}",
                info.last_offset
            ),
        ));
    }
    let isr = part.role().isr.len() as i32;
    if isr < required {
        return Err((
            errors::NOT_ENOUGH_REPLICAS_AFTER_APPEND,
            format!("written, but the in-sync replicas ({isr}) fell below min.insync.replicas ({required})"),
        ));
    }
    Ok(())
}
