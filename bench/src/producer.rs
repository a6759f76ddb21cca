//! Producer tasks: records batched per partition by size and linger, sent pipelined, each
//! acknowledgement timed against the record's intended (open loop) or creation time.
//!
//! Every record carries a header `fb` of 16 bytes — send time in microseconds since the epoch,
//! producer number, sequence — so consumers can time end-to-end latency and check content. The
//! value is `--size` bytes of a fixed pattern (shared, so building a record copies nothing).

use crate::buffer::Buffer;
use crate::client::TopicLayout;
use crate::partitioner::{partition_for_key, Partitioner};
use crate::pipe::SentPart;
use crate::records::{encode_batch, OutRecord};
use crate::schedule::{Clock, Schedule, SystemClock};
use crate::sender::Sender;
use crate::stats::Stats;
use crate::transactions::Transactions;
use anyhow::Result;
use bytes::Bytes;
use kafka_protocol::records::Compression;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[derive(Clone, Debug)]
pub struct ProduceConfig {
    pub topic: String,
    /// Messages for all producers together.
    pub messages: Option<u64>,
    pub duration: Option<Duration>,
    pub size: usize,
    pub batch_bytes: usize,
    /// The most batch bytes one produce request carries (Kafka's `max.request.size`); a
    /// flush of more partitions goes out as several requests.
    pub max_request_bytes: usize,
    /// Bytes of records one producer holds until they are answered (Kafka's `buffer.memory`);
    /// it waits for answers beyond it.
    pub buffer_bytes: u64,
    pub linger: Duration,
    pub acks: i16,
    pub compression: Compression,
    pub keys: Option<u64>,
    pub partitioner: Partitioner,
    pub producers: usize,
    /// Messages per second for all producers together (open loop).
    pub rate: Option<f64>,
    /// Transactional producers: each uses `<prefix>-<producer number>` and commits a
    /// transaction every `transaction_records` records.
    pub transactional_id: Option<String>,
    pub transaction_records: u64,
}

/// Microseconds since the Unix epoch for an `Instant` (wall time of a monotonic instant).
pub fn epoch_micros(at: Instant) -> u64 {
    let now_i = Instant::now();
    let now_w = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let wall = if at <= now_i {
        now_w.saturating_sub(now_i - at)
    } else {
        now_w + (at - now_i)
    };
    wall.as_micros() as u64
}

/// The value bytes of every record of a run: `size` bytes of a fixed pattern.
pub fn payload(size: usize) -> Bytes {
    Bytes::from((0..size).map(|i| (i % 251) as u8).collect::<Vec<u8>>())
}

/// Records waiting to be sent to one partition.
#[derive(Default)]
struct Accumulator {
    records: Vec<OutRecord>,
    due: Vec<Instant>,
    bytes: usize,
    first_at: Option<Instant>,
}

pub struct Producer {
    id: u32,
    cfg: ProduceConfig,
    layout: TopicLayout,
    stats: Arc<Stats>,
    stop: Arc<AtomicBool>,
}

impl Producer {
    pub fn new(
        id: u32,
        cfg: ProduceConfig,
        layout: TopicLayout,
        stats: Arc<Stats>,
        stop: Arc<AtomicBool>,
    ) -> Producer {
        Producer {
            id,
            cfg,
            layout,
            stats,
            stop,
        }
    }

