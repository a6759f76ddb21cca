//! Kafka's controller mutation quota (KIP-599): topic creations, partition additions and
//! topic deletions are charged per client id, one token per partition created or deleted,
//! from a token bucket refilled at `quota.controller.mutation.rate` per second and holding at
//! most `CONTROLLER_QUOTA_WINDOWS` seconds of it (Kafka's `controller.quota.window.num` × 1 s
//! windows).
//!
//! As in Kafka's `StrictControllerMutationQuota`, a change is refused
//! (THROTTLING_QUOTA_EXCEEDED) only once the bucket is already empty, so a single large
//! change always goes through and the client is told how long to wait (`throttle_time_ms`).
//! CreateTopics before v6, CreatePartitions before v3 and DeleteTopics before v5 cannot carry
//! that error: their changes are charged and never refused, and the throttle time alone asks
//! the client to slow down (Kafka's `PermissiveControllerMutationQuota`). Auto-creation is not
//! charged, as in Kafka.
//!
//! The rate is the client's `controller_mutation_rate` client quota (AlterClientQuotas, found
//! in Kafka's order: user and client id, ..., default client id) when it has one; else the
//! broker setting `quota.controller.mutation.rate`, which is off (0) by default as Kafka has
//! no quota by default.

use super::TopicError;
use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Instant;

/// Seconds of the rate a bucket holds when full (`controller.quota.window.num` = 11 windows
/// of `controller.quota.window.size.seconds` = 1 in Kafka).
const CONTROLLER_QUOTA_WINDOWS: f64 = 11.0;
/// Buckets kept at most; full buckets are dropped first when there are more.
const MAX_CLIENTS_TRACKED: usize = 10_000;

/// Who pays for a topic change.
#[derive(Clone, Debug)]
pub enum Payer {
    /// Auto-creation and the broker's own topics: never charged.
    Broker,
    /// A client's request; `strict` when its version can be refused with
    /// THROTTLING_QUOTA_EXCEEDED; `rate` its `controller_mutation_rate` client quota, if any.
    Client {
        id: String,
        strict: bool,
        rate: Option<f64>,
    },
}

impl Payer {
    /// The payer of a request from `client_id` at `version`, strict from `strict_from`, with
    /// its client quota's rate if it has one.
    pub fn client(client_id: &str, version: i16, strict_from: i16, rate: Option<f64>) -> Payer {
        Payer::Client {
            id: client_id.to_string(),
            strict: version >= strict_from,
            rate,
        }
    }
}

struct Bucket {
    tokens: f64,
    refilled: Instant,
}

/// Every client's bucket; lives with the controller on shard 0.
pub struct MutationQuota {
    /// Partitions per second; 0 is no quota.
    rate: f64,
    buckets: RefCell<HashMap<String, Bucket>>,
}

impl MutationQuota {
    pub fn new(rate_per_second: f64) -> MutationQuota {
        MutationQuota {
            rate: rate_per_second,
            buckets: RefCell::new(HashMap::new()),
        }
    }

    fn capacity(rate: f64) -> f64 {
        rate * CONTROLLER_QUOTA_WINDOWS
    }

    /// The rate `payer` is charged at (0: not charged).
    fn rate_of(&self, payer: &Payer) -> f64 {
        match payer {
            Payer::Broker => 0.0,
            Payer::Client { rate: Some(r), .. } => *r,
            Payer::Client { rate: None, .. } => self.rate,
        }
    }

    /// The client's tokens now, after refilling at `rate`.
    fn tokens(&self, client: &str, rate: f64, now: Instant) -> f64 {
        let mut buckets = self.buckets.borrow_mut();
        let capacity = Self::capacity(rate);
        match buckets.get_mut(client) {
            None => capacity,
            Some(b) => {
                let elapsed = now.saturating_duration_since(b.refilled).as_secs_f64();
                b.tokens = (b.tokens + elapsed * rate).min(capacity);
                b.refilled = now;
                b.tokens
            }
        }
    }

    /// Whether changes by `payer` are charged at all (a client, with a quota set).
    pub fn charges(&self, payer: &Payer) -> bool {
        self.rate_of(payer) > 0.0
    }

    /// Whether `payer` may make a change now: refused only when strict and the bucket is
    /// already empty.
    pub fn check(&self, payer: &Payer) -> Result<(), TopicError> {
        self.check_at(payer, Instant::now())
    }

