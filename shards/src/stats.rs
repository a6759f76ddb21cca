//! Latency histograms and the shard's I/O statistics, kept for the metrics endpoint.
//!
//! Lives on: one shard thread. Counters are plain `Cell`s written by their shard only; the
//! metrics endpoint asks each shard for a snapshot through the router, so nothing here is
//! shared or atomic.

use std::cell::Cell;
use std::time::Duration;

/// Upper bounds of the histogram buckets, in seconds: 50 µs to 10 s, roughly ×2.5 per step,
/// the range between a page-cache append and a stalled fsync.
pub const BUCKET_BOUNDS_SECONDS: [f64; 17] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0,
];

const BUCKETS: usize = BUCKET_BOUNDS_SECONDS.len();

/// A fixed-bucket latency histogram (Prometheus' cumulative buckets are computed on export).
#[derive(Default, Debug)]
pub struct Histogram {
    /// Observations per bucket, not cumulative; the last slot counts those above every bound.
    counts: [Cell<u64>; BUCKETS + 1],
    sum_nanos: Cell<u64>,
}

/// A histogram's values at one moment, cumulative as Prometheus wants them; `Send` so it can
/// travel from its shard to the endpoint.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HistogramSnapshot {
    /// `(le, observations at or below le)`, ascending; the last one is `+Inf` (the count).
    pub cumulative: Vec<(f64, u64)>,
    pub sum_seconds: f64,
    pub count: u64,
}

impl Histogram {
    pub fn observe(&self, d: Duration) {
        let seconds = d.as_secs_f64();
        let slot = BUCKET_BOUNDS_SECONDS
            .iter()
            .position(|&bound| seconds <= bound)
            .unwrap_or(BUCKETS);
        let c = &self.counts[slot];
        c.set(c.get() + 1);
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos
            .set(self.sum_nanos.get().saturating_add(nanos));
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().map(Cell::get).sum()
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut running = 0;
        let mut cumulative = Vec::with_capacity(BUCKETS + 1);
        for (i, c) in self.counts.iter().enumerate() {
            running += c.get();
            let le = BUCKET_BOUNDS_SECONDS
                .get(i)
                .copied()
                .unwrap_or(f64::INFINITY);
            cumulative.push((le, running));
        }
        HistogramSnapshot {
            cumulative,
            sum_seconds: self.sum_nanos.get() as f64 / 1e9,
            count: running,
        }
    }
}

/// I/O done by the current shard thread, whichever log asked for it.
#[derive(Default, Debug)]
pub struct ShardIo {
    /// fdatasync and fsync calls and how long each took.
    pub syncs: Histogram,
    /// Writes the shard thread made itself (`pwritev`, small writes).
    pub inline_writes: Cell<u64>,
    /// Writes handed to the io_uring ring (and from there to its worker threads).
    pub ring_writes: Cell<u64>,
}

thread_local! {
    static SHARD_IO: ShardIo = ShardIo::default();
}

/// Runs `f` with the current thread's (shard's) I/O statistics.
pub fn with_shard_io<R>(f: impl FnOnce(&ShardIo) -> R) -> R {
    SHARD_IO.with(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_cumulative_buckets() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(40)); // first bucket
        h.observe(Duration::from_millis(3)); // le 0.005
        h.observe(Duration::from_secs(60)); // above every bound
        let s = h.snapshot();
        assert_eq!(s.count, 3);
        assert_eq!(s.cumulative.first(), Some(&(0.000_05, 1)));
        let at = |le: f64| s.cumulative.iter().find(|(b, _)| *b == le).unwrap().1;
        assert_eq!(at(0.0025), 1);
        assert_eq!(at(0.005), 2);
        assert_eq!(at(10.0), 2);
        assert_eq!(s.cumulative.last(), Some(&(f64::INFINITY, 3)));
        assert!(
            (s.sum_seconds - 60.003_04).abs() < 1e-9,
            "{}",
            s.sum_seconds
        );
    }
}
