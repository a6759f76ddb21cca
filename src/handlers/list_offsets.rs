//! ListOffsets: the earliest, latest, or first offset at or after a timestamp.
//!
//! A timestamp search finds the first batch whose newest timestamp reaches it (through the time
//! index), then the first record in it at or after the timestamp — decompressing the batch if
//! it is compressed — as Kafka does. No such record: offset -1, timestamp -1, no error.

use super::errors;
use super::routing::on_partition;
use super::{Request, Response};
use crate::server::shard::Shard;
use bytes::Bytes;
use ferrite_shards::partition::Partition;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ApiKey, ListOffsetsRequest, ListOffsetsResponse};
use kafka_protocol::records::RecordBatchDecoder;
use std::rc::Rc;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;

pub async fn handle(shard: &Shard, req: &Request, body: ListOffsetsRequest) -> Response {
    // v4+ carries the leader epoch; one epoch (0) for the partition's whole life on one broker.
    let leader_epoch = if req.version >= 4 { 0 } else { -1 };
    let lookups = body.topics.iter().map(|t| {
        let name = t.name.0.to_string();
        futures::future::join_all(t.partitions.iter().map(move |p| {
            let name = name.clone();
            let (index, timestamp) = (p.partition_index, p.timestamp);
            async move {
                let found = on_partition(shard, &name, index, move |part| {
                    Box::pin(async move { lookup(&part, timestamp).await })
                })
                .await;
                let r = ListOffsetsPartitionResponse::default()
                    .with_partition_index(index)
                    .with_leader_epoch(leader_epoch);
                match found {
                    Ok(Ok((offset, ts))) => r.with_offset(offset).with_timestamp(ts),
                    Ok(Err(code)) | Err(code) => {
                        r.with_error_code(code).with_offset(-1).with_timestamp(-1)
                    }
                }
            }
        }))
    });
    let answers = futures::future::join_all(lookups).await;
    let topics = body
        .topics
        .into_iter()
        .zip(answers)
        .map(|(t, partitions)| {
            ListOffsetsTopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    req.respond(
        ApiKey::ListOffsets,
        &ListOffsetsResponse::default().with_topics(topics),
    )
}

/// (offset, timestamp) for one partition.
async fn lookup(p: &Rc<Partition>, timestamp: i64) -> Result<(i64, i64), i16> {
    let hw = p.high_watermark();
    match timestamp {
        LATEST => Ok((hw, -1)),
        EARLIEST => Ok((p.log().log_start_offset(), -1)),
        MAX_TIMESTAMP => match p.log().max_timestamp() {
            Some((max, _)) => by_timestamp(p, max, hw).await,
            None => Ok((-1, -1)),
        },
        t if t < 0 => Err(errors::INVALID_REQUEST),
        t => by_timestamp(p, t, hw).await,
    }
}

async fn by_timestamp(p: &Rc<Partition>, timestamp: i64, hw: i64) -> Result<(i64, i64), i16> {
    let found = p
        .log()
        .find_batch_by_timestamp(timestamp, hw)
        .await
        .map_err(|e| errors::code_for(&e))?;
    let Some(batch) = found else {
        return Ok((-1, -1));
    };
    Ok(first_record_at_or_after(batch.bytes, timestamp)
        .unwrap_or((batch.header.base_offset, batch.header.max_timestamp)))
}

/// The first record of `batch` whose timestamp is at or after `timestamp`.
fn first_record_at_or_after(mut batch: Bytes, timestamp: i64) -> Option<(i64, i64)> {
    let set = RecordBatchDecoder::decode(&mut batch).ok()?;
    set.records
        .iter()
        .find(|r| r.timestamp >= timestamp)
        .map(|r| (r.offset, r.timestamp))
}
