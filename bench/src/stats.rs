//! What the bench saw: counts, errors by code, and latency histograms (microseconds), shared
//! by the tasks and printed once a second and at the end.

use hdrhistogram::Histogram;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Latencies above this are recorded as this (an hour, in microseconds).
const LATENCY_MAX_US: u64 = 3_600_000_000;

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_MAX_US, 3).expect("valid histogram bounds")
}

/// Shared by every task of a run.
pub struct Stats {
    pub messages: AtomicU64,
    pub bytes: AtomicU64,
    errors: Mutex<BTreeMap<i16, u64>>,
    ack: Mutex<Histogram<u64>>,
    e2e: Mutex<Histogram<u64>>,
    /// Produce requests, from sending to the response: what the broker and the connection
    /// take, without the time records wait in the producer for their batch or for a free slot.
    request: Mutex<Histogram<u64>>,
    /// Produce batches acknowledged: with the requests (`request`'s count) and the messages,
    /// the shape of what the producer sent, which the broker's cost per GB depends on.
    pub produce_batches: AtomicU64,
    /// Produce batches sent again after a retriable error, and their records.
    pub produce_retries: AtomicU64,
    pub produce_retried_records: AtomicU64,
    /// Content checks that failed (consume --verify), and records seen twice.
    pub verify_failures: AtomicU64,
    pub duplicates: AtomicU64,
    /// (producer, sequence) of every record consume --verify read, kept through the warm-up.
    pub seen: Mutex<HashSet<(u32, u32)>>,
    /// Transactions committed (produce --transactional-id) and where their time went, summed:
    /// waiting for AddPartitionsToTxn's answer (retries included) once the first batch is
    /// ready (records accumulate while it is on its way), waiting for the last
    /// acknowledgements, EndTxn.
    pub transactions: AtomicU64,
    pub begin_micros: AtomicU64,
    pub drain_micros: AtomicU64,
    pub commit_micros: AtomicU64,
    /// Coordinator calls retried (CONCURRENT_TRANSACTIONS and the like).
    pub transaction_retries: AtomicU64,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            messages: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            errors: Mutex::new(BTreeMap::new()),
            ack: Mutex::new(histogram()),
            e2e: Mutex::new(histogram()),
            request: Mutex::new(histogram()),
            produce_batches: AtomicU64::new(0),
            produce_retries: AtomicU64::new(0),
            produce_retried_records: AtomicU64::new(0),
            transactions: AtomicU64::new(0),
            begin_micros: AtomicU64::new(0),
            drain_micros: AtomicU64::new(0),
            commit_micros: AtomicU64::new(0),
            transaction_retries: AtomicU64::new(0),
            verify_failures: AtomicU64::new(0),
            duplicates: AtomicU64::new(0),
            seen: Mutex::new(HashSet::new()),
        }
    }
}

/// A task's own histograms, merged into the shared ones now and then (no lock per record).
pub struct Local {
    pub ack: Histogram<u64>,
    pub e2e: Histogram<u64>,
    pub request: Histogram<u64>,
    last_merge: Instant,
}

impl Default for Local {
    fn default() -> Self {
        Local {
            ack: histogram(),
            e2e: histogram(),
            request: histogram(),
            last_merge: Instant::now(),
        }
    }
}

impl Local {
    pub fn record_ack(&mut self, latency: Duration) {
        let _ = self
            .ack
            .record((latency.as_micros() as u64).clamp(1, LATENCY_MAX_US));
    }

    pub fn record_request(&mut self, latency: Duration) {
        let _ = self
            .request
            .record((latency.as_micros() as u64).clamp(1, LATENCY_MAX_US));
    }

    pub fn record_e2e_us(&mut self, us: u64) {
        let _ = self.e2e.record(us.clamp(1, LATENCY_MAX_US));
    }

    /// Merges into `stats` when 100 ms have passed (or when `force`).
    pub fn merge_into(&mut self, stats: &Stats, force: bool) {
        if !force && self.last_merge.elapsed() < Duration::from_millis(100) {
            return;
        }
        for (mine, shared) in [
            (&mut self.ack, &stats.ack),
            (&mut self.e2e, &stats.e2e),
            (&mut self.request, &stats.request),
        ] {
            if !mine.is_empty() {
                let _ = shared.lock().expect("stats lock").add(&*mine);
                mine.reset();
            }
        }
        self.last_merge = Instant::now();
    }
}

