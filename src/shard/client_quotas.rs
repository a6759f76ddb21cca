//! Client quota enforcement (KIP-13, KIP-124, KIP-219): each quota's rate is measured as Kafka's
//! `ClientQuotaManager` measures it, and a client over its bound is told `throttle_time_ms`
//! and muted for that long.
//!
//! - A rate is Kafka's `Rate` over `quota.window.num` = 11 samples of
//!   `quota.window.size.seconds` = 1: the sum of the samples not older than 11 s, over the time
//!   since the oldest, counted as at least 10 full windows. So a new client may send up to 10 s
//!   of its quota at once before it is throttled, as with Kafka.
//! - After recording, a rate above its bound gives `throttle = (rate - bound) / bound × window`
//!   (`QuotaUtils.throttleTime`): the time after which the rate is back at the bound if the
//!   client sends nothing more.
//! - The rates are broker-wide: one table shared by every shard, so a client's connections on
//!   different shards share its quota, as on a Kafka broker. The table is touched only for
//!   connections that have a quota.

use crate::metadata::client_quotas::QuotaKey;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

const SAMPLES: usize = 11;
const WINDOW_MS: i64 = 1000;

/// What a quota limits.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum QuotaKind {
    /// Produce request bytes per second (`producer_byte_rate`).
    Produce,
    /// Fetch response bytes per second (`consumer_byte_rate`).
    Fetch,
    /// Percent of one request thread's time (`request_percentage`).
    Request,
}

impl QuotaKind {
    pub const ALL: [QuotaKind; 3] = [QuotaKind::Produce, QuotaKind::Fetch, QuotaKind::Request];

