//! Idempotent producer state of one partition, as Kafka keeps it.
//!
//! For each producer id: its epoch and its last five batches' sequence ranges with the offsets
//! they got. A retried batch that matches one of them is a duplicate: it is acknowledged with
//! the original offsets and not written again. A batch whose first sequence does not follow the
//! last one is refused with OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch with
//! INVALID_PRODUCER_EPOCH. A producer the partition has no state for may start at any sequence.
//!
//! Batches are recorded when queued, before their offsets are known, so a pipelined producer's
//! next batch is checked against the one still being written; the offsets are filled in when
//! the write completes. The table is snapshotted with each recovery point (`producer-state`)
//! and rebuilt on open from the snapshot plus the batch headers after it.
//!
//! Lives on: the shard that owns the partition.

use crate::batch::BatchHeader;
use crate::sync::Notify;
use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

/// Batches remembered per producer (Kafka's NUM_BATCHES_TO_RETAIN).
pub const BATCHES_RETAINED: usize = 5;
/// Producers remembered per partition; the least recently seen is forgotten beyond it.
pub const PRODUCERS_MAX: usize = 100_000;
/// A producer not seen for this long is forgotten (`producer.id.expiration.ms`).
pub const PRODUCER_EXPIRATION_MS: i64 = 86_400_000;

/// Offsets a recorded batch got, once its write completed.
#[derive(Default)]
pub struct OffsetSlot {
    offsets: Cell<Option<(i64, i64)>>,
    failed: Cell<bool>,
    filled: Notify,
}

impl OffsetSlot {
    fn known(base: i64, last: i64) -> Rc<OffsetSlot> {
        let slot = Rc::new(OffsetSlot::default());
        slot.offsets.set(Some((base, last)));
        slot
    }

    pub fn set(&self, base: i64, last: i64) {
        self.offsets.set(Some((base, last)));
        self.filled.notify_all();
    }

    pub fn fail(&self) {
        self.failed.set(true);
        self.filled.notify_all();
    }

    /// The offsets of the original batch, once written; `None` if its write failed.
    pub async fn wait(&self) -> Option<(i64, i64)> {
        loop {
            let seen = self.filled.generation();
            if let Some(o) = self.offsets.get() {
                return Some(o);
            }
            if self.failed.get() {
                return None;
            }
            self.filled.wait_past(seen).await;
        }
    }
}

#[derive(Clone)]
struct BatchRecord {
    first_seq: i32,
    last_seq: i32,
    slot: Rc<OffsetSlot>,
}

struct ProducerEntry {
    epoch: i16,
    batches: VecDeque<BatchRecord>,
    last_seen_ms: i64,
}

/// What to do with a batch from an idempotent producer.
pub enum SequenceCheck {
    /// Write it.
    Append,
    /// Already written (or being written): answer with these offsets.
    Duplicate(Rc<OffsetSlot>),
    OutOfOrder {
        expected: i32,
        got: i32,
    },
    StaleEpoch {
        current: i16,
        got: i16,
    },
}

#[derive(Default)]
pub struct ProducerTable {
    producers: HashMap<i64, ProducerEntry>,
}

fn follows(last: i32, next: i32) -> bool {
    next == last.wrapping_add(1) || (last == i32::MAX && next == 0)
}

impl ProducerTable {
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    pub fn check(&self, h: &BatchHeader) -> SequenceCheck {
        let Some(entry) = self.producers.get(&h.producer_id) else {
            return SequenceCheck::Append;
        };
        if h.producer_epoch < entry.epoch {
            return SequenceCheck::StaleEpoch {
                current: entry.epoch,
                got: h.producer_epoch,
            };
        }
        if h.producer_epoch > entry.epoch {
            // A new epoch starts its sequences over.
            return if h.base_sequence == 0 {
                SequenceCheck::Append
            } else {
                SequenceCheck::OutOfOrder {
                    expected: 0,
                    got: h.base_sequence,
                }
            };
        }
        let last_seq = h.last_sequence();
        if let Some(dup) = entry
            .batches
            .iter()
            .find(|b| b.first_seq == h.base_sequence && b.last_seq == last_seq)
        {
            return SequenceCheck::Duplicate(dup.slot.clone());
        }
        match entry.batches.back() {
            Some(latest) if !follows(latest.last_seq, h.base_sequence) => {
                SequenceCheck::OutOfOrder {
                    expected: latest.last_seq.wrapping_add(1),
                    got: h.base_sequence,
                }
            }
            _ => SequenceCheck::Append,
        }
    }

