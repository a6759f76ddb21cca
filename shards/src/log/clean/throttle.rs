//! A byte-rate limit shared by the cleaner passes of one shard
//! (`log.cleaner.io.max.bytes.per.second`).

use std::cell::Cell;
use std::time::{Duration, Instant};

/// Sleeps after each piece of I/O long enough that the shard's cleaning stays under the rate.
pub struct IoThrottle {
    bytes_per_second: f64,
    /// When the bytes accounted so far would have been done at the rate.
    caught_up_at: Cell<Instant>,
}

impl IoThrottle {
    pub fn new(bytes_per_second: u64) -> IoThrottle {
        IoThrottle {
            bytes_per_second: bytes_per_second.max(1) as f64,
            caught_up_at: Cell::new(Instant::now()),
        }
    }

    /// Accounts for `bytes` read or written, sleeping if the shard is ahead of the rate.
    pub async fn spend(&self, bytes: u64) {
        let now = Instant::now();
        let start = self.caught_up_at.get().max(now);
        let due = start + Duration::from_secs_f64(bytes as f64 / self.bytes_per_second);
        self.caught_up_at.set(due);
        if due > now + Duration::from_millis(1) {
            glommio::timer::sleep(due - now).await;
        }
    }
}