    fn check_at(&self, payer: &Payer, now: Instant) -> Result<(), TopicError> {
        let rate = self.rate_of(payer);
        match payer {
            Payer::Client {
                id, strict: true, ..
            } if rate > 0.0 => {
                if self.tokens(id, rate, now) < 0.0 {
                    return Err(TopicError::Throttled);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Charges `partitions` created or deleted to `payer`.
    pub fn record(&self, payer: &Payer, partitions: usize) {
        self.record_at(payer, partitions, Instant::now())
    }

    fn record_at(&self, payer: &Payer, partitions: usize, now: Instant) {
        let Payer::Client { id, .. } = payer else {
            return;
        };
        let rate = self.rate_of(payer);
        if rate <= 0.0 || partitions == 0 {
            return;
        }
        let tokens = self.tokens(id, rate, now) - partitions as f64;
        let mut buckets = self.buckets.borrow_mut();
        if buckets.len() >= MAX_CLIENTS_TRACKED && !buckets.contains_key(id) {
            let capacity = Self::capacity(rate);
            buckets.retain(|_, b| b.tokens < capacity);
        }
        buckets.insert(
            id.clone(),
            Bucket {
                tokens,
                refilled: now,
            },
        );
    }

    /// How long `payer` should wait before its next change: until its bucket is no longer
    /// negative (Kafka's `throttleTime`), 0 when it is not.
    pub fn throttle_ms(&self, payer: &Payer) -> i32 {
        self.throttle_ms_at(payer, Instant::now())
    }

    fn throttle_ms_at(&self, payer: &Payer, now: Instant) -> i32 {
        let Payer::Client { id, .. } = payer else {
            return 0;
        };
        let rate = self.rate_of(payer);
        if rate <= 0.0 {
            return 0;
        }
        let tokens = self.tokens(id, rate, now);
        if tokens >= 0.0 {
            return 0;
        }
        ((-tokens / rate) * 1000.0).ceil().min(i32::MAX as f64) as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn client(strict: bool) -> Payer {
        Payer::Client {
            id: "admin".into(),
            strict,
            rate: None,
        }
    }

    #[test]
    fn a_clients_own_quota_replaces_the_broker_rate() {
        let q = MutationQuota::new(0.0);
        let own = Payer::client("admin", 6, 6, Some(1.0));
        assert!(q.charges(&own) && !q.charges(&client(true)));
        let now = Instant::now();
        q.record_at(&own, 20, now);
        // 11 tokens at 1/s, 20 spent: 9 s to wait, and refused meanwhile.
        assert_eq!(q.throttle_ms_at(&own, now), 9000);
        assert!(q.check_at(&own, now).is_err());
    }

    #[test]
    fn a_large_change_passes_then_the_next_waits_for_the_bucket_to_refill() {
        let q = MutationQuota::new(10.0);
        let t0 = Instant::now();
        let strict = client(true);
        // Full bucket: 110 tokens. 200 partitions at once go through and leave it at -90.
        assert!(q.check_at(&strict, t0).is_ok());
        q.record_at(&strict, 200, t0);
        assert_eq!(q.throttle_ms_at(&strict, t0), 9000);
        assert_eq!(q.check_at(&strict, t0), Err(TopicError::Throttled));
        // 9 s later it is back at zero: allowed again.
        let later = t0 + Duration::from_secs(9);
        assert!(q.check_at(&strict, later).is_ok());
        assert_eq!(q.throttle_ms_at(&strict, later), 0);
    }

    #[test]
    fn old_versions_and_the_broker_are_never_refused() {
        let q = MutationQuota::new(1.0);
        let t0 = Instant::now();
        q.record_at(&client(false), 1000, t0);
        assert!(q.check_at(&client(false), t0).is_ok());
        assert!(q.throttle_ms_at(&client(false), t0) > 0, "but told to wait");
        q.record_at(&Payer::Broker, 1000, t0);
        assert!(q.check_at(&Payer::Broker, t0).is_ok());
        assert_eq!(q.throttle_ms_at(&Payer::Broker, t0), 0);
    }

    #[test]
    fn no_rate_is_no_quota() {
        let q = MutationQuota::new(0.0);
        let t0 = Instant::now();
        q.record_at(&client(true), 1_000_000, t0);
        assert!(q.check_at(&client(true), t0).is_ok());
        assert_eq!(q.throttle_ms_at(&client(true), t0), 0);
    }

    #[test]
    fn clients_have_their_own_buckets() {
        let q = MutationQuota::new(1.0);
        let t0 = Instant::now();
        q.record_at(&client(true), 100, t0);
        let other = Payer::client("other", 6, 6, None);
        assert!(q.check_at(&other, t0).is_ok());
        assert_eq!(q.check_at(&client(true), t0), Err(TopicError::Throttled));
    }
}
