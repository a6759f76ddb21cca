//! Fetch: whole batches below the high watermark, with long polling.
//!
//! Each partition is read on its owner shard; what comes back is file ranges (or cached
//! batches), which the connection's shard splices to the socket. When less than `min_bytes` is
//! there, the request waits — on the owners, which wake it when their high watermark moves —
//! until `max_wait_ms` is up. From v7 a fetch may open an incremental fetch session
//! (KIP-227, `shard/fetch_sessions.rs`): its later fetches name only what changed, and are
//! answered with only the partitions that have something new.
//!
//! Fetch v0–3 readers know only the old message formats: their data is down-converted on the
//! owner (magic 0 for v0–1, magic 1 for v2–3, as Kafka 3.9 does), which copies instead of
//! splicing and is counted in the metrics.

use super::{authorize, errors, throttle};
use super::{Request, Response};
use crate::protocol::errors::ErrorCode;
use crate::protocol::fetch_response::{self, PartitionOut, TopicOut};
use crate::security::acl::Operation;
use crate::shard::client_quotas::QuotaKind;
use crate::shard::counters::Conversion;
use crate::shard::fetch_sessions::{
    slots_of_shard, Answered, FetchContext, FetchParams, PartitionKey, TopicKey, INVALID_SESSION_ID,
};
use crate::shard::routing::on_partition;
use crate::shard::Shard;
use ferrite_shards::batch::legacy::{down::down_convert, MAGIC_V0, MAGIC_V1};
use ferrite_shards::batch::BatchError;
use ferrite_shards::log::{Chunk, ReadResult};
use ferrite_shards::partition::Partition;
use ferrite_shards::types::now_ms;
use kafka_protocol::messages::{ApiKey, FetchRequest};
use std::time::{Duration, Instant};

/// Longest wait a fetch may ask for; longer asks are cut to it.
const MAX_WAIT_MS_MAX: i32 = 30_000;

struct Wanted {
    /// The topic's name; for v13+ requests, looked up from its id (`None`: no such id).
    topic: Option<String>,
    id: [u8; 16],
    /// (partition, fetch offset, partition max bytes, current leader epoch or -1, the
    /// reader's log start or -1).
    partitions: Vec<(i32, i64, u64, i32, i64)>,
    /// The authorizer said no (a consumer needs Read on the topic, a follower ClusterAction).
    denied: bool,
}

/// Who fetches: a consumer reads below the high watermark; a follower (replica id ≥ 0) up to
/// the log end, and its fetch offset tells the leader how far it has come.
#[derive(Copy, Clone)]
enum Reader {
    /// A consumer, the message format its Fetch version reads (magic 0 or 1 before v4), and
    /// whether it reads committed records only (isolation level READ_COMMITTED, v4+).
    Consumer {
        magic: u8,
        read_committed: bool,
    },
    Follower(i32),
}

/// The record format each Fetch version reads: v0–1 magic 0, v2–3 magic 1, then batches.
fn magic_for(version: i16) -> u8 {
    match version {
        0 | 1 => MAGIC_V0,
        2 | 3 => MAGIC_V1,
        _ => ferrite_shards::batch::MAGIC_V2,
    }
}

#[derive(Default)]
struct Fetched {
    error: ErrorCode,
    high_watermark: i64,
    last_stable: i64,
    log_start: i64,
    /// READ_COMMITTED: the aborted transactions in what was read.
    aborted: Option<Vec<(i64, i64)>>,
    chunks: Vec<Chunk>,
    bytes: u64,
    /// Down-conversion for an old reader: records converted, time taken.
    converted: Option<(usize, Duration)>,
}

