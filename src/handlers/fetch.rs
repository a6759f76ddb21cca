//! Fetch: whole batches below the high watermark, with long polling.
//!
//! Each partition is read on its owner shard; what comes back is file ranges (or cached
//! batches), which the connection's shard splices to the socket. When less than `min_bytes` is
//! there, the request waits — on the owners, which wake it when their high watermark moves —
//! until `max_wait_ms` is up. A fetch without fetch sessions: every response is full.

use super::errors;
use super::routing::on_partition;
use super::{Request, Response};
use crate::protocol::fetch_response::{self, PartitionOut, TopicOut};
use crate::server::shard::Shard;
use ferrite_shards::log::Chunk;
use kafka_protocol::messages::{ApiKey, FetchRequest};
use std::time::{Duration, Instant};

/// Longest wait a fetch may ask for; longer asks are cut to it.
const MAX_WAIT_MS_MAX: i32 = 30_000;

struct Wanted {
    topic: String,
    /// (partition, fetch offset, partition max bytes, current leader epoch or -1).
    partitions: Vec<(i32, i64, u64, i32)>,
}

/// Who fetches: a consumer reads below the high watermark; a follower (replica id ≥ 0) up to
/// the log end, and its fetch offset tells the leader how far it has come.
#[derive(Copy, Clone)]
enum Reader {
    Consumer,
    Follower(i32),
}

#[derive(Default)]
struct Fetched {
    error: i16,
    high_watermark: i64,
    log_start: i64,
    chunks: Vec<Chunk>,
    bytes: u64,
}

pub async fn handle(shard: &Shard, req: &Request, body: FetchRequest) -> Response {
    let max_wait = Duration::from_millis(body.max_wait_ms.clamp(0, MAX_WAIT_MS_MAX) as u64);
    let min_bytes = body.min_bytes.max(0) as u64;
    let max_bytes = match body.max_bytes {
        n if n > 0 => n as u64,
        _ => i32::MAX as u64,
    };
    let wanted: Vec<Wanted> = body
        .topics
        .into_iter()
        .map(|t| Wanted {
            topic: t.topic.0.to_string(),
            partitions: t
                .partitions
                .into_iter()
                .map(|p| {
                    (
                        p.partition,
                        p.fetch_offset,
                        p.partition_max_bytes.max(0) as u64,
                        p.current_leader_epoch,
                    )
                })
                .collect(),
        })
        .collect();
    let reader = match body.replica_id.0 {
        id if id >= 0 => Reader::Follower(id),
        _ => Reader::Consumer,
    };
    let deadline = Instant::now() + max_wait;
    loop {
        let fetched = read_all(shard, &wanted, max_bytes, reader).await;
        let bytes: u64 = fetched.iter().flatten().map(|f| f.bytes).sum();
        let any_error = fetched.iter().flatten().any(|f| f.error != errors::NONE);
        let now = Instant::now();
        if bytes >= min_bytes || any_error || now >= deadline || shard.is_shutting_down() {
            return encode(shard, req, wanted, fetched);
        }
        // Bounded here too: the wait runs on other shards, which may be stopping.
        let left = deadline - now;
        let _ = glommio::timer::timeout(left, async {
            wait_for_any(shard, &wanted, left, reader).await;
            Ok(())
        })
        .await;
    }
}

/// Reads every partition at once, then keeps, in request order, what fits `max_bytes` (the
/// first partition with data always whole, so a consumer always makes progress).
async fn read_all(
    shard: &Shard,
    wanted: &[Wanted],
    max_bytes: u64,
    reader: Reader,
) -> Vec<Vec<Fetched>> {
    let reads = wanted.iter().map(|w| {
        futures::future::join_all(w.partitions.iter().map(
            |&(index, offset, partition_max, epoch)| {
                let limit = partition_max.min(max_bytes) as usize;
                read_partition(shard, &w.topic, index, offset, limit, reader, epoch)
            },
        ))
    });
    let mut fetched = futures::future::join_all(reads).await;
    let mut remaining = max_bytes;
    let mut any = false;
    for f in fetched.iter_mut().flatten() {
        if f.bytes == 0 {
            continue;
        }
        if any && f.bytes > remaining {
            f.chunks.clear();
            f.bytes = 0;
            continue;
        }
        remaining = remaining.saturating_sub(f.bytes);
        any = true;
    }
    fetched
}

async fn read_partition(
    shard: &Shard,
    topic: &str,
    index: i32,
    offset: i64,
    limit: usize,
    reader: Reader,
    leader_epoch: i32,
) -> Fetched {
    let read = on_partition(shard, topic, index, move |p| {
        Box::pin(async move {
            let result = match reader {
                Reader::Consumer => p.fetch(offset, limit).await,
                Reader::Follower(id) => p.read_for_follower(id, leader_epoch, offset, limit).await,
            };
            // Read after the data: the watermark is never below what was returned.
            let mut f = Fetched {
                high_watermark: p.high_watermark(),
                log_start: p.log().log_start_offset(),
                ..Fetched::default()
            };
            match result {
                Ok(r) => {
                    f.chunks = r.chunks;
                    f.bytes = r.bytes;
                }
                Err(e) => f.error = errors::code_for(&e),
            }
            f
        })
    })
    .await;
    read.unwrap_or_else(|code| Fetched {
        error: code,
        high_watermark: -1,
        log_start: -1,
        ..Fetched::default()
    })
}

/// Returns when any partition's high watermark (a follower: log end) passes its fetch offset,
/// or after `timeout`.
async fn wait_for_any(shard: &Shard, wanted: &[Wanted], timeout: Duration, reader: Reader) {
    let waits: Vec<_> = wanted
        .iter()
        .flat_map(|w| {
            w.partitions.iter().map(move |&(index, offset, _, _)| {
                Box::pin(on_partition(shard, &w.topic, index, move |p| {
                    Box::pin(async move {
                        match reader {
                            Reader::Consumer => p.wait_for_data(offset, timeout).await,
                            Reader::Follower(_) => p.wait_for_log_end(offset, timeout).await,
                        }
                    })
                }))
            })
        })
        .collect();
    if waits.is_empty() {
        glommio::timer::sleep(timeout).await;
        return;
    }
    let _ = futures::future::select_all(waits).await;
}

fn encode(
    shard: &Shard,
    req: &Request,
    wanted: Vec<Wanted>,
    fetched: Vec<Vec<Fetched>>,
) -> Response {
    let metrics = &shard.metrics;
    for (w, fs) in wanted.iter().zip(&fetched) {
        for (&(index, _, _, _), f) in w.partitions.iter().zip(fs) {
            metrics.error(ApiKey::Fetch, f.error);
            metrics.fetched(&w.topic, index, f.bytes);
        }
    }
    let topics = wanted
        .into_iter()
        .zip(fetched)
        .map(|(w, fs)| TopicOut {
            name: w.topic,
            partitions: w
                .partitions
                .into_iter()
                .zip(fs)
                .map(|((index, _, _, _), f)| PartitionOut {
                    index,
                    error_code: f.error,
                    high_watermark: f.high_watermark,
                    last_stable_offset: f.high_watermark,
                    log_start_offset: f.log_start,
                    records: f.chunks,
                    records_bytes: f.bytes,
                })
                .collect(),
        })
        .collect();
    Response::Chunks(fetch_response::encode(
        req.version,
        req.correlation_id,
        topics,
    ))
}
