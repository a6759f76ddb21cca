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
//! Kafka sets the rate per client with AlterClientQuotas (`controller_mutation_rate`); here it
//! is one broker setting for every client, off (0) by default as Kafka has no quota by default.

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
    /// THROTTLING_QUOTA_EXCEEDED.
    Client { id: String, strict: bool },
}

impl Payer {
    /// The payer of a request from `client_id` at `version`, strict from `strict_from`.
    pub fn client(client_id: &str, version: i16, strict_from: i16) -> Payer {
        Payer::Client {
            id: client_id.to_string(),
            strict: version >= strict_from,
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

    fn capacity(&self) -> f64 {
        self.rate * CONTROLLER_QUOTA_WINDOWS
    }

    /// The client's tokens now, after refilling.
    fn tokens(&self, client: &str, now: Instant) -> f64 {
        let mut buckets = self.buckets.borrow_mut();
        let capacity = self.capacity();
        match buckets.get_mut(client) {
            None => capacity,
            Some(b) => {
                let elapsed = now.saturating_duration_since(b.refilled).as_secs_f64();
                b.tokens = (b.tokens + elapsed * self.rate).min(capacity);
                b.refilled = now;
                b.tokens
            }
        }
    }

    /// Whether changes by `payer` are charged at all (a client, with a quota set).
    pub fn charges(&self, payer: &Payer) -> bool {
        self.rate > 0.0 && matches!(payer, Payer::Client { .. })
    }

    /// Whether `payer` may make a change now: refused only when strict and the bucket is
    /// already empty.
    pub fn check(&self, payer: &Payer) -> Result<(), TopicError> {
        self.check_at(payer, Instant::now())
    }

    fn check_at(&self, payer: &Payer, now: Instant) -> Result<(), TopicError> {
        match payer {
            Payer::Client { id, strict: true } if self.rate > 0.0 => {
                if self.tokens(id, now) < 0.0 {
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
        if self.rate <= 0.0 || partitions == 0 {
            return;
        }
        let tokens = self.tokens(id, now) - partitions as f64;
        let mut buckets = self.buckets.borrow_mut();
        if buckets.len() >= MAX_CLIENTS_TRACKED && !buckets.contains_key(id) {
            let capacity = self.capacity();
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
        if self.rate <= 0.0 {
            return 0;
        }
        let tokens = self.tokens(id, now);
        if tokens >= 0.0 {
            return 0;
        }
        ((-tokens / self.rate) * 1000.0).ceil().min(i32::MAX as f64) as i32
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
        }
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
        let other = Payer::client("other", 6, 6);
        assert!(q.check_at(&other, t0).is_ok());
        assert_eq!(q.check_at(&client(true), t0), Err(TopicError::Throttled));
    }
}
