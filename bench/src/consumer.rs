//! Consumer tasks: each reads its share of the partitions (every N-th one, or what its consumer
//! group assigns, see `group`) from a start offset with Fetch,
//! counting records from batch headers; for end-to-end latency and content checks it decodes
//! the records (decompressing) and reads the producer's `fb` header.

use crate::client::{
    batch_headers, decode_response, encode_request, read_frame, Conn, TopicLayout,
};
use crate::producer::{epoch_micros, payload};
use crate::records::tags;
use crate::stats::{Local, Stats};
use anyhow::{Context, Result};
use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Fetch bounds: what one request may bring back.
const FETCH_MAX_BYTES: i32 = 50 << 20;
const PARTITION_MAX_BYTES: i32 = 8 << 20;
const FETCH_MAX_WAIT_MS: i32 = 500;
/// Consecutive fetch errors on a partition before this consumer gives up on it.
const ERRORS_IN_A_ROW_MAX: u32 = 20;

#[derive(Clone, Debug)]
pub struct ConsumeConfig {
    pub topic: String,
    pub consumers: usize,
    /// Stop when all consumers together have read this many (or the duration ends).
    pub messages: Option<u64>,
    pub duration: Option<Duration>,
    /// Stop each partition at this offset (the end of a backlog), when set.
    pub end_offsets: Option<HashMap<i32, i64>>,
    /// Decode records: end-to-end latency from the producer's send time.
    pub e2e: bool,
    /// Decode records and check every value and that no record comes twice.
    pub verify: bool,
    /// Expected value size, for `verify`.
    pub size: usize,
    /// Read as members of this consumer group instead of taking every N-th partition.
    pub group: Option<String>,
    /// A broker to ask for the group's coordinator.
    pub bootstrap: String,
}

struct Leader {
    stream: TcpStream,
    version: i16,
    partitions: Vec<i32>,
}

/// The partitions a consumer reads now: their leaders' connections, positions (the next offset
/// to fetch) and which are finished. A group member opens a new one for each assignment.
pub struct Reading {
    leaders: HashMap<String, Leader>,
    position: HashMap<i32, i64>,
    errors_in_a_row: HashMap<i32, u32>,
    done: HashSet<i32>,
    correlation: i32,
}

impl Reading {
    pub fn positions(&self) -> &HashMap<i32, i64> {
        &self.position
    }

    pub fn is_empty(&self) -> bool {
        self.position.is_empty()
    }

    /// Every partition reached its end offset or gave up on errors (true when there are none).
    pub fn all_done(&self) -> bool {
        self.done.len() == self.position.len()
    }
}

/// What a consumer keeps across assignments: its histograms and the value records must carry.
pub struct Tally {
    local: Local,
    expected: Bytes,
}

impl Tally {
    pub fn new(size: usize) -> Tally {
        Tally {
            local: Local::default(),
            expected: payload(size),
        }
    }

    pub fn finish(&mut self, stats: &Stats) {
        self.local.merge_into(stats, true);
    }
}

pub struct Consumer {
    id: usize,
    pub(crate) cfg: ConsumeConfig,
    pub(crate) layout: TopicLayout,
    /// Where each partition starts when nothing says otherwise (a group's committed offset).
    pub(crate) start: HashMap<i32, i64>,
    pub(crate) stats: Arc<Stats>,
    stop: Arc<AtomicBool>,
}

impl Consumer {
    pub fn new(
        id: usize,
        cfg: ConsumeConfig,
        layout: TopicLayout,
        start: HashMap<i32, i64>,
        stats: Arc<Stats>,
        stop: Arc<AtomicBool>,
    ) -> Consumer {
        Consumer {
            id,
            cfg,
            layout,
            start,
            stats,
            stop,
        }
    }

    /// This consumer's partitions without a group: every `consumers`-th one.
    fn assigned(&self) -> Vec<i32> {
        self.layout
            .partitions
            .iter()
            .copied()
            .enumerate()
            .filter(|(i, _)| i % self.cfg.consumers == self.id)
            .map(|(_, p)| p)
            .collect()
    }

    pub fn run(self) -> Result<()> {
        match self.cfg.group.clone() {
            Some(group) => crate::group::run(&self, &group),
            None => self.run_assigned(),
        }
    }

    fn run_assigned(&self) -> Result<()> {
        let mine = self.assigned();
        if mine.is_empty() {
            return Ok(());
        }
        let mut reading = self.open(&mine, &self.start)?;
        let mut tally = Tally::new(self.cfg.size);
        let deadline = self.deadline();
        while !self.finished(deadline) && !reading.all_done() {
            self.poll(&mut reading, &mut tally)?;
        }
        tally.finish(&self.stats);
        Ok(())
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.cfg.duration.map(|d| Instant::now() + d)
    }