pub async fn handle(shard: &Shard, req: &Request, body: FetchRequest) -> Response {
    let max_wait = Duration::from_millis(body.max_wait_ms.clamp(0, MAX_WAIT_MS_MAX) as u64);
    let min_bytes = body.min_bytes.max(0) as u64;
    let max_bytes = match body.max_bytes {
        n if n > 0 => n as u64,
        _ => i32::MAX as u64,
    };
    // From v15 a follower names itself in ReplicaState (KIP-903).
    let replica_id = if req.version >= 15 {
        body.replica_state.replica_id.0
    } else {
        body.replica_id.0
    };
    // Kafka: a follower's fetch needs ClusterAction on the cluster, a consumer's Read on
    // each topic; either way a denied partition is TOPIC_AUTHORIZATION_FAILED.
    let follower_allowed =
        replica_id < 0 || authorize::cluster(shard, req, Operation::ClusterAction);
    let may_read = |topic: Option<&str>| match topic {
        _ if replica_id >= 0 => follower_allowed,
        Some(name) => authorize::topic(shard, req, Operation::Read, name),
        None => true,
    };
    let metadata = shard.metadata();
    let wanted: Vec<Wanted> = body
        .topics
        .into_iter()
        .map(|t| {
            // From v13 a topic is named by its id only (KIP-516).
            let (topic, id) = if req.version >= 13 {
                let id = *t.topic_id.as_bytes();
                (metadata.topic_by_id(&id).map(|info| info.name.clone()), id)
            } else {
                let name = t.topic.0.to_string();
                let id = metadata.topic(&name).map_or([0; 16], |info| info.id);
                (Some(name), id)
            };
            Wanted {
                denied: !may_read(topic.as_deref()),
                topic,
                id,
                partitions: t
                    .partitions
                    .into_iter()
                    .map(|p| {
                        (
                            p.partition,
                            p.fetch_offset,
                            p.partition_max_bytes.max(0) as u64,
                            p.current_leader_epoch,
                            p.log_start_offset,
                        )
                    })
                    .collect(),
            }
        })
        .collect();
    let forgotten: Vec<PartitionKey> = body
        .forgotten_topics_data
        .iter()
        .flat_map(|t| {
            let topic = if req.version >= 13 {
                TopicKey::Id(*t.topic_id.as_bytes())
            } else {
                TopicKey::Name(t.topic.0.to_string())
            };
            t.partitions.iter().map(move |&p| (topic.clone(), p))
        })
        .collect();
    let context = match req.version {
        0..=6 => FetchContext::Sessionless,
        _ => shard.fetch_sessions.borrow_mut().new_context(
            body.session_id,
            body.session_epoch,
            req.version >= 13,
            &session_keys(&wanted, req.version),
            &forgotten,
            now_ms(),
        ),
    };
    let wanted = match &context {
        FetchContext::Error(code) => {
            drop(metadata);
            return session_error(req, *code, INVALID_SESSION_ID);
        }
        FetchContext::Incremental { partitions, .. } => {
            wanted_of_session(&metadata, partitions, may_read)
        }
        FetchContext::Sessionless | FetchContext::Full => wanted,
    };
    drop(metadata);
    req.connection.note_owner(super::single_owner(
        shard,
        wanted.iter().flat_map(|w| {
            let topic = w.topic.as_deref();
            w.partitions
                .iter()
                .filter_map(move |p| topic.map(|t| (t, p.0)))
        }),
    ));
    let reader = match replica_id {
        id if id >= 0 => Reader::Follower(id),
        _ => Reader::Consumer {
            magic: magic_for(req.version),
            // Kafka's IsolationLevel: 0 READ_UNCOMMITTED, 1 READ_COMMITTED; anything else is
            // refused by its request parser (`IsolationLevel.forId`), taken here as the safe one.
            read_committed: req.version >= 4 && body.isolation_level != 0,
        },
    };
    let deadline = Instant::now() + max_wait;
    loop {
        let fetched = read_all(shard, &wanted, max_bytes, reader).await;
        let bytes: u64 = fetched.iter().flatten().map(|f| f.bytes).sum();
        let any_error = fetched.iter().flatten().any(|f| f.error != ErrorCode::NONE);
        let now = Instant::now();
        if bytes >= min_bytes || any_error || now >= deadline || shard.is_shutting_down() {
            return encode(shard, req, wanted, fetched, reader, &context);
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

/// The request's partitions as a fetch session keeps them: by topic id from v13, by name
/// before.
fn session_keys(wanted: &[Wanted], version: i16) -> Vec<(PartitionKey, FetchParams)> {
    wanted
        .iter()
        .flat_map(|w| {
            let topic = match (&w.topic, version >= 13) {
                (Some(name), false) => TopicKey::Name(name.clone()),
                _ => TopicKey::Id(w.id),
            };
            w.partitions
                .iter()
                .map(move |&(p, offset, max_bytes, epoch, log_start)| {
                    let params = FetchParams {
                        fetch_offset: offset,
                        max_bytes,
                        current_leader_epoch: epoch,
                        log_start_offset: log_start,
                    };
                    ((topic.clone(), p), params)
                })
        })
        .collect()
}

/// An incremental fetch's partitions, in the session's order, as the request would have
/// named them (consecutive partitions of a topic together, as Kafka's response groups them).
fn wanted_of_session(
    metadata: &crate::metadata::ClusterMetadata,
    partitions: &[(PartitionKey, FetchParams)],
    may_read: impl Fn(Option<&str>) -> bool,
) -> Vec<Wanted> {
    let mut out: Vec<(TopicKey, Wanted)> = Vec::new();
    for ((topic, index), params) in partitions {
        let entry = (
            *index,
            params.fetch_offset,
            params.max_bytes,
            params.current_leader_epoch,
            params.log_start_offset,
        );
        match out.last_mut() {
            Some((key, w)) if key == topic => w.partitions.push(entry),
            _ => {
                let (name, id) = match topic {
                    TopicKey::Id(id) => (metadata.topic_by_id(id).map(|t| t.name.clone()), *id),
                    TopicKey::Name(name) => (
                        Some(name.clone()),
                        metadata.topic(name).map_or([0; 16], |t| t.id),
                    ),
                };
                let w = Wanted {
                    denied: !may_read(name.as_deref()),
                    topic: name,
                    id,
                    partitions: vec![entry],
                };
                out.push((topic.clone(), w));
            }
        }
    }
    out.into_iter().map(|(_, w)| w).collect()
}

/// A fetch answered with a top-level error only (a fetch session's).
fn session_error(req: &Request, code: ErrorCode, session_id: i32) -> Response {
    Response::Chunks(fetch_response::encode(
        req.version,
        req.correlation_id,
        fetch_response::Head {
            throttle_time_ms: 0,
            error_code: code.code(),
            session_id,
        },
        Vec::new(),
    ))
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
            |&(index, offset, partition_max, epoch, log_start)| {
                let limit = partition_max.min(max_bytes) as usize;
                let at = FetchAt {
                    offset,
                    limit,
                    leader_epoch: epoch,
                    log_start,
                };
                let topic = if w.denied {
                    Err(ErrorCode::TOPIC_AUTHORIZATION_FAILED)
                } else {
                    w.topic.as_deref().ok_or(ErrorCode::UNKNOWN_TOPIC_ID)
                };
                read_partition(shard, topic, index, at, reader)
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

/// Where one partition is read from, as the request says it.
#[derive(Clone, Copy)]
struct FetchAt {
    offset: i64,
    limit: usize,
    leader_epoch: i32,
    /// The reader's own log start (a follower's, v5+; -1 otherwise).
    log_start: i64,
}

async fn read_partition(
    shard: &Shard,
    topic: Result<&str, ErrorCode>,
    index: i32,
    at: FetchAt,
    reader: Reader,
) -> Fetched {
    let FetchAt {
        offset,
        limit,
        leader_epoch,
        log_start,
    } = at;
    let topic = match topic {
        Ok(t) => t,
        Err(error) => {
            return Fetched {
                error,
                high_watermark: -1,
                last_stable: -1,
                log_start: -1,
                ..Fetched::default()
            }
        }
    };
    let read = on_partition(shard, topic, index, move |p| {
        Box::pin(async move {
            let mut aborted = None;
            let result = match reader {
                Reader::Consumer {
                    read_committed: true,
                    ..
                } => p.fetch_committed(offset, limit).await.map(|(r, list)| {
                    aborted = Some(
                        list.iter()
                            .map(|a| (a.producer_id, a.first_offset))
                            .collect(),
                    );
                    r
                }),
                Reader::Consumer { .. } => p.fetch(offset, limit).await,
                Reader::Follower(id) => {
                    let read = p.read_for_follower(id, leader_epoch, offset, limit).await;
                    p.follower_log_start(id, log_start);
                    read
                }
            };
            let result = match (reader, result) {
                (Reader::Consumer { magic, .. }, Ok(r))
                    if magic < ferrite_shards::batch::MAGIC_V2 =>
                {
                    down_converted(&p, r, magic, offset, limit).await
                }
                (_, result) => result
                    .map(|r| (r, None))
                    .map_err(|e| crate::protocol::errors::code_for(&e)),
            };
            // Read after the data: the watermark is never below what was returned.
            let mut f = Fetched {
                high_watermark: p.high_watermark(),
                last_stable: p.last_stable_offset(),
                log_start: p.log().log_start_offset(),
                aborted,
                ..Fetched::default()
            };
            match result {
                Ok((r, converted)) => {
                    f.chunks = r.chunks;
                    f.bytes = r.bytes;
                    f.converted = converted;
                }
                Err(code) => f.error = code,
            }
            f
        })
    })
    .await;
    read.unwrap_or_else(|code| Fetched {
        error: code,
        high_watermark: -1,
        last_stable: -1,
        log_start: -1,
        ..Fetched::default()
    })
}

/// What an old reader gets instead of `read`: the same records as a magic 0/1 message set,
/// built in memory (`message.downconversion.enable=false` refuses instead, as Kafka does).
async fn down_converted(
    p: &Partition,
    read: ReadResult,
    magic: u8,
    offset: i64,
    limit: usize,
) -> Result<(ReadResult, Option<(usize, Duration)>), ErrorCode> {
    if !p.log().config().message_downconversion_enable {
        return Err(ErrorCode::UNSUPPORTED_VERSION);
    }
    if read.chunks.is_empty() {
        return Ok((read, None));
    }
    let started = Instant::now();
    let data = read
        .to_bytes()
        .await
        .map_err(|_| ErrorCode::KAFKA_STORAGE_ERROR)?;
    let converted = match down_convert(&data, magic, offset, limit) {
        Ok(c) => c,
        Err(BatchError::UnsupportedCompression { .. }) => {
            return Err(ErrorCode::UNSUPPORTED_COMPRESSION_TYPE)
        }
        Err(e) => {
            tracing::warn!(topic = %p.topic(), partition = p.index(), error = %e, "down-converting a fetch failed");
            return Err(ErrorCode::KAFKA_STORAGE_ERROR);
        }
    };
    let set = converted.set.freeze();
    let out = ReadResult {
        bytes: set.len() as u64,
        chunks: vec![Chunk::Memory(set)],
        next_offset: read.next_offset,
    };
    Ok((out, Some((converted.records, started.elapsed()))))
}

/// Returns when any partition's high watermark (a follower: log end) passes its fetch offset,
/// or after `timeout`.
async fn wait_for_any(shard: &Shard, wanted: &[Wanted], timeout: Duration, reader: Reader) {
    let waits: Vec<_> = wanted
        .iter()
        .filter_map(|w| Some((w.topic.as_deref()?, w)))
        .flat_map(|(topic, w)| {
            w.partitions.iter().map(move |&(index, offset, _, _, _)| {
                Box::pin(on_partition(shard, topic, index, move |p| {
                    Box::pin(async move {
                        match reader {
                            Reader::Consumer {
                                read_committed: true,
                                ..
                            } => p.wait_for_stable(offset, timeout).await,
                            Reader::Consumer { .. } => p.wait_for_data(offset, timeout).await,
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
    mut wanted: Vec<Wanted>,
    mut fetched: Vec<Vec<Fetched>>,
    reader: Reader,
    context: &FetchContext,
) -> Response {
    // consumer_byte_rate counts what the response carries (followers are not client-quota'd).
    // Over it, Kafka answers with no data at all and takes the bytes back, so the client
    // waits the throttle time and asks again (`getThrottledResponse`).
    let recorded = match reader {
        Reader::Consumer { .. } => {
            let bytes: u64 = fetched.iter().flatten().map(|f| f.bytes).sum();
            throttle::record(shard, req, QuotaKind::Fetch, bytes as f64)
        }
        Reader::Follower(_) => None,
    };
    let throttle_ms = throttle::apply(req, shard, recorded.as_ref());
    if let Some(r) = recorded.filter(|_| throttle_ms > 0) {
        throttle::unrecord(shard, &r);
        // A session goes on through a throttled fetch; none is made by one.
        let (error_code, session_id) = match context {
            FetchContext::Incremental {
                session_id, epoch, ..
            } if !shard.fetch_sessions.borrow().is_at(*session_id, *epoch) => {
                (ErrorCode::INVALID_FETCH_SESSION_EPOCH, *session_id)
            }
            FetchContext::Incremental { session_id, .. } => (ErrorCode::NONE, *session_id),
            _ => (ErrorCode::NONE, INVALID_SESSION_ID),
        };
        return Response::Chunks(fetch_response::encode(
            req.version,
            req.correlation_id,
            fetch_response::Head {
                throttle_time_ms: throttle_ms,
                error_code: error_code.code(),
                session_id,
            },
            Vec::new(),
        ));
    }
    let metrics = &shard.metrics;
    for (w, fs) in wanted.iter().zip(&fetched) {
        for (&(index, _, _, _, _), f) in w.partitions.iter().zip(fs) {
            errors::refused(
                shard,
                ApiKey::Fetch,
                f.error,
                &format_args!(
                    "{}-{index}",
                    w.topic.as_deref().unwrap_or("(unknown topic id)")
                ),
            );
            if let Some(topic) = &w.topic {
                metrics.fetched(topic, index, f.bytes);
            }
            if let Some((records, took)) = f.converted {
                metrics.converted(Conversion::Down, records, took, f.bytes as usize);
            }
        }
    }
    let session_id = match session_reply(shard, req, &mut wanted, &mut fetched, reader, context) {
        Ok(id) => id,
        Err(code) => {
            let id = match context {
                FetchContext::Incremental { session_id, .. } => *session_id,
                _ => INVALID_SESSION_ID,
            };
            return session_error(req, code, id);
        }
    };
    let topics = wanted
        .into_iter()
        .zip(fetched)
        .map(|(w, fs)| TopicOut {
            name: w.topic.unwrap_or_default(),
            id: w.id,
            partitions: w
                .partitions
                .into_iter()
                .zip(fs)
                .map(|((index, _, _, _, _), f)| PartitionOut {
                    index,
                    error_code: old_reader_code(req.version, f.error).code(),
                    high_watermark: f.high_watermark,
                    last_stable_offset: f.last_stable,
                    log_start_offset: f.log_start,
                    aborted: f.aborted,
                    records: f.chunks,
                    records_bytes: f.bytes,
                })
                .collect(),
        })
        .collect();
    Response::Chunks(fetch_response::encode(
        req.version,
        req.correlation_id,
        fetch_response::Head {
            throttle_time_ms: 0,
            error_code: 0,
            session_id,
        },
        topics,
    ))
}

/// What the fetch session makes of an answer: a full fetch at epoch 0 opens a session of its
/// partitions (if a slot is free); an incremental one keeps only the partitions with
/// something new (the others are dropped from `wanted` and `fetched`). The response's session
/// id, or the session's error.
fn session_reply(
    shard: &Shard,
    req: &Request,
    wanted: &mut Vec<Wanted>,
    fetched: &mut Vec<Vec<Fetched>>,
    reader: Reader,
    context: &FetchContext,
) -> Result<i32, ErrorCode> {
    let answered = |f: &Fetched| Answered {
        bytes: f.bytes,
        high_watermark: f.high_watermark,
        log_start_offset: f.log_start,
        error: f.error != ErrorCode::NONE,
    };
    let answers = fetched.iter().flatten().map(answered);
    match context {
        FetchContext::Sessionless | FetchContext::Error(_) => Ok(INVALID_SESSION_ID),
        FetchContext::Full => {
            let keyed = session_keys(wanted, req.version);
            let slots = slots_of_shard(
                shard.settings().fetch_session_slots,
                shard.id.0,
                shard.router().shard_count(),
            );
            let partitions = keyed
                .into_iter()
                .zip(answers)
                .map(|((key, params), a)| (key, params, a))
                .collect();
            let follower = matches!(reader, Reader::Follower(_));
            Ok(shard.fetch_sessions.borrow_mut().maybe_create(
                slots,
                follower,
                req.version >= 13,
                partitions,
                now_ms(),
            ))
        }
        FetchContext::Incremental {
            session_id,
            epoch,
            partitions,
        } => {
            // `wanted` was made from the session's partitions, in this order.
            let answers: Vec<(PartitionKey, Answered)> = partitions
                .iter()
                .map(|(k, _)| k.clone())
                .zip(answers)
                .collect();
            let included = shard
                .fetch_sessions
                .borrow_mut()
                .select(*session_id, *epoch, &answers)
                .ok_or(ErrorCode::INVALID_FETCH_SESSION_EPOCH)?;
            let mut keep = included.into_iter();
            let pairs = std::mem::take(wanted)
                .into_iter()
                .zip(std::mem::take(fetched));
            for (mut w, fs) in pairs {
                let (partitions, fs): (Vec<_>, Vec<_>) = w
                    .partitions
                    .into_iter()
                    .zip(fs)
                    .filter(|_| keep.next() == Some(true))
                    .unzip();
                if !partitions.is_empty() {
                    w.partitions = partitions;
                    wanted.push(w);
                    fetched.push(fs);
                }
            }
            Ok(*session_id)
        }
    }
}

/// Kafka answers Fetch v5 and older with NOT_LEADER_OR_FOLLOWER where later versions get
/// KAFKA_STORAGE_ERROR, which those clients do not know (`maybeDownConvertStorageError`).
fn old_reader_code(version: i16, code: ErrorCode) -> ErrorCode {
    if version <= 5 && code == ErrorCode::KAFKA_STORAGE_ERROR {
        ErrorCode::NOT_LEADER_OR_FOLLOWER
    } else {
        code
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_fetch_versions_read_old_message_formats() {
        assert_eq!([0, 1].map(magic_for), [MAGIC_V0; 2]);
        assert_eq!([2, 3].map(magic_for), [MAGIC_V1; 2]);
        assert_eq!(
            [4, 12, 17].map(magic_for),
            [ferrite_shards::batch::MAGIC_V2; 3]
        );
    }

    #[test]
    fn readers_before_v6_get_not_leader_for_a_storage_error() {
        assert_eq!(
            old_reader_code(5, ErrorCode::KAFKA_STORAGE_ERROR),
            ErrorCode::NOT_LEADER_OR_FOLLOWER
        );
        assert_eq!(
            old_reader_code(6, ErrorCode::KAFKA_STORAGE_ERROR),
            ErrorCode::KAFKA_STORAGE_ERROR
        );
        assert_eq!(
            old_reader_code(3, ErrorCode::OFFSET_OUT_OF_RANGE),
            ErrorCode::OFFSET_OUT_OF_RANGE
        );
    }
}
