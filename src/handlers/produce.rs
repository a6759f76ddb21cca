//! Produce: append each partition's record set on the shard that owns the partition.
//!
//! A request carries batches for partitions that live on different cores. The checks that need
//! no partition run here, on the connection's shard; then each owner shard gets one call with
//! all of its partitions' appends (a request over 1,000 partitions is two cross-core calls on
//! two shards, not a thousand), which starts them at once in request order. Calls to one shard
//! run in the order they were sent, so a connection's pipelined requests stay in order on
//! every partition they share.
//!
//! Request-level rules come first, in Kafka's order (`produce_checks.rs`); Produce v0–2 may
//! carry magic 0/1 message sets, which are up-converted here, on the connection's shard,
//! before the owner sees a v2 batch; the owner checks batches and records
//! (`Log::admit`).

use super::produce_checks::{self, Refusal};
use super::{authorize, errors, throttle, Request, Response};
use crate::protocol::errors::ErrorCode;
use crate::security::acl::Operation;
use crate::shard::client_quotas::QuotaKind;
use crate::shard::counters::Conversion;
use crate::shard::routing::on_shard;
use crate::shard::Shard;
use bytes::Bytes;
use ferrite_shards::batch::legacy::{self, up::up_convert};
use ferrite_shards::batch::record_checks::RecordError;
use ferrite_shards::batch::{BatchError, MAGIC_V2};
use ferrite_shards::log::AppendInfo;
use ferrite_shards::partition::Partition;
use ferrite_shards::placement::ShardId;
use ferrite_shards::Error;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Why a partition's records were not appended, with what Kafka's response carries for it.
#[derive(Debug, Default)]
struct Failure {
    code: ErrorCode,
    message: String,
    /// The partition's log start offset where Kafka reports it (refusals from the log's
    /// validation and producer state), -1 otherwise.
    log_start_offset: i64,
    /// The refused records (Produce v8+ `record_errors`), the first `RECORD_ERRORS_MAX`.
    record_errors: Vec<RecordError>,
}

impl From<Refusal> for Failure {
    fn from((code, message): Refusal) -> Failure {
        Failure {
            code,
            message,
            log_start_offset: -1,
            ..Failure::default()
        }
    }
}

type Outcome = Result<AppendInfo, Failure>;

pub async fn handle(shard: &Shard, req: &Request, body: ProduceRequest) -> Response {
    let acks = body.acks;
    let timeout = Duration::from_millis(body.timeout_ms.max(0) as u64);
    let record_sets: Vec<&Bytes> = body
        .topic_data
        .iter()
        .flat_map(|t| t.partition_data.iter().filter_map(|p| p.records.as_ref()))
        .collect();
    let transactional_id = body.transactional_id.as_ref().map(|t| t.to_string());
    let request_refusal = produce_checks::transactional_refusal(
        transactional_id.as_deref(),
        |id| authorize::transactional_id(shard, req, Operation::Write, id),
        &record_sets,
    );
    req.connection.note_owner(super::single_owner(
        shard,
        body.topic_data.iter().flat_map(|t| {
            t.partition_data
                .iter()
                .map(move |p| (t.name.0.as_str(), p.index))
        }),
    ));
    // Each partition, in request order: refused here, or an append for its owner.
    let mut outcomes: Vec<Option<Outcome>> = Vec::new();
    let mut by_owner: BTreeMap<ShardId, Vec<(usize, Append)>> = BTreeMap::new();
    let mut layout = Vec::with_capacity(body.topic_data.len());
    for topic in body.topic_data {
        let name = topic.name.0.to_string();
        // Kafka checks Write before the topic's existence, so a denied client cannot tell.
        let authorized = authorize::topic(shard, req, Operation::Write, &name);
        let mut indexes = Vec::with_capacity(topic.partition_data.len());
        for p in topic.partition_data {
            indexes.push(p.index);
            let slot = outcomes.len();
            let denied = (!authorized).then(|| {
                (
                    ErrorCode::TOPIC_AUTHORIZATION_FAILED,
                    format!("Write on topic {name} denied"),
                )
            });
            let before_append = request_refusal.clone().or(denied).or_else(|| {
                partition_refusal(shard, req, &name, p.index, acks, p.records.as_ref())
            });
            let at = AppendAt {
                topic: &name,
                index: p.index,
                acks,
                timeout,
                transactional_id: transactional_id.as_deref(),
                version: req.version,
            };
            let prepared = match before_append {
                Some(refusal) => Err(Failure::from(refusal)),
                None => prepare(shard, at, p.records),
            };
            match prepared {
                Ok((owner, append)) => {
                    by_owner.entry(owner).or_default().push((slot, append));
                    outcomes.push(None);
                }
                Err(failure) => outcomes.push(Some(Err(failure))),
            }
        }
        layout.push((topic.name, indexes));
    }
    let calls = by_owner
        .into_iter()
        .map(|(owner, appends)| append_on(shard, owner, appends));
    for (slot, outcome) in futures::future::join_all(calls).await.into_iter().flatten() {
        outcomes[slot] = Some(outcome);
    }
    let outcomes: Vec<Outcome> = outcomes
        .into_iter()
        .map(|o| o.expect("every partition refused or appended"))
        .collect();
    for failure in outcomes.iter().filter_map(|o| o.as_ref().err()) {
        errors::refused(shard, ApiKey::Produce, failure.code, &failure.message);
    }
    // producer_byte_rate counts the whole request, as Kafka's `request.sizeInBytes`; an acks=0
    // producer over it is muted without a response.
    let recorded = throttle::record(shard, req, QuotaKind::Produce, req.size as f64);
    let throttle_ms = throttle::apply(req, shard, recorded.as_ref());
    if acks == 0 {
        // Kafka closes an acks=0 producer's connection when a partition failed: the only way
        // such a producer learns of it (and refreshes its metadata).
        if let Some(f) = outcomes.iter().find_map(|o| o.as_ref().err()) {
            return Response::Close(format!(
                "acks=0 produce failed with error {}: {}",
                f.code, f.message
            ));
        }
        return Response::Nothing;
    }
    let mut outcomes = outcomes.into_iter();
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
        &ProduceResponse::default()
            .with_responses(responses)
            .with_throttle_time_ms(throttle_ms),
    )
}