    /// The run is over for every consumer: stopped, out of time, or the count is reached.
    pub fn finished(&self, deadline: Option<Instant>) -> bool {
        if self.stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d) {
            return true;
        }
        match (self.cfg.messages, &self.cfg.end_offsets) {
            (Some(limit), None) => self.stats.messages.load(Ordering::Relaxed) >= limit,
            _ => false,
        }
    }

    /// Connects to the leaders of `partitions`, to read each from `from` (which must cover
    /// them all). A partition already at its end offset is done from the start.
    pub fn open(&self, partitions: &[i32], from: &HashMap<i32, i64>) -> Result<Reading> {
        let mut reading = Reading {
            leaders: HashMap::new(),
            position: HashMap::new(),
            errors_in_a_row: HashMap::new(),
            done: HashSet::new(),
            correlation: 1,
        };
        for p in partitions {
            let addr = self
                .layout
                .leaders
                .get(p)
                .with_context(|| format!("partition {p} has no known leader"))?;
            if !reading.leaders.contains_key(addr) {
                let conn = Conn::connect(addr)?;
                let version = conn.versions.of(ApiKey::Fetch)?;
                let (stream, _) = conn.into_stream();
                reading.leaders.insert(
                    addr.clone(),
                    Leader {
                        stream,
                        version,
                        partitions: Vec::new(),
                    },
                );
            }
            reading
                .leaders
                .get_mut(addr)
                .expect("inserted")
                .partitions
                .push(*p);
            let position = *from
                .get(p)
                .with_context(|| format!("no start offset for partition {p}"))?;
            reading.position.insert(*p, position);
            if self.at_end(*p, position) {
                reading.done.insert(*p);
            }
        }
        Ok(reading)
    }

    fn at_end(&self, partition: i32, position: i64) -> bool {
        self.cfg
            .end_offsets
            .as_ref()
            .and_then(|e| e.get(&partition))
            .is_some_and(|end| position >= *end)
    }

    /// One fetch from each leader for its partitions that are not done.
    pub fn poll(&self, reading: &mut Reading, tally: &mut Tally) -> Result<()> {
        let Reading {
            leaders,
            position,
            errors_in_a_row,
            done,
            correlation,
        } = reading;
        for leader in leaders.values_mut() {
            let wanted: Vec<i32> = leader
                .partitions
                .iter()
                .copied()
                .filter(|p| !done.contains(p))
                .collect();
            if wanted.is_empty() {
                continue;
            }
            let request = FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_wait_ms(FETCH_MAX_WAIT_MS)
                .with_min_bytes(1)
                .with_max_bytes(FETCH_MAX_BYTES)
                .with_session_epoch(-1)
                .with_topics(vec![FetchTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(self.cfg.topic.clone())))
                    .with_partitions(
                        wanted
                            .iter()
                            .map(|p| {
                                FetchPartition::default()
                                    .with_partition(*p)
                                    .with_fetch_offset(position[p])
                                    .with_partition_max_bytes(PARTITION_MAX_BYTES)
                            })
                            .collect(),
                    )]);
            leader
                .stream
                .write_all(&encode_request(leader.version, *correlation, &request)?)
                .context("sending a fetch")?;
            *correlation += 1;
            let frame = read_frame(&mut leader.stream)?;
            let (_, resp) = decode_response::<FetchRequest>(leader.version, frame)?;
            for t in resp.responses {
                for p in t.partitions {
                    let index = p.partition_index;
                    if p.error_code != 0 {
                        self.stats.error(p.error_code, 1);
                        let n = errors_in_a_row.entry(index).or_default();
                        *n += 1;
                        if *n >= ERRORS_IN_A_ROW_MAX || p.error_code == 1 {
                            done.insert(index);
                        }
                        continue;
                    }
                    errors_in_a_row.remove(&index);
                    let records = p.records.unwrap_or_default();
                    let (count, next) = self.take(records, tally);
                    if let Some(next) = next {
                        position.insert(index, next);
                    }
                    self.stats.add(count, count * self.cfg.size as u64);
                    if self.at_end(index, position[&index]) {
                        done.insert(index);
                    }
                }
            }
            tally.local.merge_into(&self.stats, false);
        }
        Ok(())
    }

    /// Counts (and, when asked, times and checks) the records of a fetched record set;
    /// returns the count and the offset to fetch next.
    fn take(&self, records: Bytes, tally: &mut Tally) -> (u64, Option<i64>) {
        let decode = self.cfg.e2e || self.cfg.verify;
        let mut ids = Vec::new();
        let now_us = epoch_micros(Instant::now());
        let mut count = 0u64;
        let mut next = None;
        for (base, records_in_batch, batch) in batch_headers(records) {
            let last_delta = i32::from_be_bytes(batch[23..27].try_into().expect("4 bytes"));
            next = Some(base + last_delta as i64 + 1);
            if !decode {
                count += records_in_batch.max(0) as u64;
                continue;
            }
            for tag in tags(&batch, &tally.expected) {
                count += 1;
                let Some(t) = tag else {
                    if self.cfg.verify {
                        self.stats.verify_failures.fetch_add(1, Ordering::Relaxed);
                    }
                    continue;
                };
                if self.cfg.e2e {
                    tally.local.record_e2e_us(now_us.saturating_sub(t.sent_us));
                }
                if self.cfg.verify {
                    ids.push((t.producer, t.seq));
                    if !t.value_ok {
                        self.stats.verify_failures.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
        if !ids.is_empty() {
            // One set for all consumers, since a group moves partitions between members; one
            // lock per fetched record set, taken after decoding.
            let mut seen = self.stats.seen.lock().expect("stats lock");
            let twice = ids.into_iter().filter(|id| !seen.insert(*id)).count();
            self.stats
                .duplicates
                .fetch_add(twice as u64, Ordering::Relaxed);
        }
        (count, next)
    }
}
