//! Counters of one shard: connections, bytes, and per-API requests, errors, latencies and
//! conversions. Plain `Cell`s on the shard's own thread; the metrics service reads them at a
//! scrape (`metrics/collect.rs`).
//!
//! Lives on: its shard.

use crate::protocol::errors::ErrorCode;
use crate::protocol::versions::SUPPORTED;
use ferrite_shards::stats::Histogram;
use kafka_protocol::messages::ApiKey;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// Connection and network counters of one shard.
#[derive(Default)]
pub struct ShardStats {
    pub connections_accepted: Cell<u64>,
    pub connections_open: Cell<u64>,
    /// Connections moved here from another shard because this one owns their partitions.
    pub connections_moved_in: Cell<u64>,
    /// Connections closed at accept because their address held `max.connections.per.ip`.
    pub connections_refused_per_ip: Cell<u64>,
    pub bytes_in: Cell<u64>,
    pub bytes_out: Cell<u64>,
    /// Responses sent, and the sends that carried them (responses complete together go out
    /// in one send: `server::connection::write_responses`).
    pub responses_sent: Cell<u64>,
    pub response_sends: Cell<u64>,
    /// TLS handshakes that failed or timed out (a plaintext client on a TLS port, a bad or
    /// missing client certificate, a truncated record).
    pub tls_handshakes_failed: Cell<u64>,
}

/// The API slot of requests whose key Ferrite does not serve.
const UNKNOWN_API: usize = SUPPORTED.len();

/// Request counters of one shard, by API (a slot per entry of `SUPPORTED`, plus one for keys
/// Ferrite does not serve).
pub struct ShardMetrics {
    pub(crate) requests: Vec<Cell<u64>>,
    pub(crate) durations: Vec<Histogram>,
    /// Requests answered by closing the connection (malformed, unsupported).
    pub(crate) refused: Vec<Cell<u64>>,
    /// Kafka error codes in responses: (API slot, code) → count. Errors are rare, so a map.
    pub(crate) errors: RefCell<BTreeMap<(usize, ErrorCode), u64>>,
    /// Authorization denials by API slot and principal.
    pub(crate) denials: RefCell<BTreeMap<(usize, String), u64>>,
    /// When a denial was last logged (they are logged at most once a second per shard).
    pub(crate) denial_logged: Cell<Option<std::time::Instant>>,
    /// Record bytes this shard sent in fetch responses, by topic and partition (whichever
    /// shard owns the partition).
    pub(crate) fetched_bytes: RefCell<HashMap<String, HashMap<i32, u64>>>,
    /// Produce v0–2 message sets up-converted, and Fetch v0–3 answers down-converted.
    pub conversions: [MessageConversions; 2],
}

/// Which way records were converted between the old message formats and v2 batches.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Conversion {
    /// Produce v0–2: magic 0/1 message sets written as v2 batches.
    Up = 0,
    /// Fetch v0–3: v2 batches read out as magic 0/1 message sets.
    Down = 1,
}

/// Kafka's ProduceMessageConversionsPerSec / FetchMessageConversionsPerSec and the request
/// metrics MessageConversionsTimeMs and TemporaryMemoryBytes, as counters.
#[derive(Default)]
pub struct MessageConversions {
    pub records: Cell<u64>,
    pub micros: Cell<u64>,
    /// Bytes built in memory by the conversions.
    pub bytes: Cell<u64>,
}

impl Default for ShardMetrics {
    fn default() -> Self {
        let slots = SUPPORTED.len() + 1;
        ShardMetrics {
            requests: (0..slots).map(|_| Cell::new(0)).collect(),
            durations: (0..slots).map(|_| Histogram::default()).collect(),
            refused: (0..slots).map(|_| Cell::new(0)).collect(),
            errors: RefCell::new(BTreeMap::new()),
            denials: RefCell::new(BTreeMap::new()),
            denial_logged: Cell::new(None),
            fetched_bytes: RefCell::new(HashMap::new()),
            conversions: Default::default(),
        }
    }
}

fn slot_of_key(api_key: i16) -> usize {
    SUPPORTED
        .iter()
        .position(|(k, _, _)| *k as i16 == api_key)
        .unwrap_or(UNKNOWN_API)
}

fn slot_of(api: ApiKey) -> usize {
    slot_of_key(api as i16)
}

/// The `api` label of a slot: Kafka's API name.
pub fn api_name(slot: usize) -> String {
    match SUPPORTED.get(slot) {
        Some((key, _, _)) => format!("{key:?}"),
        None => "Unknown".to_string(),
    }
}

impl ShardMetrics {
    /// One request served (`api_key` as on the wire; `None` when the frame had no header),
    /// how long it took, and whether the broker refused it by closing the connection.
    pub fn request_done(&self, api_key: Option<i16>, took: Duration, refused: bool) {
        let slot = api_key.map(slot_of_key).unwrap_or(UNKNOWN_API);
        bump(&self.requests[slot], 1);
        self.durations[slot].observe(took);
        if refused {
            bump(&self.refused[slot], 1);
        }
    }

    /// A Kafka error code returned in a response of `api` (0 is not an error).
    pub fn error(&self, api: ApiKey, code: ErrorCode) {
        if code.is_error() {
            *self
                .errors
                .borrow_mut()
                .entry((slot_of(api), code))
                .or_default() += 1;
        }
    }

    /// An authorization denial of `api` for `principal`; whether to log it (at most once a
    /// second per shard, so a client retrying in a loop cannot flood the log).
    pub fn denied(&self, api: ApiKey, principal: &str) -> bool {
        *self
            .denials
            .borrow_mut()
            .entry((slot_of(api), principal.to_string()))
            .or_default() += 1;
        let now = std::time::Instant::now();
        let due = self
            .denial_logged
            .get()
            .is_none_or(|at| now.duration_since(at) >= Duration::from_secs(1));
        if due {
            self.denial_logged.set(Some(now));
        }
        due
    }

    /// Records converted between message formats, the time it took and the bytes it built.
    pub fn converted(&self, way: Conversion, records: usize, took: Duration, bytes: usize) {
        let c = &self.conversions[way as usize];
        bump(&c.records, records as u64);
        bump(&c.micros, took.as_micros() as u64);
        bump(&c.bytes, bytes as u64);
    }

    /// Record bytes of one partition sent in a fetch response.
    pub fn fetched(&self, topic: &str, partition: i32, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let mut by_topic = self.fetched_bytes.borrow_mut();
        let partitions = match by_topic.get_mut(topic) {
            Some(p) => p,
            None => by_topic.entry(topic.to_string()).or_default(),
        };
        *partitions.entry(partition).or_default() += bytes;
    }
}

fn bump(c: &Cell<u64>, by: u64) {
    c.set(c.get() + by);
}
