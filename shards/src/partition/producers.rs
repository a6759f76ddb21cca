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
//! Transactions (KIP-98): a producer's first transactional batch opens its transaction here and
//! its marker ends it. The table knows, in queue order, whether a producer's transaction is open
//! (the log knows where it starts, in written order). A transactional batch may open one only
//! with a verification guard (KIP-890): the produce path asks the transaction coordinator
//! whether this partition is in the producer's transaction and takes a guard first; any append
//! of the producer (a marker above all) clears it, so a batch verified before its transaction
//! ended cannot open a transaction nobody will close. Producers with an open transaction are
//! never expired. Markers carry the coordinator's epoch; one from an older coordinator is
//! refused (TRANSACTION_COORDINATOR_FENCED).
//!
//! Lives on: the shard that owns the partition.

use crate::batch::control::MarkerRecord;
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
    /// Epoch of the transaction coordinator that wrote this producer's last marker; -1 before.
    coordinator_epoch: i32,
    /// A transactional batch of this producer is in the log or queued, and no marker after it.
    txn_open: bool,
}

impl ProducerEntry {
    fn new(epoch: i16, now_ms: i64) -> ProducerEntry {
        ProducerEntry {
            epoch,
            batches: VecDeque::new(),
            last_seen_ms: now_ms,
            coordinator_epoch: -1,
            txn_open: false,
        }
    }
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

/// Why a batch may not be part of (or outside) a transaction.
#[derive(Debug, PartialEq, Eq)]
pub enum TxnRefusal {
    /// A transactional batch with no open transaction and no valid verification guard, or a
    /// plain batch while the producer's transaction is open: INVALID_TXN_STATE.
    InvalidTxnState,
}

/// Why a marker may not be written.
#[derive(Debug, PartialEq, Eq)]
pub enum MarkerRefusal {
    /// The producer has a newer epoch: INVALID_PRODUCER_EPOCH.
    StaleEpoch { current: i16 },
    /// A newer coordinator wrote this producer's last marker: TRANSACTION_COORDINATOR_FENCED.
    CoordinatorFenced { current: i32 },
}

#[derive(Default)]
pub struct ProducerTable {
    producers: HashMap<i64, ProducerEntry>,
    /// Verification guards handed out (KIP-890), with when: producer id → (guard, ms).
    guards: HashMap<i64, (u64, i64)>,
    next_guard: u64,
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
            .or_insert_with(|| ProducerEntry::new(h.producer_epoch, now_ms));
        self.guards.remove(&h.producer_id);
        if h.is_transactional() {
            entry.txn_open = true;
        }
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

    /// Producers with an open transaction are kept: forgetting one would lose where its
    /// transaction stands.
    fn forget_least_recent(&mut self) {
        let least = self
            .producers
            .iter()
            .filter(|(_, e)| !e.txn_open)
            .min_by_key(|(_, e)| e.last_seen_ms);
        if let Some((&pid, _)) = least {
            self.producers.remove(&pid);
        }
    }

    /// Whether a transactional batch of the producer needs a verification guard to be taken:
    /// true unless its transaction is already open here.
    pub fn needs_verification(&self, producer_id: i64) -> bool {
        !self.producers.get(&producer_id).is_some_and(|e| e.txn_open)
    }

    /// The producer's verification guard: the one already handed out if there is one (several
    /// of its requests may be verified at once, as Kafka's `maybeCreateVerificationStateEntry`
    /// shares one entry), else a new one.
    pub fn start_verification(&mut self, producer_id: i64, now_ms: i64) -> u64 {
        let next = self.next_guard + 1;
        let guard = self.guards.entry(producer_id).or_insert((next, now_ms));
        guard.1 = now_ms;
        if guard.0 == next {
            self.next_guard = next;
        }
        guard.0
    }

    /// Kafka's transaction checks of a data batch (`ProducerAppendInfo.appendDataBatch` and the
    /// KIP-890 guard check in `UnifiedLog`), before its sequence is checked.
    pub fn check_transaction(&self, h: &BatchHeader, guard: Option<u64>) -> Result<(), TxnRefusal> {
        let open = self
            .producers
            .get(&h.producer_id)
            .is_some_and(|e| e.txn_open);
        if h.is_transactional() {
            let guarded = guard.is_some() && self.guards.get(&h.producer_id).map(|g| g.0) == guard;
            if !open && !guarded {
                return Err(TxnRefusal::InvalidTxnState);
            }
        } else if open {
            return Err(TxnRefusal::InvalidTxnState);
        }
        Ok(())
    }