impl Stats {
    pub fn add(&self, messages: u64, bytes: u64) {
        self.messages.fetch_add(messages, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn error(&self, code: i16, count: u64) {
        *self
            .errors
            .lock()
            .expect("stats lock")
            .entry(code)
            .or_default() += count;
    }

    pub fn error_total(&self) -> u64 {
        self.errors.lock().expect("stats lock").values().sum()
    }

    pub fn errors(&self) -> BTreeMap<i16, u64> {
        self.errors.lock().expect("stats lock").clone()
    }

    /// Forgets what the warm-up saw.
    pub fn reset(&self) {
        self.messages.store(0, Ordering::Relaxed);
        self.bytes.store(0, Ordering::Relaxed);
        self.errors.lock().expect("stats lock").clear();
        self.ack.lock().expect("stats lock").reset();
        self.e2e.lock().expect("stats lock").reset();
        self.request.lock().expect("stats lock").reset();
        for counter in [
            &self.produce_batches,
            &self.produce_retries,
            &self.produce_retried_records,
            &self.transactions,
            &self.begin_micros,
            &self.drain_micros,
            &self.commit_micros,
            &self.transaction_retries,
        ] {
            counter.store(0, Ordering::Relaxed);
        }
    }

    pub fn ack_percentile_ms(&self, q: f64) -> Option<f64> {
        let h = self.ack.lock().expect("stats lock");
        (!h.is_empty()).then(|| h.value_at_quantile(q) as f64 / 1000.0)
    }

    pub fn e2e_percentile_ms(&self, q: f64) -> Option<f64> {
        let h = self.e2e.lock().expect("stats lock");
        (!h.is_empty()).then(|| h.value_at_quantile(q) as f64 / 1000.0)
    }

    pub fn ack_json(&self) -> Option<Value> {
        percentiles(&self.ack.lock().expect("stats lock"))
    }

    pub fn e2e_json(&self) -> Option<Value> {
        percentiles(&self.e2e.lock().expect("stats lock"))
    }

    pub fn request_json(&self) -> Option<Value> {
        percentiles(&self.request.lock().expect("stats lock"))
    }
}

/// p50 p90 p99 p99.9 p99.99 max, in milliseconds.
fn percentiles(h: &Histogram<u64>) -> Option<Value> {
    if h.is_empty() {
        return None;
    }
    let ms = |v: u64| v as f64 / 1000.0;
    // Percentile curve for plots: (percentile, ms) from the median out to the maximum.
    let curve: Vec<(f64, f64)> = [
        50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99, 99.999, 100.0,
    ]
    .iter()
    .map(|&p| (p, ms(h.value_at_quantile(p / 100.0))))
    .collect();
    Some(json!({
        "curve": curve,
        "p50": ms(h.value_at_quantile(0.5)),
        "p90": ms(h.value_at_quantile(0.9)),
        "p99": ms(h.value_at_quantile(0.99)),
        "p999": ms(h.value_at_quantile(0.999)),
        "p9999": ms(h.value_at_quantile(0.9999)),
        "max": ms(h.max()),
        "count": h.len(),
    }))
}

/// One second of the run, for the live line and the timeline in the JSON.
#[derive(Clone, Debug)]
pub struct Tick {
    pub second: f64,
    pub msgs_per_sec: f64,
    pub mb_per_sec: f64,
    pub p99_ms: Option<f64>,
}

impl Tick {
    pub fn json(&self) -> Value {
        json!({"t": self.second, "msgs_per_sec": self.msgs_per_sec, "mb_per_sec": self.mb_per_sec, "p99_ms": self.p99_ms})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_histograms_merge_and_percentiles_come_out_in_ms() {
        let stats = Stats::default();
        let mut local = Local::default();
        for us in 1..=1000u64 {
            local.record_ack(Duration::from_micros(us));
        }
        local.merge_into(&stats, true);
        let p50 = stats.ack_percentile_ms(0.5).unwrap();
        assert!((0.49..=0.51).contains(&p50), "{p50}");
        let j = stats.ack_json().unwrap();
        assert!((j["max"].as_f64().unwrap() - 1.0).abs() < 0.01);
        assert!(stats.e2e_json().is_none());
        stats.error(6, 2);
        assert_eq!(stats.error_total(), 2);
        stats.reset();
        assert!(stats.ack_json().is_none());
    }
}
