//! One producer connection: produce requests pipelined (at most `IN_FLIGHT_MAX` unanswered), a
//! reader thread taking the responses in order, timing each request and each record, and
//! handing back the batches a Kafka producer would retry.

use crate::buffer::Buffer;
use crate::client::{decode_response, encode_request, read_frame, Conn};
use crate::stats::{Local, Stats};
use anyhow::{Context, Result};
use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, ProduceRequest};
use std::collections::VecDeque;
use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Produce requests in flight per connection (Kafka's max.in.flight.requests.per.connection).
const IN_FLIGHT_MAX: usize = 5;
/// How long the end of a run waits for outstanding acknowledgements.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);
/// Sends of one batch before its error counts (the first one included).
const ATTEMPTS_MAX: u32 = 10;
/// Kafka's `retry.backoff.ms` default.
const RETRY_BACKOFF: Duration = Duration::from_millis(100);

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const LEADER_NOT_AVAILABLE: i16 = 5;
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const REQUEST_TIMED_OUT: i16 = 7;
const NOT_ENOUGH_REPLICAS: i16 = 19;
const NOT_ENOUGH_REPLICAS_AFTER_APPEND: i16 = 20;

/// The produce errors Kafka's producer retries (they are `RetriableException`s in the Java
/// client), and whether the answer means the leader moved (so metadata is asked again first).
fn retriable(code: i16) -> Option<bool> {
    match code {
        UNKNOWN_TOPIC_OR_PARTITION | LEADER_NOT_AVAILABLE | NOT_LEADER_OR_FOLLOWER => Some(true),
        REQUEST_TIMED_OUT | NOT_ENOUGH_REPLICAS | NOT_ENOUGH_REPLICAS_AFTER_APPEND => Some(false),
        _ => None,
    }
}

/// One partition's share of a sent request.
pub struct SentPart {
    pub partition: i32,
    /// Per record: when it was due (open loop) or created.
    pub due: Vec<Instant>,
    /// Value bytes, as the totals count them.
    pub bytes: u64,
    /// Bytes its records hold in the producer's `Buffer`, given back when it is answered for
    /// good.
    pub held: u64,
    /// The encoded batch, kept for a retry.
    pub batch: Bytes,
    /// Sends so far.
    pub attempts: u32,
}

/// The bytes `parts` hold in the producer's `Buffer`.
pub fn held_bytes(parts: &[SentPart]) -> u64 {
    parts.iter().map(|p| p.held).sum()
}

/// What a sent request was, kept until its response arrives.
struct Sent {
    version: i16,
    parts: Vec<SentPart>,
    sent_at: Instant,
    /// Transactional batches are not resent: their sequence numbers would arrive out of order
    /// behind the batches sent after them.
    may_retry: bool,
}

/// Batches answered with a retriable error, waiting to be sent again; shared by a producer's
/// pipes and taken by the producer.
#[derive(Default)]
pub struct Retries {
    /// Each with when its error came.
    parts: Mutex<Vec<(Instant, SentPart)>>,
    /// Some part's leader moved: the producer asks for metadata before resending.
    leader_moved: std::sync::atomic::AtomicBool,
}

impl Retries {
    /// The parts whose backoff (`RETRY_BACKOFF`) has passed, and whether metadata must be
    /// asked again before they are sent.
    pub fn take_due(&self) -> (Vec<SentPart>, bool) {
        let now = Instant::now();
        let mut waiting = self.parts.lock().expect("retries lock");
        if !waiting
            .iter()
            .any(|(at, _)| now.duration_since(*at) >= RETRY_BACKOFF)
        {
            return (Vec::new(), false);
        }
        let (due, still): (Vec<_>, Vec<_>) = std::mem::take(&mut *waiting)
            .into_iter()
            .partition(|(at, _)| now.duration_since(*at) >= RETRY_BACKOFF);
        *waiting = still;
        let moved = self.leader_moved.swap(false, Ordering::Relaxed);
        (due.into_iter().map(|(_, part)| part).collect(), moved)
    }

    pub fn is_empty(&self) -> bool {
        self.parts.lock().expect("retries lock").is_empty()
    }

    fn push(&self, part: SentPart, leader_moved: bool) {
        if leader_moved {
            self.leader_moved.store(true, Ordering::Relaxed);
        }
        let mut waiting = self.parts.lock().expect("retries lock");
        waiting.push((Instant::now(), part));
    }
}

/// A connection with a reader thread taking the responses in order.
pub struct Pipe {
    stream: TcpStream,
    version: i16,
    next_id: i32,
    sent: Arc<(Mutex<VecDeque<Sent>>, Condvar)>,
    reader: Option<std::thread::JoinHandle<()>>,
    buffer: Arc<Buffer>,
}

impl Pipe {
    pub fn open(
        addr: &str,
        stats: Arc<Stats>,
        acks: i16,
        retries: Arc<Retries>,
        buffer: Arc<Buffer>,
    ) -> Result<Pipe> {
        let conn = Conn::connect(addr)?;
        let version = conn.versions.of(ApiKey::Produce)?;
        let (stream, _) = conn.into_stream();
        let sent: Arc<(Mutex<VecDeque<Sent>>, Condvar)> = Arc::default();
        let reader = if acks == 0 {
            None // no responses to wait for
        } else {
            let read = stream.try_clone()?;
            let sent = sent.clone();
            let buffer = buffer.clone();
            Some(std::thread::spawn(move || {
                read_responses(read, &sent, &stats, &retries, &buffer)
            }))
        };
        Ok(Pipe {
            stream,
            version,
            next_id: 1,
            sent,
            reader,
            buffer,
        })
    }

    /// Whether a request can be sent without waiting for an answer.
    pub fn has_room(&self) -> bool {
        self.reader.is_none() || self.sent.0.lock().expect("pipe lock").len() < IN_FLIGHT_MAX
    }

    /// Sends a produce request, waiting while `IN_FLIGHT_MAX` are unanswered.
    pub fn send(
        &mut self,
        request: &ProduceRequest,
        parts: Vec<SentPart>,
        stats: &Stats,
    ) -> Result<()> {
        let frame = encode_request(self.version, self.next_id, request)?;
        self.next_id += 1;
        if self.reader.is_none() {
            self.stream.write_all(&frame)?;
            for p in &parts {
                stats.add(p.due.len() as u64, p.bytes);
            }
            // acks=0: nothing will answer, so the records are done with once written.
            self.buffer.answered(held_bytes(&parts));
            return Ok(());
        }
        {
            let (lock, cv) = &*self.sent;
            let mut sent = lock.lock().expect("pipe lock");
            while sent.len() >= IN_FLIGHT_MAX {
                let (s, timeout) = cv.wait_timeout(sent, DRAIN_TIMEOUT).expect("pipe lock");
                sent = s;
                if timeout.timed_out() {
                    anyhow::bail!("no produce response for {DRAIN_TIMEOUT:?}");
                }
            }
            sent.push_back(Sent {
                version: self.version,
                parts,
                sent_at: Instant::now(),
                may_retry: request.transactional_id.is_none(),
            });
        }
        self.stream
            .write_all(&frame)
            .context("sending a produce request")
    }

    /// Waits for every response so far.
    pub fn drain(&self) {
        let (lock, cv) = &*self.sent;
        let deadline = Instant::now() + DRAIN_TIMEOUT;
        let mut sent = lock.lock().expect("pipe lock");
        while !sent.is_empty() && Instant::now() < deadline {
            sent = cv
                .wait_timeout(sent, Duration::from_millis(100))
                .expect("pipe lock")
                .0;
        }
    }

    /// Waits for every response, then closes.
    pub fn finish(mut self) {
        self.drain();
        let _ = self.stream.shutdown(Shutdown::Both);
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

/// The reader thread: each response matched to its request (they come in order), its
/// partitions counted, timed, failed or handed back for a retry.
fn read_responses(
    mut read: TcpStream,
    sent: &(Mutex<VecDeque<Sent>>, Condvar),
    stats: &Stats,
    retries: &Retries,
    buffer: &Buffer,
) {
    let mut local = Local::default();
    while let Ok(frame) = read_frame(&mut read) {
        // The request stays in the queue until its parts are acknowledged, counted or queued
        // for a retry: `drain` waits for an empty queue and then for an empty retry queue, so
        // a part between the two would be lost to both.
        let taken = sent.0.lock().expect("pipe lock").front_mut().map(|s| Sent {
            version: s.version,
            parts: std::mem::take(&mut s.parts),
            sent_at: s.sent_at,
            may_retry: s.may_retry,
        });
        let Some(s) = taken else {
            break;
        };
        // The window slot is freed before the buffer is told, so a producer woken by the
        // buffer finds it.
        let answered = |released: u64| {
            sent.0.lock().expect("pipe lock").pop_front();
            sent.1.notify_all();
            buffer.answered(released);
        };
        let now = Instant::now();
        local.record_request(now.saturating_duration_since(s.sent_at));
        let Ok((_, resp)) = decode_response::<ProduceRequest>(s.version, frame) else {
            let lost: usize = s.parts.iter().map(|p| p.due.len()).sum();
            stats.error(-1, lost as u64);
            answered(held_bytes(&s.parts));
            continue;
        };
        let code_of = |partition: i32| {
            resp.responses
                .iter()
                .flat_map(|t| t.partition_responses.iter())
                .find(|p| p.index == partition)
                .map(|p| p.error_code)
                .unwrap_or(-1)
        };
        let mut released = 0;
        for part in s.parts {
            let code = code_of(part.partition);
            match (code, retriable(code)) {
                (0, _) => {
                    released += part.held;
                    stats.produce_batches.fetch_add(1, Ordering::Relaxed);
                    stats.add(part.due.len() as u64, part.bytes);
                    for due in &part.due {
                        local.record_ack(now.saturating_duration_since(*due));
                    }
                }
                (_, Some(leader_moved)) if s.may_retry && part.attempts < ATTEMPTS_MAX => {
                    stats.produce_retries.fetch_add(1, Ordering::Relaxed);
                    stats
                        .produce_retried_records
                        .fetch_add(part.due.len() as u64, Ordering::Relaxed);
                    retries.push(part, leader_moved);
                }
                _ => {
                    released += part.held;
                    stats.error(code, part.due.len() as u64)
                }
            }
        }
        local.merge_into(stats, false);
        answered(released);
    }
    // The connection ended with requests unanswered: their records are lost, not left out.
    let unanswered: Vec<Sent> = sent.0.lock().expect("pipe lock").drain(..).collect();
    sent.1.notify_all();
    for s in unanswered {
        let lost: usize = s.parts.iter().map(|p| p.due.len()).sum();
        if lost > 0 {
            stats.error(-1, lost as u64);
        }
        buffer.answered(held_bytes(&s.parts));
    }
    local.merge_into(stats, true);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_retriable_produce_errors_are_retried_and_others_are_not() {
        assert_eq!(retriable(NOT_LEADER_OR_FOLLOWER), Some(true));
        assert_eq!(retriable(UNKNOWN_TOPIC_OR_PARTITION), Some(true));
        assert_eq!(retriable(REQUEST_TIMED_OUT), Some(false));
        assert_eq!(retriable(NOT_ENOUGH_REPLICAS), Some(false));
        // MESSAGE_TOO_LARGE, CORRUPT_MESSAGE, INVALID_RECORD, TOPIC_AUTHORIZATION_FAILED.
        for code in [10, 2, 87, 29] {
            assert_eq!(retriable(code), None, "{code}");
        }
    }
}
