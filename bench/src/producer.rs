//! Producer tasks: records batched per partition by size and linger, sent pipelined, each
//! acknowledgement timed against the record's intended (open loop) or creation time.
//!
//! Every record carries a header `fb` of 16 bytes — send time in microseconds since the epoch,
//! producer number, sequence — so consumers can time end-to-end latency and check content. The
//! value is `--size` bytes of a fixed pattern (shared, so building a record copies nothing).

use crate::client::{decode_response, encode_request, read_frame, Conn, TopicLayout};
use crate::partitioner::{partition_for_key, Partitioner};
use crate::records::{encode_batch, OutRecord};
use crate::schedule::{Clock, Schedule, SystemClock};
use crate::stats::{Local, Stats};
use crate::transactions::Transactions;
use anyhow::{Context, Result};
use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, ProduceRequest, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Produce requests in flight per connection (Kafka's max.in.flight.requests.per.connection).
const IN_FLIGHT_MAX: usize = 5;
/// How long the end of a run waits for outstanding acknowledgements.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Clone, Debug)]
pub struct ProduceConfig {
    pub topic: String,
    /// Messages for all producers together.
    pub messages: Option<u64>,
    pub duration: Option<Duration>,
    pub size: usize,
    pub batch_bytes: usize,
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

/// One partition's share of a sent request.
struct SentPart {
    partition: i32,
    /// Per record: when it was due (open loop) or created.
    due: Vec<Instant>,
    bytes: u64,
}

/// What a sent request was, kept until its response arrives.
struct Sent {
    version: i16,
    parts: Vec<SentPart>,
}

/// A connection with a reader thread taking the responses in order.
struct Pipe {
    stream: TcpStream,
    version: i16,
    next_id: i32,
    sent: Arc<(Mutex<VecDeque<Sent>>, Condvar)>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Pipe {
    fn open(addr: &str, stats: Arc<Stats>, acks: i16) -> Result<Pipe> {
        let conn = Conn::connect(addr)?;
        let version = conn.versions.of(ApiKey::Produce)?;
        let (stream, _) = conn.into_stream();
        let sent: Arc<(Mutex<VecDeque<Sent>>, Condvar)> = Arc::default();
        let reader = if acks == 0 {
            None // no responses to wait for
        } else {
            let mut read = stream.try_clone()?;
            let sent = sent.clone();
            Some(std::thread::spawn(move || {
                let mut local = Local::default();
                while let Ok(frame) = read_frame(&mut read) {
                    let Some(s) = sent.0.lock().expect("pipe lock").pop_front() else {
                        break;
                    };
                    sent.1.notify_all();
                    let now = Instant::now();
                    match decode_response::<ProduceRequest>(s.version, frame) {
                        Ok((_, resp)) => {
                            let code_of = |partition: i32| {
                                resp.responses
                                    .iter()
                                    .flat_map(|t| t.partition_responses.iter())
                                    .find(|p| p.index == partition)
                                    .map(|p| p.error_code)
                                    .unwrap_or(-1)
                            };
                            for part in &s.parts {
                                match code_of(part.partition) {
                                    0 => {
                                        stats.add(part.due.len() as u64, part.bytes);
                                        for due in &part.due {
                                            local.record_ack(now.saturating_duration_since(*due));
                                        }
                                    }
                                    code => stats.error(code, part.due.len() as u64),
                                }
                            }
                        }
                        Err(_) => {
                            let lost: usize = s.parts.iter().map(|p| p.due.len()).sum();
                            stats.error(-1, lost as u64);
                        }
                    }
                    local.merge_into(&stats, false);
                }
                local.merge_into(&stats, true);
            }))
        };
        Ok(Pipe {
            stream,
            version,
            next_id: 1,
            sent,
            reader,
        })
    }

    /// Sends a produce request, waiting while `IN_FLIGHT_MAX` are unanswered.
    fn send(
        &mut self,
        request: &ProduceRequest,
        parts: Vec<SentPart>,
        stats: &Stats,
    ) -> Result<()> {
        let frame = encode_request(self.version, self.next_id, request)?;
        self.next_id += 1;
        if self.reader.is_none() {
            self.stream.write_all(&frame)?;
            for p in &parts {
                stats.add(p.due.len() as u64, p.bytes);
            }
            return Ok(());
        }
        {
            let (lock, cv) = &*self.sent;
            let mut sent = lock.lock().expect("pipe lock");
            while sent.len() >= IN_FLIGHT_MAX {
                let (s, timeout) = cv.wait_timeout(sent, DRAIN_TIMEOUT).expect("pipe lock");
                sent = s;
                if timeout.timed_out() {
                    anyhow::bail!("no produce response for {DRAIN_TIMEOUT:?}");
                }
            }
            sent.push_back(Sent {
                version: self.version,
                parts,
            });
        }
        self.stream
            .write_all(&frame)
            .context("sending a produce request")
    }

    /// Waits for every response so far.
    fn drain(&self) {
        let (lock, cv) = &*self.sent;
        let deadline = Instant::now() + DRAIN_TIMEOUT;
        let mut sent = lock.lock().expect("pipe lock");
        while !sent.is_empty() && Instant::now() < deadline {
            sent = cv
                .wait_timeout(sent, Duration::from_millis(100))
                .expect("pipe lock")
                .0;
        }
    }

    /// Waits for every response, then closes.
    fn finish(mut self) {
        self.drain();
        let _ = self.stream.shutdown(Shutdown::Both);
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
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
        let mut pipes: HashMap<String, Pipe> = HashMap::new();
        for addr in self.layout.leaders.values() {
            if !pipes.contains_key(addr) {
                pipes.insert(
                    addr.clone(),
                    Pipe::open(addr, self.stats.clone(), cfg.acks)?,
                );
            }
        }
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
        let mut txn = match &cfg.transactional_id {
            Some(prefix) => {
                let bootstrap = self.layout.leaders.values().next().expect("a leader");
                Some(Transactions::init(
                    bootstrap,
                    format!("{prefix}-{}", self.id),
                )?)
            }
            None => None,
        };
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
            let key = keys
                .as_ref()
                .map(|k| k[(seq % k.len() as u64) as usize].clone());
            let slot = match (&key, cfg.partitioner) {
                (Some(k), Partitioner::Hash) => partition_for_key(k, partitions.len()),
                _ => {
                    let p = next_partition;
                    next_partition = (next_partition + 1) % partitions.len();
                    p
                }
            };
            // A transaction begins with its first record (partitions added), as a Kafka
            // producer's does, so none is left open and empty at the end.
            if let Some(t) = txn.as_mut().filter(|_| in_txn == 0) {
                let started = Instant::now();
                let retries = t.begin(&cfg.topic, &partitions)?;
                add_micros(&self.stats.begin_micros, started);
                self.stats
                    .transaction_retries
                    .fetch_add(retries, Ordering::Relaxed);
            }
            let record = self.record(key, value.clone(), due, seq);
            let acc = &mut accs[slot];
            acc.bytes += cfg.size + 40;
            acc.records.push(record);
            acc.due.push(due);
            // Linger counts from when the record joined the batch, not from when it was due:
            // a late open-loop sender must still fill batches.
            acc.first_at.get_or_insert_with(Instant::now);
            seq += 1;
            if acc.bytes >= cfg.batch_bytes {
                self.flush(&mut pipes, &partitions, &mut accs, txn.as_mut(), |i, _| {
                    i == slot
                })?;
            }
            if let Some(t) = txn.as_mut() {
                in_txn += 1;
                if in_txn >= cfg.transaction_records {
                    self.commit(&mut pipes, &partitions, &mut accs, t)?;
                    in_txn = 0;
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
                if accs.iter().any(lingered) {
                    self.flush(&mut pipes, &partitions, &mut accs, txn.as_mut(), |_, a| {
                        lingered(a)
                    })?;
                }
            }
        }
        match txn.as_mut() {
            Some(t) if in_txn > 0 => self.commit(&mut pipes, &partitions, &mut accs, t)?,
            _ => self.flush(&mut pipes, &partitions, &mut accs, None, |_, a| {
                !a.records.is_empty()
            })?,
        }
        for (_, pipe) in pipes {
            pipe.finish();
        }
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
        pipes: &mut HashMap<String, Pipe>,
        partitions: &[i32],
        accs: &mut [Accumulator],
        txn: &mut Transactions,
    ) -> Result<()> {
        self.flush(pipes, partitions, accs, Some(txn), |_, a| {
            !a.records.is_empty()
        })?;
        let draining = Instant::now();
        for pipe in pipes.values() {
            pipe.drain();
        }
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

    /// Sends the partitions `ready` picks, one request per leader; in a transaction, as its
    /// batches.
    fn flush(
        &self,
        pipes: &mut HashMap<String, Pipe>,
        partitions: &[i32],
        accs: &mut [Accumulator],
        mut txn: Option<&mut Transactions>,
        ready: impl Fn(usize, &Accumulator) -> bool,
    ) -> Result<()> {
        let mut by_leader: HashMap<String, (Vec<PartitionProduceData>, Vec<SentPart>)> =
            HashMap::new();
        for (i, acc) in accs.iter_mut().enumerate() {
            if acc.records.is_empty() || !ready(i, acc) {
                continue;
            }
            let producer = txn
                .as_deref_mut()
                .map(|t| t.next_batch(partitions[i], acc.records.len()));
            let batch = encode_batch(&acc.records, self.cfg.compression, producer)?;
            let leader = self.layout.leaders[&partitions[i]].clone();
            let entry = by_leader.entry(leader).or_default();
            entry.0.push(
                PartitionProduceData::default()
                    .with_index(partitions[i])
                    .with_records(Some(batch)),
            );
            entry.1.push(SentPart {
                partition: partitions[i],
                bytes: (acc.records.len() * self.cfg.size) as u64,
                due: std::mem::take(&mut acc.due),
            });
            acc.records.clear();
            acc.bytes = 0;
            acc.first_at = None;
        }
        for (leader, (data, parts)) in by_leader {
            let request = ProduceRequest::default()
                .with_transactional_id(txn.as_deref().map(|t| {
                    TransactionalId(StrBytes::from_string(t.transactional_id().to_string()))
                }))
                .with_acks(self.cfg.acks)
                .with_timeout_ms(30_000)
                .with_topic_data(vec![TopicProduceData::default()
                    .with_name(TopicName(StrBytes::from_string(self.cfg.topic.clone())))
                    .with_partition_data(data)]);
            let pipe = pipes.get_mut(&leader).expect("a pipe per leader");
            pipe.send(&request, parts, &self.stats)?;
        }
        Ok(())
    }
}

/// Adds the time since `started` to a microsecond counter.
fn add_micros(counter: &std::sync::atomic::AtomicU64, started: Instant) {
    counter.fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
}