    /// Sends this producer's share of the messages (or until the duration ends or `stop`).
    pub fn run(self) -> Result<u64> {
        let cfg = &self.cfg;
        let share = cfg.messages.map(|m| {
            let n = cfg.producers as u64;
            m / n + u64::from((self.id as u64) < m % n)
        });
        let rate = cfg.rate.map(|r| r / cfg.producers as f64);
        let transactional_id = cfg
            .transactional_id
            .as_ref()
            .map(|prefix| format!("{prefix}-{}", self.id));
        let buffer = Arc::new(Buffer::new(cfg.buffer_bytes));
        let mut sender = Sender::open(
            &cfg.topic,
            cfg.acks,
            cfg.max_request_bytes,
            transactional_id.clone(),
            self.layout.clone(),
            buffer.clone(),
            self.stats.clone(),
        )?;
        let partitions = self.layout.partitions.clone();
        let mut accs: Vec<Accumulator> =
            partitions.iter().map(|_| Accumulator::default()).collect();
        let value = payload(cfg.size);
        let keys: Option<Vec<Bytes>> = cfg
            .keys
            .map(|n| (0..n).map(|k| Bytes::from(format!("key-{k}"))).collect());
        let clock = SystemClock;
        let start = Instant::now();
        let schedule = rate.map(|r| Schedule::new(start, r));
        let deadline = cfg.duration.map(|d| start + d);
        let mut next_partition = self.id as usize % partitions.len();
        let mut seq: u64 = 0;
        let mut next_linger_check = start;
        let mut txn = match transactional_id {
            Some(id) => Some(Transactions::init(sender.bootstrap(), id)?),
            None => None,
        };
        // Bytes of records in the accumulators (not yet handed to the sender), and the
        // responses the sender last saw: a new one may have opened a window slot.
        let mut lingering: u64 = 0;
        let mut responses_seen = buffer.responses();
        let mut in_txn: u64 = 0;
        loop {
            if share.is_some_and(|s| seq >= s)
                || deadline.is_some_and(|d| Instant::now() >= d)
                || self.stop.load(Ordering::Relaxed)
            {
                break;
            }
            let due = match &schedule {
                Some(s) => s.wait_for(&clock, seq),
                None => clock.now(),
            };
            // Queued batches go as soon as a response frees a slot (this thread is also
            // Kafka's sender thread, so it looks once a record).
            let responses = buffer.responses();
            if responses != responses_seen {
                responses_seen = responses;
                sender.pump(false)?;
            }
            // A full buffer makes every batch ready (Kafka's accumulator counts itself
            // "exhausted") and the record waits for answers, as `KafkaProducer.send` blocks.
            // Batches are closed only once the sender has sent everything queued before: a
            // batch closed while others still wait for a slot could have taken more records.
            while buffer.is_full(lingering) {
                if lingering > 0 && !sender.has_queued() {
                    self.flush(&mut sender, &partitions, &mut accs, txn.as_mut(), |_, a| {
                        !a.records.is_empty()
                    })?;
                    lingering = 0;
                    continue;
                }
                buffer.wait_for_response(responses_seen, Duration::from_millis(10));
                responses_seen = buffer.responses();
                sender.resend_due()?;
                sender.pump(false)?;
            }
            let key = keys
                .as_ref()
                .map(|k| k[(seq % k.len() as u64) as usize].clone());
            let keyless = key.is_none();
            let slot = match (&key, cfg.partitioner) {
                (Some(k), Partitioner::Hash | Partitioner::Sticky) => {
                    partition_for_key(k, partitions.len())
                }
                (None, Partitioner::Sticky) => next_partition,
                _ => {
                    let p = next_partition;
                    next_partition = (next_partition + 1) % partitions.len();
                    p
                }
            };
            // A transaction begins with its first record (partitions added), as a Kafka
            // producer's does, so none is left open and empty at the end.
            if let Some(t) = txn.as_mut().filter(|_| in_txn == 0) {
                t.begin(&cfg.topic, &partitions)?;
            }
            let record = self.record(key, value.clone(), due, seq);
            let acc = &mut accs[slot];
            acc.bytes += cfg.size + 40;
            lingering += (cfg.size + 40) as u64;
            acc.records.push(record);
            acc.due.push(due);
            // Linger counts from when the record joined the batch, not from when it was due:
            // a late open-loop sender must still fill batches.
            acc.first_at.get_or_insert_with(Instant::now);
            seq += 1;
            if acc.bytes >= cfg.batch_bytes {
                lingering -=
                    self.flush(&mut sender, &partitions, &mut accs, txn.as_mut(), |i, _| {
                        i == slot
                    })?;
                if cfg.partitioner == Partitioner::Sticky && keyless {
                    next_partition = (next_partition + 1) % partitions.len();
                }
            }
            if let Some(t) = txn.as_mut() {
                in_txn += 1;
                if in_txn >= cfg.transaction_records {
                    self.commit(&mut sender, &partitions, &mut accs, t)?;
                    in_txn = 0;
                    lingering = 0;
                }
            }
            // Lingering batches are looked for at most every tenth of the linger (at least every
            // 100 µs), not per record: a scan is as long as the partition count.
            let now = Instant::now();
            if now >= next_linger_check {
                next_linger_check = now + (cfg.linger / 10).max(Duration::from_micros(100));
                let lingered = |a: &Accumulator| {
                    a.first_at
                        .is_some_and(|t| now.saturating_duration_since(t) >= cfg.linger)
                };
                sender.resend_due()?;
                if accs.iter().any(lingered) {
                    lingering -=
                        self.flush(&mut sender, &partitions, &mut accs, txn.as_mut(), |_, a| {
                            lingered(a)
                        })?;
                }
            }
        }
        match txn.as_mut() {
            Some(t) if in_txn > 0 => self.commit(&mut sender, &partitions, &mut accs, t)?,
            _ => {
                self.flush(&mut sender, &partitions, &mut accs, None, |_, a| {
                    !a.records.is_empty()
                })?;
            }
        }
        sender.finish()?;
        Ok(seq)
    }