/// What refuses one partition before its owner is asked, in Kafka's order: unknown topic,
/// the record set's shape (v3+), acks, internal topics, then the ISR for acks=all.
fn partition_refusal(
    shard: &Shard,
    req: &Request,
    topic: &str,
    index: i32,
    acks: i16,
    records: Option<&Bytes>,
) -> Option<Refusal> {
    if shard.metadata().partition(topic, index).is_none() {
        return Some((
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            format!("{topic}-{index} does not exist"),
        ));
    }
    if let Some(r) = records.and_then(|r| produce_checks::shape_refusal(req.version, r)) {
        return Some(r);
    }
    if let Some(r) = produce_checks::acks_refusal(acks) {
        return Some(r);
    }
    if let Some(r) = produce_checks::internal_topic_refusal(topic, &req.client_id) {
        return Some(r);
    }
    if acks == -1 {
        return not_enough_replicas(shard, topic, index, required_isr(shard, topic));
    }
    None
}

/// A Produce v0–2 magic 0/1 message set as one v2 batch (counted in the metrics); v2
/// batches as they came.
fn up_converted(shard: &Shard, records: Bytes) -> Result<Bytes, Failure> {
    if legacy::magic_of(&records).is_none_or(|m| m >= MAGIC_V2) {
        return Ok(records);
    }
    let started = Instant::now();
    let (batch, count) = up_convert(&records).map_err(|e| batch_failure(&e, -1))?;
    shard
        .metrics
        .converted(Conversion::Up, count, started.elapsed(), batch.len());
    Ok(batch)
}

/// Where and how one partition's records are appended.
struct AppendAt<'a> {
    topic: &'a str,
    index: i32,
    acks: i16,
    timeout: Duration,
    transactional_id: Option<&'a str>,
    version: i16,
}

/// One partition's append, ready to run on its owner.
struct Append {
    topic: String,
    index: i32,
    records: Bytes,
    acks: i16,
    timeout: Duration,
    /// `min.insync.replicas` of the topic, for acks=all.
    required: i32,
    /// A transactional producer's records: its (producer id, epoch) and transactional id.
    txn: Option<((i64, i16), String)>,
    version: i16,
    verification: bool,
}

/// The checks that need the partition's metadata but not the partition (its existence, this
/// broker's leadership, the record set's form), on the connection's shard: the owner and the
/// append, or the failure.
fn prepare(
    shard: &Shard,
    at: AppendAt<'_>,
    records: Option<Bytes>,
) -> Result<(ShardId, Append), Failure> {
    let Some(records) = records else {
        return Err(Failure::from((
            ErrorCode::CORRUPT_MESSAGE,
            "the record set is null".to_string(),
        )));
    };
    let records = up_converted(shard, records)?;
    let owner = {
        let metadata = shard.metadata();
        match metadata.partition(at.topic, at.index) {
            Some(info) if shard.leads(info) => info.shard,
            Some(_) => return Err(code_failure(ErrorCode::NOT_LEADER_OR_FOLLOWER)),
            None => return Err(code_failure(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)),
        }
    };
    let txn = produce_checks::transactional_producer(&records)
        .filter(|&(pid, _)| pid >= 0)
        .zip(at.transactional_id.map(str::to_string));
    let append = Append {
        topic: at.topic.to_string(),
        index: at.index,
        records,
        acks: at.acks,
        timeout: at.timeout,
        required: required_isr(shard, at.topic),
        txn,
        version: at.version,
        verification: shard.config.broker.transactions.verification,
    };
    Ok((owner, append))
}

