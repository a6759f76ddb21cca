//! A producer's record memory, Kafka's `buffer.memory`: the bytes of records created and not
//! yet answered (lingering in a batch, queued for a full window, or in flight). The producer
//! waits while it is full, as `KafkaProducer.send` blocks on its accumulator's pool, so a
//! closed-loop run keeps at most this much outstanding; its acknowledgement latency is then
//! about the limit over the rate (Little's law), whatever the broker's answer time.
//!
//! Every produce response is signalled here too (with or without bytes freed): it is what a
//! producer waiting for a window slot waits for.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// Kafka's `buffer.memory` default.
pub const DEFAULT_BUFFER_BYTES: u64 = 32 * 1024 * 1024;

/// The bytes sent (queued or in flight) are counted here, shared with the connections' reader
/// threads; the bytes still lingering in batches are the producer's own count, added when it
/// asks `is_full`. Atomics, because the producer asks once a record.
pub struct Buffer {
    limit: u64,
    held: AtomicU64,
    responses: AtomicU64,
    /// Only for waiting: a waiter checks `responses` under it, and `answered` takes it to
    /// notify, so no wake-up falls between the check and the wait.
    waiting: Mutex<()>,
    changed: Condvar,
}

impl Buffer {
    pub fn new(limit: u64) -> Buffer {
        Buffer {
            limit,
            held: AtomicU64::new(0),
            responses: AtomicU64::new(0),
            waiting: Mutex::new(()),
            changed: Condvar::new(),
        }
    }

    /// Counts bytes in (a batch handed to the sender).
    pub fn hold(&self, bytes: u64) {
        self.held.fetch_add(bytes, Ordering::Relaxed);
    }

    /// A produce response arrived; `bytes` of its records are done with (acknowledged or
    /// failed for good; a batch to be retried stays held).
    pub fn answered(&self, bytes: u64) {
        self.held.fetch_sub(bytes, Ordering::Relaxed);
        self.responses.fetch_add(1, Ordering::Release);
        let _guard = self.waiting.lock().expect("buffer lock");
        self.changed.notify_all();
    }

    /// Whether the bytes held, with `lingering` more not yet handed over, reach the limit.
    pub fn is_full(&self, lingering: u64) -> bool {
        self.held.load(Ordering::Relaxed) + lingering >= self.limit
    }

    /// Responses seen so far: a producer compares it with the last value it saw to know a
    /// window slot may have opened, without waiting.
    pub fn responses(&self) -> u64 {
        self.responses.load(Ordering::Acquire)
    }

    /// Waits until a response arrives after the `seen`-th, or `timeout` passes.
    pub fn wait_for_response(&self, seen: u64, timeout: Duration) {
        let guard = self.waiting.lock().expect("buffer lock");
        let _ = self
            .changed
            .wait_timeout_while(guard, timeout, |_| self.responses() == seen)
            .expect("buffer lock");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn full_at_the_limit_and_freed_by_answers() {
        let buffer = Buffer::new(100);
        buffer.hold(60);
        assert!(!buffer.is_full(0));
        assert!(buffer.is_full(40), "lingering bytes count too");
        buffer.hold(40);
        assert!(buffer.is_full(0));
        buffer.answered(0); // a response whose batch is retried frees nothing
        assert!(buffer.is_full(0));
        buffer.answered(40);
        assert!(!buffer.is_full(0));
        assert_eq!(buffer.responses(), 2);
    }

    #[test]
    fn a_waiter_wakes_on_the_next_response_not_the_timeout() {
        let buffer = Arc::new(Buffer::new(1));
        let seen = buffer.responses();
        let answering = buffer.clone();
        let answer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            answering.answered(0);
        });
        let started = Instant::now();
        buffer.wait_for_response(seen, Duration::from_secs(10));
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(buffer.responses(), seen + 1);
        answer.join().unwrap();
        // Already past `seen`: no wait at all.
        buffer.wait_for_response(seen, Duration::from_secs(10));
    }
}