    /// A transactional batch the group coordinator writes for the producer (its offsets in a
    /// transaction, KIP-98's COORDINATOR origin): the epoch is checked, sequences are not (each
    /// such batch starts at 0), and the producer's transaction is open afterwards.
    /// Err holds the producer's current epoch when the batch's is older.
    pub fn check_coordinator_batch(&self, h: &BatchHeader) -> Result<(), i16> {
        match self.producers.get(&h.producer_id) {
            Some(e) if h.producer_epoch < e.epoch => Err(e.epoch),
            _ => Ok(()),
        }
    }

    /// Records a coordinator batch that passed `check_coordinator_batch` and `check_transaction`.
    pub fn record_coordinator_batch(&mut self, h: &BatchHeader, now_ms: i64) {
        if !self.producers.contains_key(&h.producer_id) && self.producers.len() >= PRODUCERS_MAX {
            self.forget_least_recent();
        }
        self.guards.remove(&h.producer_id);
        let e = self
            .producers
            .entry(h.producer_id)
            .or_insert_with(|| ProducerEntry::new(h.producer_epoch, now_ms));
        if h.producer_epoch != e.epoch {
            e.epoch = h.producer_epoch;
            e.batches.clear();
        }
        e.txn_open = true;
        e.last_seen_ms = now_ms;
    }

    /// Whether a marker from a coordinator at `coordinator_epoch` may end the producer's
    /// transaction at `epoch` (`ProducerAppendInfo.appendEndTxnMarker`).
    pub fn check_marker(
        &self,
        producer_id: i64,
        epoch: i16,
        coordinator_epoch: i32,
    ) -> Result<(), MarkerRefusal> {
        let Some(e) = self.producers.get(&producer_id) else {
            return Ok(());
        };
        if epoch < e.epoch {
            return Err(MarkerRefusal::StaleEpoch { current: e.epoch });
        }
        if coordinator_epoch < e.coordinator_epoch {
            return Err(MarkerRefusal::CoordinatorFenced {
                current: e.coordinator_epoch,
            });
        }
        Ok(())
    }

    /// Records a marker that passed `check_marker` (or was found in the log): the transaction
    /// ends; a higher epoch (a fenced or timed-out producer) starts the sequences over.
    pub fn record_marker(
        &mut self,
        producer_id: i64,
        epoch: i16,
        coordinator_epoch: i32,
        now_ms: i64,
    ) {
        if !self.producers.contains_key(&producer_id) && self.producers.len() >= PRODUCERS_MAX {
            self.forget_least_recent();
        }
        self.guards.remove(&producer_id);
        let e = self
            .producers
            .entry(producer_id)
            .or_insert_with(|| ProducerEntry::new(epoch, now_ms));
        if epoch != e.epoch {
            e.epoch = epoch;
            e.batches.clear();
        }
        e.coordinator_epoch = coordinator_epoch;
        e.txn_open = false;
        e.last_seen_ms = now_ms;
    }

    /// Rebuilds state from a batch found in the log (on open, after the snapshot); `marker` is
    /// what a control batch says.
    pub fn replay(&mut self, h: &BatchHeader, marker: Option<MarkerRecord>, now_ms: i64) {
        if h.producer_id < 0 {
            return;
        }
        if h.is_control() {
            if let Some(m) = marker {
                self.record_marker(h.producer_id, h.producer_epoch, m.coordinator_epoch, now_ms);
            }
            return;
        }
        self.insert(h, OffsetSlot::known(h.base_offset, h.last_offset()), now_ms);
    }

    pub fn expire(&mut self, now_ms: i64) {
        let live = |seen: i64| now_ms.saturating_sub(seen) < PRODUCER_EXPIRATION_MS;
        self.producers
            .retain(|_, e| e.txn_open || live(e.last_seen_ms));
        self.guards.retain(|_, g| live(g.1));
    }

    /// Marks the producers the log holds an open transaction for (after a snapshot's decode).
    pub fn open_transactions(&mut self, open: &[(i64, i64)], now_ms: i64) {
        for &(pid, _) in open {
            self.producers
                .entry(pid)
                .or_insert_with(|| ProducerEntry::new(-1, now_ms))
                .txn_open = true;
        }
    }