/// Runs `appends` (each with its slot in the request) on their owner in one cross-core call,
/// all started at once in order; a stopped owner fails them all as not the leader.
async fn append_on(
    shard: &Shard,
    owner: ShardId,
    appends: Vec<(usize, Append)>,
) -> Vec<(usize, Outcome)> {
    let slots: Vec<usize> = appends.iter().map(|(slot, _)| *slot).collect();
    let outcomes = on_shard(shard, owner, move |s| async move {
        let appends = appends.into_iter().map(|(slot, append)| {
            let s = s.clone();
            async move { (slot, append_here(s, append).await) }
        });
        futures::future::join_all(appends).await
    })
    .await;
    outcomes.unwrap_or_else(|| {
        slots
            .into_iter()
            .map(|slot| (slot, Err(code_failure(ErrorCode::NOT_LEADER_OR_FOLLOWER))))
            .collect()
    })
}

/// Appends on the owner and, for acks=all, waits for the ISR. Transactional records are
/// verified with the transaction coordinator first (KIP-890), unless their producer's
/// transaction is already open in the partition.
async fn append_here(s: Rc<Shard>, append: Append) -> Outcome {
    let Append {
        topic,
        index,
        records,
        acks,
        timeout,
        required,
        txn,
        version,
        verification,
    } = append;
    let Some(part) = s.partition(&topic, index) else {
        return Err(code_failure(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION));
    };
    let epoch = part.leader_epoch();
    let info = match txn {
        None => part
            .produce(&records)
            .await
            .map_err(|e| append_failure(&e, &part))?,
        Some(((pid, producer_epoch), id)) => {
            let txn = InTxn {
                id,
                pid,
                producer_epoch,
                topic,
                version,
                verification,
            };
            in_turn(s, part.clone(), records, txn).await?
        }
    };
    if acks == -1 {
        committed(&part, &info, epoch, required, timeout).await?;
    }
    Ok(info)
}

fn code_failure(code: ErrorCode) -> Failure {
    Failure {
        code,
        log_start_offset: -1,
        ..Failure::default()
    }
}

/// A transactional append's producer and where it goes.
struct InTxn {
    id: String,
    pid: i64,
    producer_epoch: i16,
    topic: String,
    version: i16,
    verification: bool,
}

/// KIP-890 for transactional records whose producer has no transaction open in the partition:
/// a verification guard, the coordinator's word that the partition is in the transaction,
/// then the append. The producer's later requests wait their turn behind it (see
/// `Partition::take_turn`), and the whole runs in its own task, so a client that goes away
/// cannot leave the turn taken. With `transaction.partition.verification.enable=false` the
/// coordinator is not asked, and a batch of a producer with no open transaction is let in as
/// in Kafka (the log's checks still apply).
async fn in_turn(
    shard: std::rc::Rc<Shard>,
    part: std::rc::Rc<Partition>,
    records: Bytes,
    txn: InTxn,
) -> Outcome {
    let pid = txn.pid;
    let Some(turn) = part.take_turn(pid) else {
        return part
            .produce_verified(&records, None)
            .await
            .map_err(|e| append_failure(&e, &part));
    };
    let guard = if txn.verification {
        part.needs_verification(pid)
            .then(|| part.start_verification(pid))
    } else {
        Some(part.start_verification(pid))
    };
    let (done, result) = futures::channel::oneshot::channel();
    glommio::spawn_local(async move {
        let index = part.index();
        let verified = match guard {
            Some(_) if txn.verification => {
                crate::transactions::verify_for_produce(
                    &shard,
                    &txn.id,
                    pid,
                    txn.producer_epoch,
                    &txn.topic,
                    index,
                    txn.version,
                )
                .await
            }
            _ => Ok(()),
        };
        part.wait_turn(pid, turn).await;
        let outcome = match verified {
            Ok(()) => part
                .produce_verified(&records, guard)
                .await
                .map_err(|e| append_failure(&e, &part)),
            Err(code) => Err(Failure::from((
                code,
                format!(
                    "{}-{index} is not in the ongoing transaction of {} (producer {pid}, epoch {})",
                    txn.topic, txn.id, txn.producer_epoch
                ),
            ))),
        };
        part.end_turn(pid);
        let _ = done.send(outcome);
    })
    .detach();
    result
        .await
        .unwrap_or_else(|_| Err(code_failure(ErrorCode::NOT_LEADER_OR_FOLLOWER)))
}

