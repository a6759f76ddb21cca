//! ListOffsets: the earliest, latest, or first offset at or after a timestamp.
//!
//! A timestamp search finds the first batch whose newest timestamp reaches it (through the time
//! index), then the first record in it at or after the timestamp — decompressing the batch if
//! it is compressed — as Kafka does. No such record: offset -1, timestamp -1, no error.
//!
//! v0 is the pre-0.10 form: a list of up to `max_num_offsets` offsets, newest first, at
//! segment granularity (`UnifiedLog.legacyFetchOffsetsBefore`).

use super::{authorize, errors};
use super::{Request, Response};
use crate::protocol::errors::ErrorCode;
use crate::security::acl::Operation;
use crate::shard::routing::on_partition;
use crate::shard::Shard;
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
/// KIP-405's "earliest local" (v8+): without tiered storage, the log start.
const EARLIEST_LOCAL: i64 = -4;
/// KIP-1005's "latest tiered" (v9+): without tiered storage, nothing is tiered.
const LATEST_TIERED: i64 = -5;
/// The replica id of a consumer (anything else reads to the log end).
const CONSUMER_REPLICA_ID: i32 = -1;

pub async fn handle(shard: &Shard, req: &Request, body: ListOffsetsRequest) -> Response {
    // v4+ carries the leader epoch; one epoch (0) for the partition's whole life on one broker.
    let leader_epoch = if req.version >= 4 { 0 } else { -1 };
    let from_consumer = body.replica_id.0 == CONSUMER_REPLICA_ID;
    let v0 = req.version == 0;
    // Kafka's `fetchOffsetForTimestamp`: what is offered ends at the last stable offset for a
    // READ_COMMITTED consumer (v2+), the high watermark for other consumers, and the log end
    // for a replica.
    let bound = match (from_consumer, req.version >= 2 && body.isolation_level == 1) {
        (false, _) => Bound::LogEnd,
        (true, true) => Bound::LastStable,
        (true, false) => Bound::HighWatermark,
    };
    let lookups = body.topics.iter().map(|t| {
        let name = t.name.0.to_string();
        let authorized = authorize::topic(shard, req, Operation::Describe, &name);
        futures::future::join_all(t.partitions.iter().map(move |p| {
            let name = name.clone();
            let (index, timestamp) = (p.partition_index, p.timestamp);
            let max_num_offsets = p.max_num_offsets;
            async move {
                if !authorized {
                    let code = ErrorCode::TOPIC_AUTHORIZATION_FAILED;
                    errors::refused(shard, ApiKey::ListOffsets, code, &name);
                    return ListOffsetsPartitionResponse::default()
                        .with_partition_index(index)
                        .with_error_code(code.code())
                        .with_offset(-1)
                        .with_timestamp(-1);
                }
                if v0 {
                    return legacy_answer(
                        shard,
                        &name,
                        index,
                        timestamp,
                        max_num_offsets,
                        from_consumer,
                    )
                    .await;
                }
                let found = on_partition(shard, &name, index, move |part| {
                    Box::pin(async move { lookup(&part, timestamp, bound).await })
                })
                .await;
                let r = ListOffsetsPartitionResponse::default()
                    .with_partition_index(index)
                    .with_leader_epoch(leader_epoch);
                match found {
                    Ok(Ok((offset, ts))) => r.with_offset(offset).with_timestamp(ts),
                    Ok(Err(code)) | Err(code) => {
                        errors::refused(
                            shard,
                            ApiKey::ListOffsets,
                            code,
                            &format_args!("{name}-{index} at timestamp {timestamp}"),
                        );
                        r.with_error_code(code.code())
                            .with_offset(-1)
                            .with_timestamp(-1)
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

/// Where the offsets a ListOffsets reader may be given end.
#[derive(Copy, Clone)]
enum Bound {
    LastStable,
    HighWatermark,
    LogEnd,
}

/// (offset, timestamp) for one partition.
async fn lookup(p: &Rc<Partition>, timestamp: i64, bound: Bound) -> Result<(i64, i64), ErrorCode> {
    let fetchable = match bound {
        Bound::LastStable => p.last_stable_offset(),
        Bound::HighWatermark => p.high_watermark(),
        Bound::LogEnd => p.log().log_end_offset(),
    };
    match timestamp {
        LATEST => Ok((fetchable, -1)),
        EARLIEST | EARLIEST_LOCAL => Ok((p.log().log_start_offset(), -1)),
        LATEST_TIERED => Ok((-1, -1)),
        MAX_TIMESTAMP => match p.log().max_timestamp() {
            Some((max, _)) => by_timestamp(p, max, fetchable).await,
            None => Ok((-1, -1)),
        },
        t if t < 0 => Err(ErrorCode::INVALID_REQUEST),
        t => by_timestamp(p, t, fetchable).await,
    }
}

async fn by_timestamp(p: &Rc<Partition>, timestamp: i64, hw: i64) -> Result<(i64, i64), ErrorCode> {
    let found = p
        .log()
        .find_batch_by_timestamp(timestamp, hw)
        .await
        .map_err(|e| crate::protocol::errors::code_for(&e))?;
    let Some(batch) = found else {
        return Ok((-1, -1));
    };
    // Kafka searches from the log start: records below it (DeleteRecords inside a batch)
    // are not answered.
    let start = p.log().log_start_offset();
    Ok(
        first_record_at_or_after(batch.bytes, timestamp, start).unwrap_or((
            batch.header.base_offset.max(start),
            batch.header.max_timestamp,
        )),
    )
}

/// The first record of `batch` at or after offset `start` whose timestamp is at or after
/// `timestamp`.
fn first_record_at_or_after(mut batch: Bytes, timestamp: i64, start: i64) -> Option<(i64, i64)> {
    let set = RecordBatchDecoder::decode(&mut batch).ok()?;
    set.records
        .iter()
        .find(|r| r.offset >= start && r.timestamp >= timestamp)
        .map(|r| (r.offset, r.timestamp))
}

/// A v0 partition answer: offsets only (`old_style_offsets`).
async fn legacy_answer(
    shard: &Shard,
    topic: &str,
    index: i32,
    timestamp: i64,
    max_num_offsets: i32,
    from_consumer: bool,
) -> ListOffsetsPartitionResponse {
    let r = ListOffsetsPartitionResponse::default().with_partition_index(index);
    // v0 knows only latest and earliest among the negative timestamps.
    if timestamp < EARLIEST {
        errors::refused(
            shard,
            ApiKey::ListOffsets,
            ErrorCode::UNSUPPORTED_VERSION,
            &format_args!("v0 knows no timestamp {timestamp}"),
        );
        return r.with_error_code(ErrorCode::UNSUPPORTED_VERSION.code());
    }
    let found = on_partition(shard, topic, index, move |part| {
        Box::pin(async move {
            let log = part.log();
            let view = SegmentView {
                segments: log.segment_times(),
                log_start: log.log_start_offset(),
                log_end: log.log_end_offset(),
                now_ms: ferrite_shards::types::now_ms(),
            };
            let offsets = view.offsets_before(timestamp, max_num_offsets.max(0) as usize);
            if from_consumer {
                capped_at(offsets, part.high_watermark())
            } else {
                offsets
            }
        })
    })
    .await;
    match found {
        Ok(offsets) => r.with_old_style_offsets(offsets),
        Err(code) => {
            errors::refused(
                shard,
                ApiKey::ListOffsets,
                code,
                &format_args!("{topic}-{index}"),
            );
            r.with_error_code(code.code())
        }
    }
}

/// What v0's answer is computed from: each segment as (first offset, newest timestamp).
struct SegmentView {
    segments: Vec<(i64, i64)>,
    log_start: i64,
    log_end: i64,
    now_ms: i64,
}

impl SegmentView {
    /// Kafka's `legacyFetchOffsetsBefore`: the segments' first offsets (and the log end, when
    /// the active segment holds data) with their times; latest starts from the last, earliest
    /// from the first, a timestamp from the newest entry not after it; then up to `max`
    /// offsets going back, newest first.
    fn offsets_before(&self, timestamp: i64, max: usize) -> Vec<i64> {
        let mut points: Vec<(i64, i64)> = self
            .segments
            .iter()
            .map(|&(base, time)| (base.max(self.log_start), time))
            .collect();
        let last_has_data = self
            .segments
            .last()
            .is_some_and(|&(base, _)| self.log_end > base);
        if last_has_data {
            points.push((self.log_end, self.now_ms));
        }
        let start = match timestamp {
            LATEST => points.len().checked_sub(1),
            EARLIEST => (!points.is_empty()).then_some(0),
            t => points.iter().rposition(|&(_, time)| time <= t),
        };
        let Some(start) = start else {
            return Vec::new();
        };
        points[..=start]
            .iter()
            .rev()
            .take(max)
            .map(|&(offset, _)| offset)
            .collect()
    }
}

/// A consumer sees nothing past the high watermark: Kafka puts the watermark first and drops
/// the offsets beyond it (`Partition.legacyFetchOffsetsForTimestamp`).
fn capped_at(offsets: Vec<i64>, high_watermark: i64) -> Vec<i64> {
    if !offsets.iter().any(|&o| o > high_watermark) {
        return offsets;
    }
    std::iter::once(high_watermark)
        .chain(offsets.into_iter().skip_while(|&o| o > high_watermark))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> SegmentView {
        SegmentView {
            segments: vec![(0, 100), (10, 200), (20, 300)],
            log_start: 3,
            log_end: 25,
            now_ms: 1000,
        }
    }

    #[test]
    fn v0_lists_segment_starts_newest_first() {
        let v = view();
        assert_eq!(v.offsets_before(LATEST, 1), [25]);
        assert_eq!(v.offsets_before(LATEST, 10), [25, 20, 10, 3]);
        assert_eq!(v.offsets_before(EARLIEST, 1), [3]);
        assert_eq!(v.offsets_before(EARLIEST, 5), [3]);
        assert_eq!(v.offsets_before(250, 5), [10, 3]);
        assert_eq!(v.offsets_before(50, 5), Vec::<i64>::new());
        assert_eq!(v.offsets_before(2000, 2), [25, 20]);
    }

    #[test]
    fn an_empty_active_segment_adds_no_log_end() {
        let v = SegmentView {
            segments: vec![(0, 100), (25, -1)],
            log_start: 0,
            log_end: 25,
            now_ms: 1000,
        };
        assert_eq!(v.offsets_before(LATEST, 5), [25, 0]);
    }

    #[test]
    fn consumers_are_capped_at_the_high_watermark() {
        assert_eq!(capped_at(vec![25, 20, 10], 22), [22, 20, 10]);
        assert_eq!(capped_at(vec![20, 10], 22), [20, 10]);
    }
}
