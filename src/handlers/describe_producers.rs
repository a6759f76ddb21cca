//! DescribeProducers (KIP-664): the producers a partition leader remembers, with their epoch,
//! last sequence and open transaction (KafkaApis.handleDescribeProducersRequest). Read on the
//! topic, else TOPIC_AUTHORIZATION_FAILED.

use super::{authorize, errors, Request, Response};
use crate::protocol::errors::ErrorCode;
use crate::security::acl::Operation;
use crate::shard::routing::on_partition;
use crate::shard::Shard;
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{
    ApiKey, DescribeProducersRequest, DescribeProducersResponse, ProducerId,
};

pub async fn handle(shard: &Shard, req: &Request, body: DescribeProducersRequest) -> Response {
    let mut topics = Vec::with_capacity(body.topics.len());
    for t in body.topics {
        let name = t.name.to_string();
        let allowed = authorize::topic(shard, req, Operation::Read, &name);
        let mut partitions = Vec::with_capacity(t.partition_indexes.len());
        for index in t.partition_indexes {
            let out = PartitionResponse::default().with_partition_index(index);
            let found = if allowed {
                on_partition(shard, &name, index, |p| {
                    Box::pin(async move { p.producers() })
                })
                .await
            } else {
                Err(ErrorCode::TOPIC_AUTHORIZATION_FAILED)
            };
            partitions.push(match found {
                Ok(producers) => out.with_active_producers(
                    producers
                        .into_iter()
                        .map(|(p, txn)| {
                            ProducerState::default()
                                .with_producer_id(ProducerId(p.producer_id))
                                .with_producer_epoch(p.epoch as i32)
                                .with_last_sequence(p.last_sequence)
                                .with_last_timestamp(p.last_seen_ms)
                                .with_coordinator_epoch(p.coordinator_epoch)
                                .with_current_txn_start_offset(txn.unwrap_or(-1))
                        })
                        .collect(),
                ),
                Err(code) => {
                    errors::refused(
                        shard,
                        ApiKey::DescribeProducers,
                        code,
                        &format_args!("{name}-{index}"),
                    );
                    out.with_error_code(code.code())
                }
            });
        }
        topics.push(
            TopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions),
        );
    }
    req.respond(
        ApiKey::DescribeProducers,
        &DescribeProducersResponse::default().with_topics(topics),
    )
}
