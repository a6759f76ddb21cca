//! Open-loop sending: every message has an intended send time, fixed in advance by the rate.
//!
//! Latency is measured from the intended time, not from when the message actually left, so a
//! stall is charged to every message it delayed (no coordinated omission).

use std::time::{Duration, Instant};

/// Where time comes from; tests use a stub.
pub trait Clock {
    fn now(&self) -> Instant;
    fn sleep_until(&self, at: Instant);
}

pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep_until(&self, at: Instant) {
        let now = Instant::now();
        if at > now {
            std::thread::sleep(at - now);
        }
    }
}

/// Intended send times at `rate` messages per second from `start`.
#[derive(Copy, Clone, Debug)]
pub struct Schedule {
    start: Instant,
    interval: Duration,
}

impl Schedule {
    pub fn new(start: Instant, rate_per_sec: f64) -> Schedule {
        assert!(rate_per_sec > 0.0, "a positive rate");
        Schedule {
            start,
            interval: Duration::from_secs_f64(1.0 / rate_per_sec),
        }
    }

    /// When message `i` should be sent.
    pub fn intended(&self, i: u64) -> Instant {
        self.start + self.interval.mul_f64(i as f64)
    }

    /// Waits until message `i` is due (returns at once when it is late) and gives its time.
    pub fn wait_for(&self, clock: &dyn Clock, i: u64) -> Instant {
        let at = self.intended(i);
        clock.sleep_until(at);
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// Time stands still unless a sleep or a stall moves it.
    struct StubClock {
        now: Cell<Instant>,
    }

    impl Clock for StubClock {
        fn now(&self) -> Instant {
            self.now.get()
        }
        fn sleep_until(&self, at: Instant) {
            if at > self.now.get() {
                self.now.set(at);
            }
        }
    }

    #[test]
    fn a_stall_is_charged_to_every_message_it_delayed() {
        let t0 = Instant::now();
        let clock = StubClock { now: Cell::new(t0) };
        let schedule = Schedule::new(t0, 1000.0); // one message per millisecond
        let mut latencies = Vec::new();
        for i in 0..200u64 {
            let intended = schedule.wait_for(&clock, i);
            if i == 50 {
                // The sender stalls for 100 ms just before sending message 50.
                clock.now.set(clock.now.get() + Duration::from_millis(100));
            }
            let sent = clock.now();
            latencies.push((sent - intended).as_millis() as u64);
        }
        assert!(
            latencies[..50].iter().all(|&l| l == 0),
            "on time before the stall"
        );
        assert_eq!(latencies[50], 100, "the stalled message");
        // Messages 51..149 were due during the stall and went out late, each by its own share.
        for (i, latency) in latencies.iter().enumerate().take(150).skip(51) {
            assert_eq!(*latency, 150 - i as u64, "message {i}");
        }
        assert!(latencies[151..].iter().all(|&l| l == 0), "caught up after");
        // A closed-loop measure (sent time to sent time) would have seen only one slow message.
        assert_eq!(latencies.iter().filter(|&&l| l > 0).count(), 100);
    }
}