    fn record(&self, key: Option<Bytes>, value: Bytes, due: Instant, seq: u64) -> OutRecord {
        let sent_us = epoch_micros(due);
        let mut tag = [0u8; 16];
        tag[0..8].copy_from_slice(&sent_us.to_be_bytes());
        tag[8..12].copy_from_slice(&self.id.to_be_bytes());
        tag[12..16].copy_from_slice(&(seq as u32).to_be_bytes());
        OutRecord {
            key,
            value,
            timestamp_ms: (sent_us / 1000) as i64,
            tag,
        }
    }

    /// Ends the transaction: what is left sent, every batch acknowledged, then EndTxn.
    fn commit(
        &self,
        sender: &mut Sender,
        partitions: &[i32],
        accs: &mut [Accumulator],
        txn: &mut Transactions,
    ) -> Result<()> {
        self.flush(sender, partitions, accs, Some(txn), |_, a| {
            !a.records.is_empty()
        })?;
        let draining = Instant::now();
        sender.drain()?;
        add_micros(&self.stats.drain_micros, draining);
        let committing = Instant::now();
        let retries = txn.commit()?;
        add_micros(&self.stats.commit_micros, committing);
        self.stats.transactions.fetch_add(1, Ordering::Relaxed);
        self.stats
            .transaction_retries
            .fetch_add(retries, Ordering::Relaxed);
        Ok(())
    }

    /// Hands the partitions `ready` picks to the sender (with any retries now due); in a
    /// transaction, as its batches. Returns the bytes handed over (their `Accumulator::bytes`).
    fn flush(
        &self,
        sender: &mut Sender,
        partitions: &[i32],
        accs: &mut [Accumulator],
        mut txn: Option<&mut Transactions>,
        ready: impl Fn(usize, &Accumulator) -> bool,
    ) -> Result<u64> {
        sender.resend_due()?;
        if let Some(t) = txn.as_deref_mut() {
            // A transaction's batches go once its partitions are in it.
            let waiting = Instant::now();
            let retries = t.wait_added()?;
            add_micros(&self.stats.begin_micros, waiting);
            self.stats
                .transaction_retries
                .fetch_add(retries, Ordering::Relaxed);
        }
        let mut parts = Vec::new();
        let mut handed = 0;
        for (i, acc) in accs.iter_mut().enumerate() {
            if acc.records.is_empty() || !ready(i, acc) {
                continue;
            }
            let producer = txn
                .as_deref_mut()
                .map(|t| t.next_batch(partitions[i], acc.records.len()));
            handed += acc.bytes as u64;
            parts.push(SentPart {
                partition: partitions[i],
                bytes: (acc.records.len() * self.cfg.size) as u64,
                held: acc.bytes as u64,
                batch: encode_batch(&acc.records, self.cfg.compression, producer)?,
                due: std::mem::take(&mut acc.due),
                attempts: 0,
            });
            acc.records.clear();
            acc.bytes = 0;
            acc.first_at = None;
        }
        sender.send(parts)?;
        Ok(handed)
    }
}

/// Adds the time since `started` to a microsecond counter.
fn add_micros(counter: &std::sync::atomic::AtomicU64, started: Instant) {
    counter.fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
}