    /// Kafka's name for the quota type (its metrics' `type` tag).
    pub fn name(self) -> &'static str {
        match self {
            QuotaKind::Produce => "Produce",
            QuotaKind::Fetch => "Fetch",
            QuotaKind::Request => "Request",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

#[derive(Clone, Copy, Default)]
struct Sample {
    start_ms: i64,
    value: f64,
}

/// Kafka's `Rate` of a `SampledStat` sum.
struct Rate {
    samples: [Sample; SAMPLES],
    current: usize,
    bound: f64,
}

impl Rate {
    fn new(now_ms: i64, bound: f64) -> Rate {
        Rate {
            samples: [Sample {
                start_ms: now_ms,
                value: 0.0,
            }; SAMPLES],
            current: 0,
            bound,
        }
    }

    fn record(&mut self, value: f64, now_ms: i64) {
        if now_ms - self.samples[self.current].start_ms >= WINDOW_MS {
            self.current = (self.current + 1) % SAMPLES;
            self.samples[self.current] = Sample {
                start_ms: now_ms,
                value: 0.0,
            };
        }
        self.samples[self.current].value += value;
    }

    fn purge(&mut self, now_ms: i64) {
        for s in &mut self.samples {
            if now_ms - s.start_ms >= SAMPLES as i64 * WINDOW_MS {
                *s = Sample {
                    start_ms: now_ms,
                    value: 0.0,
                };
            }
        }
    }

    /// The span the rate is taken over (`Rate.windowSize`).
    fn window_ms(&mut self, now_ms: i64) -> i64 {
        self.purge(now_ms);
        let oldest = self
            .samples
            .iter()
            .map(|s| s.start_ms)
            .min()
            .unwrap_or(now_ms);
        let mut elapsed = now_ms - oldest;
        let full = elapsed / WINDOW_MS;
        let min_full = SAMPLES as i64 - 1;
        if full < min_full {
            elapsed += (min_full - full) * WINDOW_MS;
        }
        elapsed.max(1)
    }

    /// Per second.
    fn measure(&mut self, now_ms: i64) -> f64 {
        let window = self.window_ms(now_ms);
        let sum: f64 = self.samples.iter().map(|s| s.value).sum();
        sum * 1000.0 / window as f64
    }
}

/// Every quota's rate, broker-wide, and what throttling has done.
#[derive(Default)]
pub struct ClientQuotaSensors {
    rates: Mutex<HashMap<(QuotaKind, QuotaKey), Rate>>,
    throttled_responses: [AtomicU64; 3],
    throttle_ms: [AtomicU64; 3],
}

/// One rate as the metrics endpoint shows it.
pub struct RateReading {
    pub kind: QuotaKind,
    pub key: QuotaKey,
    pub rate: f64,
    pub bound: f64,
}

impl ClientQuotaSensors {
    /// Records `value` against the quota `key` of `bound` per second; the throttle time in ms
    /// (0 within the quota).
    pub fn record(
        &self,
        kind: QuotaKind,
        key: &QuotaKey,
        bound: f64,
        value: f64,
        now_ms: i64,
    ) -> i32 {
        let mut rates = self.rates.lock().unwrap_or_else(|e| e.into_inner());
        let rate = rates
            .entry((kind, key.clone()))
            .or_insert_with(|| Rate::new(now_ms, bound));
        rate.bound = bound;
        rate.record(value, now_ms);
        let measured = rate.measure(now_ms);
        if measured <= bound {
            return 0;
        }
        let window = rate.window_ms(now_ms) as f64;
        let throttle = if bound <= 0.0 {
            window
        } else {
            (measured - bound) / bound * window
        };
        throttle.round().min(i32::MAX as f64) as i32
    }

    /// Takes back a recorded value (a throttled fetch returns nothing, as in Kafka).
    pub fn unrecord(&self, kind: QuotaKind, key: &QuotaKey, value: f64, now_ms: i64) {
        let mut rates = self.rates.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(rate) = rates.get_mut(&(kind, key.clone())) {
            rate.record(-value, now_ms);
        }
    }

    /// Counts a response that carried a throttle time.
    pub fn throttled(&self, kind: QuotaKind, ms: i32) {
        self.throttled_responses[kind.index()].fetch_add(1, Ordering::Relaxed);
        self.throttle_ms[kind.index()].fetch_add(ms.max(0) as u64, Ordering::Relaxed);
    }

    /// (responses throttled, throttle ms in all) of `kind`.
    pub fn throttle_totals(&self, kind: QuotaKind) -> (u64, u64) {
        (
            self.throttled_responses[kind.index()].load(Ordering::Relaxed),
            self.throttle_ms[kind.index()].load(Ordering::Relaxed),
        )
    }

    /// Every rate now, for the metrics endpoint.
    pub fn readings(&self, now_ms: i64) -> Vec<RateReading> {
        let mut rates = self.rates.lock().unwrap_or_else(|e| e.into_inner());
        rates
            .iter_mut()
            .map(|((kind, key), rate)| RateReading {
                kind: *kind,
                key: key.clone(),
                rate: rate.measure(now_ms),
                bound: rate.bound,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> QuotaKey {
        QuotaKey {
            user: None,
            client_id: Some("c".into()),
        }
    }

    #[test]
    fn a_new_client_may_send_ten_seconds_of_its_quota_before_it_is_throttled() {
        let q = ClientQuotaSensors::default();
        // 1000 B/s: 10 000 B at once fits (the window counts as 10 s), the next byte does not.
        assert_eq!(q.record(QuotaKind::Produce, &key(), 1000.0, 10_000.0, 0), 0);
        let throttle = q.record(QuotaKind::Produce, &key(), 1000.0, 1000.0, 0);
        // 11 000 B over 10 s is 1100 B/s: 10% over, for a 10 s window: 1 s.
        assert_eq!(throttle, 1000);
    }

    #[test]
    fn a_client_under_its_quota_is_not_throttled_and_unrecord_takes_a_value_back() {
        let q = ClientQuotaSensors::default();
        // 900 B/s in one record a second: 11 samples over a 10 s span read 990 B/s at most.
        for second in 0..30 {
            let t = q.record(QuotaKind::Fetch, &key(), 1000.0, 900.0, second * 1000);
            assert_eq!(t, 0, "second {second}");
        }
        let t = q.record(QuotaKind::Fetch, &key(), 1000.0, 50_000.0, 30_000);
        assert!(t > 0);
        q.unrecord(QuotaKind::Fetch, &key(), 50_000.0, 30_000);
        assert_eq!(q.record(QuotaKind::Fetch, &key(), 1000.0, 0.0, 30_000), 0);
    }
}