    /// Text snapshot of the batches written below `below` (pending ones are left out; they are
    /// replayed from the log on the next open), with each producer's coordinator epoch and the
    /// first offset of its open transaction (`open`, from the log, as of `below`).
    ///
    /// Format "1": a line `1`, a line `below`, then per producer `pid epoch last_seen_ms
    /// coordinator_epoch txn_first_offset n` and `n` times `first_seq last_seq base last`.
    /// Format "0" (read only) lacks the two transaction fields.
    pub fn encode(&self, below: i64, open: &[(i64, i64)]) -> Vec<u8> {
        let open: HashMap<i64, i64> = open.iter().copied().collect();
        let mut out = format!("1\n{below}\n");
        for (pid, e) in &self.producers {
            let written: Vec<(i32, i32, i64, i64)> = e
                .batches
                .iter()
                .filter_map(|b| {
                    let (base, last) = b.slot.offsets.get()?;
                    (last < below).then_some((b.first_seq, b.last_seq, base, last))
                })
                .collect();
            let txn_first = open.get(pid).copied().unwrap_or(-1);
            if written.is_empty() && e.coordinator_epoch < 0 && txn_first < 0 {
                continue;
            }
            out.push_str(&format!(
                "{pid} {} {} {} {txn_first} {}",
                e.epoch,
                e.last_seen_ms,
                e.coordinator_epoch,
                written.len()
            ));
            for (f, l, b, o) in written {
                out.push_str(&format!(" {f} {l} {b} {o}"));
            }
            out.push('\n');
        }
        out.into_bytes()
    }

    /// Parses a snapshot: the table, the offset it covers, and the transactions open there as
    /// (producer id, first offset).
    pub fn decode(bytes: &[u8]) -> Option<DecodedSnapshot> {
        let text = std::str::from_utf8(bytes).ok()?;
        let mut lines = text.lines();
        let with_txns = match lines.next()? {
            "0" => false,
            "1" => true,
            _ => return None,
        };
        let below: i64 = lines.next()?.trim().parse().ok()?;
        let mut table = ProducerTable::default();
        let mut open = Vec::new();
        for line in lines {
            let f: Vec<i64> = line
                .split_whitespace()
                .map(|x| x.parse().ok())
                .collect::<Option<_>>()?;
            let (pid, epoch, last_seen, coordinator_epoch, txn_first, n, rest) = if with_txns {
                let [pid, epoch, last_seen, ce, tf, n, rest @ ..] = f.as_slice() else {
                    return None;
                };
                (*pid, *epoch, *last_seen, *ce, *tf, *n, rest)
            } else {
                let [pid, epoch, last_seen, n, rest @ ..] = f.as_slice() else {
                    return None;
                };
                (*pid, *epoch, *last_seen, -1, -1, *n, rest)
            };
            if n < 0 || rest.len() != (n as usize) * 4 {
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
            if txn_first >= 0 {
                open.push((pid, txn_first));
            }
            table.producers.insert(
                pid,
                ProducerEntry {
                    epoch: epoch as i16,
                    batches,
                    last_seen_ms: last_seen,
                    coordinator_epoch: coordinator_epoch as i32,
                    txn_open: txn_first >= 0,
                },
            );
        }
        Some(DecodedSnapshot { table, below, open })
    }
}

/// A producer as DescribeProducers shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerSummary {
    pub producer_id: i64,
    pub epoch: i16,
    /// The last sequence of its newest batch, -1 if none is remembered.
    pub last_sequence: i32,
    /// When it last appended here (broker time: the table does not keep batch timestamps).
    pub last_seen_ms: i64,
    pub coordinator_epoch: i32,
}

impl ProducerTable {
    /// Every producer the partition remembers.
    pub fn summaries(&self) -> Vec<ProducerSummary> {
        let mut out: Vec<ProducerSummary> = self
            .producers
            .iter()
            .map(|(&producer_id, e)| ProducerSummary {
                producer_id,
                epoch: e.epoch,
                last_sequence: e.batches.back().map_or(-1, |b| b.last_seq),
                last_seen_ms: e.last_seen_ms,
                coordinator_epoch: e.coordinator_epoch,
            })
            .collect();
        out.sort_by_key(|p| p.producer_id);
        out
    }
}

/// What a producer snapshot holds.
pub struct DecodedSnapshot {
    pub table: ProducerTable,
    /// The log offset the snapshot covers.
    pub below: i64,
    /// Transactions open at `below`: (producer id, first offset).
    pub open: Vec<(i64, i64)>,
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
        let bytes = t.encode(13, &[]);
        let DecodedSnapshot {
            table: back, below, ..
        } = ProducerTable::decode(&bytes).unwrap();
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