    /// Records a batch that passed `check` and is about to be queued.
    pub fn record(&mut self, h: &BatchHeader, now_ms: i64) -> Rc<OffsetSlot> {
        let slot = Rc::new(OffsetSlot::default());
        self.insert(h, slot.clone(), now_ms);
        slot
    }

    fn insert(&mut self, h: &BatchHeader, slot: Rc<OffsetSlot>, now_ms: i64) {
        if !self.producers.contains_key(&h.producer_id) && self.producers.len() >= PRODUCERS_MAX {
            self.forget_least_recent();
        }
        let entry = self
            .producers
            .entry(h.producer_id)
            .or_insert_with(|| ProducerEntry {
                epoch: h.producer_epoch,
                batches: VecDeque::new(),
                last_seen_ms: now_ms,
            });
        if h.producer_epoch != entry.epoch {
            entry.epoch = h.producer_epoch;
            entry.batches.clear();
        }
        if entry.batches.len() == BATCHES_RETAINED {
            entry.batches.pop_front();
        }
        entry.batches.push_back(BatchRecord {
            first_seq: h.base_sequence,
            last_seq: h.last_sequence(),
            slot,
        });
        entry.last_seen_ms = now_ms;
    }

    /// A queued batch failed to be written: the producer's state can no longer be trusted, so
    /// it is forgotten and the producer's retry is accepted as from a new producer.
    pub fn forget(&mut self, producer_id: i64) {
        self.producers.remove(&producer_id);
    }

    fn forget_least_recent(&mut self) {
        if let Some((&pid, _)) = self.producers.iter().min_by_key(|(_, e)| e.last_seen_ms) {
            self.producers.remove(&pid);
        }
    }

    /// Rebuilds state from a batch header found in the log (on open, after the snapshot).
    pub fn replay(&mut self, h: &BatchHeader, now_ms: i64) {
        if h.producer_id < 0 {
            return;
        }
        self.insert(h, OffsetSlot::known(h.base_offset, h.last_offset()), now_ms);
    }

    pub fn expire(&mut self, now_ms: i64) {
        self.producers
            .retain(|_, e| now_ms.saturating_sub(e.last_seen_ms) < PRODUCER_EXPIRATION_MS);
    }

    /// Text snapshot of the batches written below `below` (pending ones are left out; they are
    /// replayed from the log on the next open).
    pub fn encode(&self, below: i64) -> Vec<u8> {
        let mut out = format!("0\n{below}\n");
        for (pid, e) in &self.producers {
            let written: Vec<(i32, i32, i64, i64)> = e
                .batches
                .iter()
                .filter_map(|b| {
                    let (base, last) = b.slot.offsets.get()?;
                    (last < below).then_some((b.first_seq, b.last_seq, base, last))
                })
                .collect();
            if written.is_empty() {
                continue;
            }
            out.push_str(&format!(
                "{pid} {} {} {}",
                e.epoch,
                e.last_seen_ms,
                written.len()
            ));
            for (f, l, b, o) in written {
                out.push_str(&format!(" {f} {l} {b} {o}"));
            }
            out.push('\n');
        }
        out.into_bytes()
    }

