//! Consumer tasks: each reads its share of the partitions from a start offset with Fetch,
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
}

struct Leader {
    stream: TcpStream,
    version: i16,
    partitions: Vec<i32>,
}

pub struct Consumer {
    id: usize,
    cfg: ConsumeConfig,
    layout: TopicLayout,
    start: HashMap<i32, i64>,
    stats: Arc<Stats>,
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

    /// This consumer's partitions: every `consumers`-th one.
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
        let mine = self.assigned();
        if mine.is_empty() {
            return Ok(());
        }
        let mut leaders: HashMap<String, Leader> = HashMap::new();
        for p in &mine {
            let addr = &self.layout.leaders[p];
            if !leaders.contains_key(addr) {
                let conn = Conn::connect(addr)?;
                let version = conn.versions.of(ApiKey::Fetch)?;
                let (stream, _) = conn.into_stream();
                leaders.insert(
                    addr.clone(),
                    Leader {
                        stream,
                        version,
                        partitions: Vec::new(),
                    },
                );
            }
            leaders.get_mut(addr).expect("inserted").partitions.push(*p);
        }
        let mut position: HashMap<i32, i64> = mine.iter().map(|p| (*p, self.start[p])).collect();
        let mut errors_in_a_row: HashMap<i32, u32> = HashMap::new();
        let mut done: HashSet<i32> = HashSet::new();
        let mut seen: HashSet<(u32, u32)> = HashSet::new();
        let expected = payload(self.cfg.size);
        let mut local = Local::default();
        let deadline = self.cfg.duration.map(|d| Instant::now() + d);
        let mut correlation = 1;
        loop {
            if self.stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            if let (Some(limit), true) = (self.cfg.messages, self.cfg.end_offsets.is_none()) {
                if self.stats.messages.load(Ordering::Relaxed) >= limit {
                    break;
                }
            }
            if done.len() == mine.len() {
                break;
            }
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
                    .write_all(&encode_request(leader.version, correlation, &request)?)
                    .context("sending a fetch")?;
                correlation += 1;
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
                        let (count, next) = self.take(records, &mut local, &mut seen, &expected);
                        if let Some(next) = next {
                            position.insert(index, next);
                        }
                        self.stats.add(count, count * self.cfg.size as u64);
                        if let Some(end) = self.cfg.end_offsets.as_ref().and_then(|e| e.get(&index))
                        {
                            if position[&index] >= *end {
                                done.insert(index);
                            }
                        }
                    }
                }
                local.merge_into(&self.stats, false);
            }
        }
        local.merge_into(&self.stats, true);
        Ok(())
    }

    /// Counts (and, when asked, times and checks) the records of a fetched record set;
    /// returns the count and the offset to fetch next.
    fn take(
        &self,
        records: Bytes,
        local: &mut Local,
        seen: &mut HashSet<(u32, u32)>,
        expected: &Bytes,
    ) -> (u64, Option<i64>) {
        let decode = self.cfg.e2e || self.cfg.verify;
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
            for tag in tags(&batch, expected) {
                count += 1;
                let Some(t) = tag else {
                    if self.cfg.verify {
                        self.stats.verify_failures.fetch_add(1, Ordering::Relaxed);
                    }
                    continue;
                };
                if self.cfg.e2e {
                    local.record_e2e_us(now_us.saturating_sub(t.sent_us));
                }
                if self.cfg.verify {
                    if !seen.insert((t.producer, t.seq)) {
                        self.stats.duplicates.fetch_add(1, Ordering::Relaxed);
                    }
                    if !t.value_ok {
                        self.stats.verify_failures.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
        (count, next)
    }
}