/// Kafka reports the real log start offset with every refusal except the few it treats as
/// "unknown append info" (`ReplicaManager.appendToLocalLog`: corrupt records, too large,
/// storage errors, not leader).
fn append_failure(e: &Error, part: &Partition) -> Failure {
    let log_start = part.log().log_start_offset();
    match e {
        Error::InvalidBatch(b) => batch_failure(b, log_start),
        e => {
            let code = crate::protocol::errors::code_for(e);
            let reports_log_start = !matches!(
                code,
                ErrorCode::NOT_LEADER_OR_FOLLOWER | ErrorCode::KAFKA_STORAGE_ERROR
            );
            Failure {
                code,
                message: e.to_string(),
                log_start_offset: if reports_log_start { log_start } else { -1 },
                ..Failure::default()
            }
        }
    }
}

fn batch_failure(b: &BatchError, log_start_offset: i64) -> Failure {
    let code = crate::protocol::errors::batch_code(b);
    let unknown_append_info = matches!(
        code,
        ErrorCode::CORRUPT_MESSAGE | ErrorCode::MESSAGE_TOO_LARGE
    );
    let log_start_offset = if unknown_append_info {
        -1
    } else {
        log_start_offset
    };
    match b {
        BatchError::RecordsRefused { errors, count } => Failure {
            code,
            message: records_refused_message(code, errors, *count),
            log_start_offset,
            record_errors: errors.clone(),
        },
        b => Failure {
            code,
            message: b.to_string(),
            log_start_offset,
            ..Failure::default()
        },
    }
}

/// Kafka's summary of refused records (`LogValidator.processRecordErrors`).
fn records_refused_message(code: ErrorCode, errors: &[RecordError], count: usize) -> String {
    if code == ErrorCode::INVALID_TIMESTAMP {
        return "One or more records have been rejected due to invalid timestamp".to_string();
    }
    let first: Vec<String> = errors
        .iter()
        .take(3)
        .map(|e| {
            format!(
                "RecordError(batchIndex={}, message='{}')",
                e.index, e.message
            )
        })
        .collect();
    format!(
        "One or more records have been rejected due to {count} record errors in total, and only showing the first three errors at most: [{}]",
        first.join(", ")
    )
}

fn partition_response(index: i32, outcome: Outcome) -> PartitionProduceResponse {
    let r = PartitionProduceResponse::default().with_index(index);
    match outcome {
        Ok(info) => r
            .with_base_offset(info.base_offset)
            .with_log_append_time_ms(info.log_append_time_ms)
            .with_log_start_offset(info.log_start_offset),
        Err(f) => {
            let record_errors = f
                .record_errors
                .into_iter()
                .map(|e| {
                    BatchIndexAndErrorMessage::default()
                        .with_batch_index(e.index)
                        .with_batch_index_error_message(Some(StrBytes::from_string(e.message)))
                })
                .collect();
            r.with_error_code(f.code.code())
                .with_base_offset(-1)
                .with_log_append_time_ms(-1)
                .with_log_start_offset(f.log_start_offset)
                .with_record_errors(record_errors)
                .with_error_message(
                    (!f.message.is_empty()).then(|| StrBytes::from_string(f.message)),
                )
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
        .unwrap_or(shard.settings().min_insync_replicas)
}

/// acks=all needs `min.insync.replicas` replicas in the ISR.
fn not_enough_replicas(shard: &Shard, topic: &str, index: i32, required: i32) -> Option<Refusal> {
    let metadata = shard.metadata();
    let partition = metadata.partition(topic, index)?;
    let isr = partition.isr.len() as i32;
    (isr < required).then(|| {
        (
            ErrorCode::NOT_ENOUGH_REPLICAS,
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
) -> Result<(), Failure> {
    let log_start_offset = info.log_start_offset;
    let done = part
        .wait_committed(info.last_offset, epoch, timeout)
        .await
        .map_err(|e| append_failure(&e, part))?;
    if !done {
        return Err(Failure {
            code: ErrorCode::REQUEST_TIMED_OUT,
            message: format!(
                "offset {} was not replicated to the ISR within {timeout:?}",
                info.last_offset
            ),
            log_start_offset,
            ..Failure::default()
        });
    }
    let isr = part.role().isr.len() as i32;
    if isr < required {
        return Err(Failure {
            code: ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND,
            message: format!("written, but the in-sync replicas ({isr}) fell below min.insync.replicas ({required})"),
            log_start_offset,
            ..Failure::default()
        });
    }
    Ok(())
}