    /// Parses a snapshot; returns the table and the offset it covers.
    pub fn decode(bytes: &[u8]) -> Option<(ProducerTable, i64)> {
        let text = std::str::from_utf8(bytes).ok()?;
        let mut lines = text.lines();
        if lines.next()? != "0" {
            return None;
        }
        let below: i64 = lines.next()?.trim().parse().ok()?;
        let mut table = ProducerTable::default();
        for line in lines {
            let f: Vec<i64> = line
                .split_whitespace()
                .map(|x| x.parse().ok())
                .collect::<Option<_>>()?;
            let [pid, epoch, last_seen, n, rest @ ..] = f.as_slice() else {
                return None;
            };
            if rest.len() != (*n as usize) * 4 {
                return None;
            }
            let mut batches = VecDeque::new();
            for b in rest.chunks_exact(4) {
                batches.push_back(BatchRecord {
                    first_seq: b[0] as i32,
                    last_seq: b[1] as i32,
                    slot: OffsetSlot::known(b[2], b[3]),
                });
            }
            table.producers.insert(
                *pid,
                ProducerEntry {
                    epoch: *epoch as i16,
                    batches,
                    last_seen_ms: *last_seen,
                },
            );
        }
        Some((table, below))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(pid: i64, epoch: i16, seq: i32, records: i32) -> BatchHeader {
        BatchHeader {
            base_offset: 0,
            batch_length: 0,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes: 0,
            last_offset_delta: records - 1,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            record_count: records,
        }
    }

    #[test]
    fn sequences_duplicates_gaps_and_epochs() {
        let mut t = ProducerTable::default();
        let a = header(7, 0, 0, 5);
        assert!(
            matches!(t.check(&a), SequenceCheck::Append),
            "no state: any start"
        );
        t.record(&a, 1).set(0, 4);
        assert!(matches!(t.check(&a), SequenceCheck::Duplicate(_)));
        assert!(matches!(
            t.check(&header(7, 0, 6, 1)),
            SequenceCheck::OutOfOrder {
                expected: 5,
                got: 6
            }
        ));
        let b = header(7, 0, 5, 2);
        assert!(matches!(t.check(&b), SequenceCheck::Append));
        t.record(&b, 2);
        assert!(
            matches!(t.check(&header(7, 0, 7, 1)), SequenceCheck::Append),
            "follows a pending batch"
        );
        assert!(matches!(
            t.check(&header(7, 1, 3, 1)),
            SequenceCheck::OutOfOrder { .. }
        ));
        assert!(matches!(
            t.check(&header(7, 1, 0, 1)),
            SequenceCheck::Append
        ));
        t.record(&header(7, 1, 0, 1), 3);
        assert!(matches!(
            t.check(&header(7, 0, 7, 1)),
            SequenceCheck::StaleEpoch { .. }
        ));
    }

    #[test]
    fn sequences_wrap_at_int_max() {
        let mut t = ProducerTable::default();
        let h = header(1, 0, i32::MAX, 1);
        t.record(&h, 0);
        assert!(matches!(
            t.check(&header(1, 0, 0, 1)),
            SequenceCheck::Append
        ));
    }

    #[test]
    fn only_five_batches_are_remembered() {
        let mut t = ProducerTable::default();
        for i in 0..7 {
            t.record(&header(3, 0, i, 1), 0).set(i as i64, i as i64);
        }
        assert!(matches!(
            t.check(&header(3, 0, 6, 1)),
            SequenceCheck::Duplicate(_)
        ));
        assert!(matches!(
            t.check(&header(3, 0, 1, 1)),
            SequenceCheck::OutOfOrder { .. }
        ));
    }

    #[test]
    fn snapshot_round_trips_written_batches_only() {
        let mut t = ProducerTable::default();
        t.record(&header(9, 2, 0, 3), 100).set(10, 12);
        t.record(&header(9, 2, 3, 1), 100); // still pending
        let bytes = t.encode(13);
        let (back, below) = ProducerTable::decode(&bytes).unwrap();
        assert_eq!(below, 13);
        assert!(matches!(
            back.check(&header(9, 2, 0, 3)),
            SequenceCheck::Duplicate(_)
        ));
        assert!(matches!(
            back.check(&header(9, 2, 3, 1)),
            SequenceCheck::Append
        ));
        assert!(ProducerTable::decode(b"0\n5\n1 2 3 2 0 0 0\n").is_none());
    }
}
