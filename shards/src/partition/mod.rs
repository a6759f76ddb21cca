//! A partition replica as its owner shard holds it: the log, the high watermark, the leader
//! epoch, and idempotent producer state.
//!
//! Lives on: the shard that owns the partition (see the placement table); other shards reach
//! it through the router. Nothing here is `Send`.

mod isr_change;
pub mod producers;
pub mod replication;

use crate::batch::control::{self, MarkerRecord};
use crate::batch::BatchOrigin;
use crate::error::{Error, Result};
use crate::log::AbortedTxn;
use crate::log::{AppendInfo, CleanOutcome, CleanerBudget, Log, LogOptions, ReadResult};
use crate::sync::Notify;
use crate::types::now_ms;
use crate::uring;
use bytes::Bytes;
use producers::{
    DecodedSnapshot, MarkerRefusal, OffsetSlot, ProducerTable, SequenceCheck, TxnRefusal,
};
use std::cell::{Cell, RefCell};
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

const PRODUCER_SNAPSHOT_FILE: &str = "producer-state";

pub struct Partition {
    topic: Arc<str>,
    index: i32,
    log: Log,
    /// Consumers read below it. On a single broker it follows the log end as writes complete.
    high_watermark: Cell<i64>,
    leader_epoch: Cell<i32>,
    producers: RefCell<ProducerTable>,
    /// Wakes long-polling fetches when the high watermark moves.
    hw_moved: Notify,
    /// The producer snapshot on disk covers the log below this offset; compaction stays below
    /// it, so rebuilding producer state never needs a batch the cleaner removed.
    snapshot_covers: Cell<i64>,
    replication: replication::Replication,
    /// Set once the metadata has given this partition a role.
    role_known: Cell<bool>,
    /// Wakes followers' long-polling fetches when the log end moves.
    log_grew: Notify,
    /// Per producer, the turns of its transactional appends while one of them is being
    /// verified (see [`Partition::take_turn`]).
    turns: RefCell<std::collections::HashMap<i64, Turns>>,
}

/// A producer's appends in the order they reached the partition: a verification (an await
/// on the coordinator) must not let a later request of the same producer overtake an earlier
/// one, or its sequence would look out of order.
struct Turns {
    next: u64,
    serving: u64,
    turn: Rc<Notify>,
}

impl Default for Turns {
    fn default() -> Turns {
        Turns {
            next: 0,
            serving: 0,
            turn: Rc::new(Notify::new()),
        }
    }
}

impl Partition {
    /// Opens the partition's log in `dir` and rebuilds its producer state.
    pub async fn open(
        dir: &Path,
        topic: Arc<str>,
        index: i32,
        leader_epoch: i32,
        options: LogOptions,
    ) -> Result<Rc<Partition>> {
        let log = Log::open(dir, options).await?;
        let (producers, snapshot_covers) = load_producers(&log).await?;
        let hw = log.log_end_offset();
        log.on_high_watermark(hw);
        let replication = replication::Replication::default();
        replication
            .stored_high_watermark
            .set(replication::load_high_watermark(dir).await);
        Ok(Rc::new(Partition {
            topic,
            index,
            log,
            high_watermark: Cell::new(hw),
            leader_epoch: Cell::new(leader_epoch),
            producers: RefCell::new(producers),
            hw_moved: Notify::new(),
            snapshot_covers: Cell::new(snapshot_covers),
            replication,
            role_known: Cell::new(false),
            log_grew: Notify::new(),
            turns: RefCell::new(std::collections::HashMap::new()),
        }))
    }

    pub fn topic(&self) -> &Arc<str> {
        &self.topic
    }

    pub fn index(&self) -> i32 {
        self.index
    }

    pub fn log(&self) -> &Log {
        &self.log
    }

    pub fn high_watermark(&self) -> i64 {
        self.high_watermark.get()
    }

    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch.get()
    }

    /// A new leadership term: later appends are stamped with `epoch`.
    pub fn set_leader_epoch(&self, epoch: i32) {
        self.leader_epoch.set(epoch);
    }

    pub fn producer_count(&self) -> usize {
        self.producers.borrow().len()
    }

    /// The producers this partition remembers (DescribeProducers), each with the first offset
    /// of its open transaction here, if any.
    pub fn producers(&self) -> Vec<(producers::ProducerSummary, Option<i64>)> {
        self.producers
            .borrow()
            .summaries()
            .into_iter()
            .map(|p| {
                let txn = self.log.open_transaction(p.producer_id);
                (p, txn)
            })
            .collect()
    }

    /// Appends a producer's record set: validation, idempotence, write. A retried duplicate
    /// is answered with the original offsets and not written again.
    pub async fn produce(self: &Rc<Self>, records: &Bytes) -> Result<AppendInfo> {
        self.produce_verified(records, None).await
    }

    /// Whether a transactional batch of `producer_id` must be verified with the transaction
    /// coordinator first (its transaction is not open here yet); see [`start_verification`].
    ///
    /// [`start_verification`]: Partition::start_verification
    pub fn needs_verification(&self, producer_id: i64) -> bool {
        self.producers.borrow().needs_verification(producer_id)
    }

    /// Takes a verification guard before asking the coordinator (KIP-890): the batch is then
    /// appended with [`produce_verified`] only if no append of the producer came in between.
    ///
    /// [`produce_verified`]: Partition::produce_verified
    pub fn start_verification(&self, producer_id: i64) -> u64 {
        self.producers
            .borrow_mut()
            .start_verification(producer_id, now_ms())
    }

    /// A place in line for a transactional append of `producer_id` that must be verified, or
    /// that comes while an earlier one of the producer is: `None` when neither (the append may
    /// go at once). Every turn taken must be ended with [`end_turn`] once its append is done
    /// (or refused), after waiting for it with [`wait_turn`].
    ///
    /// [`end_turn`]: Partition::end_turn
    /// [`wait_turn`]: Partition::wait_turn
    pub fn take_turn(&self, producer_id: i64) -> Option<u64> {
        let mut turns = self.turns.borrow_mut();
        if !turns.contains_key(&producer_id) && !self.needs_verification(producer_id) {
            return None;
        }
        let t = turns.entry(producer_id).or_default();
        t.next += 1;
        Some(t.next - 1)
    }

    /// Waits until every earlier turn of the producer has ended.
    pub async fn wait_turn(&self, producer_id: i64, turn: u64) {
        loop {
            let (notify, seen) = {
                let turns = self.turns.borrow();
                match turns.get(&producer_id) {
                    Some(t) if t.serving < turn => (t.turn.clone(), t.turn.generation()),
                    _ => return,
                }
            };
            notify.wait_past(seen).await;
        }
    }

    /// Ends the producer's current turn; the next one may go.
    pub fn end_turn(&self, producer_id: i64) {
        let mut turns = self.turns.borrow_mut();
        if let Some(t) = turns.get_mut(&producer_id) {
            t.serving += 1;
            t.turn.notify_all();
            if t.serving >= t.next {
                turns.remove(&producer_id);
            }
        }
    }

    /// `produce`, for a record set whose transactional batches were verified under `guard`.
    pub async fn produce_verified(
        self: &Rc<Self>,
        records: &Bytes,
        guard: Option<u64>,
    ) -> Result<AppendInfo> {
        // A follower's log takes only what its leader sends (`append_from_leader`).
        if !self.leads() {
            return Err(Error::NotLeader(self.log.dir().to_path_buf()));
        }
        let now = now_ms();
        let admitted = self.log.admit(records, now)?;
        let batches = admitted.batches;
        let mut recorded: Vec<(i64, Rc<OffsetSlot>)> = Vec::new();
        let mut duplicate = None;
        {
            let mut table = self.producers.borrow_mut();
            for b in &batches {
                let h = &b.header;
                if !h.is_idempotent() {
                    continue;
                }
                let refusal = match check_producer_batch(&table, h, guard) {
                    Ok(Accepted::Append) => {
                        recorded.push((h.producer_id, table.record(h, now)));
                        continue;
                    }
                    Ok(Accepted::Duplicate(slot)) => {
                        duplicate = Some(slot);
                        break;
                    }
                    Err(e) => e,
                };
                for (pid, slot) in recorded.drain(..) {
                    slot.fail();
                    table.forget(pid);
                }
                return Err(refusal);
            }
        }
        if let Some(slot) = duplicate {
            let (base_offset, last_offset) = slot.wait().await.ok_or_else(|| {
                Error::Closed(self.log.dir().to_path_buf()) // the original write failed
            })?;
            return Ok(AppendInfo {
                base_offset,
                last_offset,
                log_start_offset: self.log.log_start_offset(),
                log_append_time_ms: admitted.log_append_time_ms,
            });
        }
        // The write and its bookkeeping run in their own task: a caller that goes away (a
        // closed connection) must not leave a queued batch's producer state half updated.
        let (done, result) = futures::channel::oneshot::channel();
        let this = self.clone();
        glommio::spawn_local(async move {
            let outcome = this.append_and_record(batches, recorded).await;
            let _ = done.send(outcome);
        })
        .detach();
        let info = result
            .await
            .map_err(|_| Error::Closed(self.log.dir().to_path_buf()))??;
        Ok(AppendInfo {
            log_append_time_ms: admitted.log_append_time_ms,
            ..info
        })
    }

    async fn append_and_record(
        &self,
        batches: Vec<crate::log::ValidBatch>,
        recorded: Vec<(i64, Rc<OffsetSlot>)>,
    ) -> Result<AppendInfo> {
        let counts: Vec<(i64, bool)> = batches
            .iter()
            .map(|b| (b.header.offset_count(), b.header.is_idempotent()))
            .collect();
        match self.log.append(batches, self.leader_epoch.get()).await {
            Ok(info) => {
                let mut base = info.base_offset;
                let mut slots = recorded.iter();
                for (count, idempotent) in counts {
                    if idempotent {
                        if let Some((_, slot)) = slots.next() {
                            slot.set(base, base + count - 1);
                        }
                    }
                    base += count;
                }
                self.log_grew.notify_all();
                self.recompute_high_watermark();
                Ok(info)
            }
            Err(e) => {
                let mut table = self.producers.borrow_mut();
                for (pid, slot) in recorded {
                    slot.fail();
                    table.forget(pid);
                }
                Err(e)
            }
        }
    }

    /// A follower's append of batches fetched from its leader: offsets and epochs as the
    /// leader wrote them; producer state follows, so this replica can lead next.
    pub async fn append_from_leader(&self, records: &Bytes) -> Result<Option<AppendInfo>> {
        let batches = self.log.validate(records, BatchOrigin::Replica)?;
        if batches.is_empty() {
            return Ok(None);
        }
        let headers: Vec<_> = batches
            .iter()
            .map(|b| (b.header, marker_of(&b.header, &b.bytes)))
            .collect();
        let info = self.log.append_as_follower(batches).await?;
        let now = now_ms();
        let mut table = self.producers.borrow_mut();
        for (h, marker) in &headers {
            table.replay(h, *marker, now);
        }
        Ok(Some(info))
    }

    /// acks=all: waits until the high watermark is past `offset`, written as leader in
    /// `epoch`; false after `timeout`. Losing the leadership (or a new epoch) meanwhile is
    /// `NotLeader`: the record may have been cut by the new leader, so it is not acknowledged.
    pub async fn wait_committed(&self, offset: i64, epoch: i32, timeout: Duration) -> Result<bool> {
        let deposed = || !self.leads() || self.leader_epoch.get() != epoch;
        let woke = wait_until(
            &self.hw_moved,
            || deposed() || self.high_watermark.get() > offset,
            timeout,
        )
        .await;
        if !woke {
            return Ok(false);
        }
        if deposed() {
            return Err(Error::NotLeader(self.log.dir().to_path_buf()));
        }
        Ok(true)
    }

    fn advance_high_watermark(&self, to: i64) {
        if to > self.high_watermark.get() {
            self.high_watermark.set(to);
            self.log.on_high_watermark(to);
            self.hw_moved.notify_all();
        }
    }

    /// The last stable offset: READ_COMMITTED readers read below it. The first offset of a
    /// transaction still open (or whose marker is not yet committed), at most the high
    /// watermark (`UnifiedLog.lastStableOffset`).
    pub fn last_stable_offset(&self) -> i64 {
        let hw = self.high_watermark.get();
        self.log.first_unstable_offset().map_or(hw, |o| o.min(hw))
    }

    /// What a READ_COMMITTED consumer may read from `offset`: whole batches below the last
    /// stable offset, and the aborted transactions among them, for the consumer to drop.
    pub async fn fetch_committed(
        &self,
        offset: i64,
        max_bytes: usize,
    ) -> Result<(ReadResult, Vec<AbortedTxn>)> {
        let read = self
            .log
            .read(offset, max_bytes, self.last_stable_offset())
            .await?;
        let aborted = if read.chunks.is_empty() {
            Vec::new()
        } else {
            self.log.aborted_transactions(offset, read.next_offset)
        };
        Ok((read, aborted))
    }

    /// Waits until the last stable offset passes `offset` or `timeout` elapses; true if it did
    /// (a READ_COMMITTED long poll: the high watermark may be far past an open transaction).
    pub async fn wait_for_stable(&self, offset: i64, timeout: Duration) -> bool {
        wait_until(
            &self.hw_moved,
            || self.last_stable_offset() > offset,
            timeout,
        )
        .await
    }

    /// Appends the group coordinator's transactional batch for a producer (its offsets in a
    /// transaction; `guard` from [`start_verification`] when its transaction is not open here
    /// yet): the transaction and epoch are checked as for a producer, sequences are not.
    ///
    /// [`start_verification`]: Partition::start_verification
    pub async fn append_for_transaction(
        &self,
        batch: Bytes,
        guard: Option<u64>,
    ) -> Result<AppendInfo> {
        if !self.leads() {
            return Err(Error::NotLeader(self.log.dir().to_path_buf()));
        }
        let header = crate::batch::validate(&batch, usize::MAX, BatchOrigin::Client)?;
        {
            let mut table = self.producers.borrow_mut();
            if table.check_transaction(&header, guard).is_err() {
                return Err(Error::InvalidTxnState {
                    producer_id: header.producer_id,
                    reason: "transactional batch not part of an ongoing transaction",
                });
            }
            if let Err(current) = table.check_coordinator_batch(&header) {
                return Err(Error::InvalidProducerEpoch {
                    producer_id: header.producer_id,
                    current,
                    got: header.producer_epoch,
                });
            }
            table.record_coordinator_batch(&header, now_ms());
        }
        let batch = crate::log::ValidBatch {
            bytes: batch,
            header,
        };
        let info = self
            .log
            .append(vec![batch], self.leader_epoch.get())
            .await?;
        self.log_grew.notify_all();
        self.recompute_high_watermark();
        Ok(info)
    }

    /// Writes the marker that ends `producer_id`'s transaction here (the transaction
    /// coordinator's WriteTxnMarkers), as leader; returns its offset once written. Refused
    /// for an epoch older than the producer's (INVALID_PRODUCER_EPOCH) or from an older
    /// coordinator (TRANSACTION_COORDINATOR_FENCED). The caller waits for it to be committed.
    pub async fn append_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        marker: MarkerRecord,
    ) -> Result<i64> {
        if !self.leads() {
            return Err(Error::NotLeader(self.log.dir().to_path_buf()));
        }
        let now = now_ms();
        {
            let mut table = self.producers.borrow_mut();
            match table.check_marker(producer_id, producer_epoch, marker.coordinator_epoch) {
                Ok(()) => {}
                Err(MarkerRefusal::StaleEpoch { current }) => {
                    return Err(Error::InvalidProducerEpoch {
                        producer_id,
                        current,
                        got: producer_epoch,
                    })
                }
                Err(MarkerRefusal::CoordinatorFenced { current }) => {
                    return Err(Error::CoordinatorFenced {
                        producer_id,
                        current,
                        got: marker.coordinator_epoch,
                    })
                }
            }
            // Recorded before the write, in queue order like a data batch: a batch of the
            // producer checked after this sees its transaction closed.
            table.record_marker(producer_id, producer_epoch, marker.coordinator_epoch, now);
        }
        let bytes = control::build_marker(producer_id, producer_epoch, marker, now);
        let header = crate::batch::BatchHeader::parse(&bytes)?;
        let batch = crate::log::ValidBatch { bytes, header };
        let info = self
            .log
            .append(vec![batch], self.leader_epoch.get())
            .await?;
        self.log_grew.notify_all();
        self.recompute_high_watermark();
        Ok(info.base_offset)
    }

    /// The first offset of the producer's open transaction in this partition, if any.
    pub fn open_transaction(&self, producer_id: i64) -> Option<i64> {
        self.log.open_transaction(producer_id)
    }

    /// What a consumer may read from `offset`: whole batches below the high watermark.
    pub async fn fetch(&self, offset: i64, max_bytes: usize) -> Result<ReadResult> {
        self.log
            .read(offset, max_bytes, self.high_watermark.get())
            .await
    }

    /// Waits until the high watermark passes `offset` or `timeout` elapses; true if it did.
    pub async fn wait_for_data(&self, offset: i64, timeout: Duration) -> bool {
        wait_until(
            &self.hw_moved,
            || self.high_watermark.get() > offset,
            timeout,
        )
        .await
    }

    /// Periodic duties: flush and checkpoint when due (then the producer snapshot), retention.
    pub async fn maintain(&self, checkpoint_interval_ms: i64) -> Result<()> {
        if self.log.flush_if_due(checkpoint_interval_ms).await? {
            self.store_producers().await?;
            self.store_high_watermark().await?;
        }
        Ok(())
    }

    /// fdatasync, recovery point, producer snapshot.
    pub async fn checkpoint(&self) -> Result<()> {
        self.log.flush().await?;
        self.store_producers().await
    }

    async fn store_producers(&self) -> Result<()> {
        let covers = self.log.log_end_offset();
        let bytes = {
            let mut table = self.producers.borrow_mut();
            table.expire(now_ms());
            table.encode(covers, &self.log.open_transactions())
        };
        // The snapshot says the replay may start at `covers`: every abort below it must be in
        // a `.txnindex` on disk first.
        self.log.persist_txn_indexes().await?;
        let path = self.log.dir().join(PRODUCER_SNAPSHOT_FILE);
        uring::write_atomically(&path, bytes)
            .await
            .map_err(|e| Error::io("write producer state", &path, e))?;
        self.snapshot_covers.set(covers);
        Ok(())
    }

    /// How far compaction may go: below the last stable offset (what consumers may read, and
    /// nothing of a transaction still open: Kafka's `firstUncleanableDirtyOffset`) and what the
    /// producer snapshot covers.
    fn clean_below(&self) -> i64 {
        self.last_stable_offset().min(self.snapshot_covers.get())
    }

    /// See [`Log::cleaning_priority`].
    pub fn cleaning_priority(&self, now_ms: i64) -> Option<f64> {
        self.log.cleaning_priority(self.clean_below(), now_ms)
    }

    /// One compaction pass, if one is due (see [`Log::clean`]).
    pub async fn clean(&self, budget: &CleanerBudget, now_ms: i64) -> Result<Option<CleanOutcome>> {
        self.log.clean(budget, self.clean_below(), now_ms).await
    }

    /// Rebuilds the idempotent producer table from the snapshot (when it covers no more than
    /// the log) and the batch headers after it; after a truncation.
    pub(crate) async fn reload_producers(&self) -> Result<()> {
        let (table, covers) = load_producers(&self.log).await?;
        *self.producers.borrow_mut() = table;
        self.snapshot_covers.set(covers);
        self.log.on_high_watermark(self.high_watermark.get());
        self.hw_moved.notify_all();
        Ok(())
    }

    /// Flushes, snapshots and closes the log.
    pub async fn close(&self) -> Result<()> {
        self.log.close().await?;
        self.store_producers().await?;
        self.store_high_watermark().await
    }
}

/// The marker of a control batch (`batch` whole, from its base offset).
fn marker_of(h: &crate::batch::BatchHeader, batch: &[u8]) -> Option<MarkerRecord> {
    if !h.is_control() {
        return None;
    }
    control::parse_marker(h, batch.get(crate::batch::HEADER_BYTES..)?)
}

/// What becomes of a producer's batch that passed its checks.
enum Accepted {
    Append,
    /// A retry of a batch written (or being written): answered with its offsets.
    Duplicate(Rc<OffsetSlot>),
}

/// A producer's batch against its transaction and its sequence, or the error Kafka answers
/// (`ProducerAppendInfo`: the transaction checks come first).
fn check_producer_batch(
    table: &ProducerTable,
    h: &crate::batch::BatchHeader,
    guard: Option<u64>,
) -> Result<Accepted> {
    if let Err(TxnRefusal::InvalidTxnState) = table.check_transaction(h, guard) {
        return Err(Error::InvalidTxnState {
            producer_id: h.producer_id,
            reason: if h.is_transactional() {
                "transactional batch not part of an ongoing transaction"
            } else {
                "non-transactional batch while a transaction is open"
            },
        });
    }
    match table.check(h) {
        SequenceCheck::OutOfOrder { expected, got } => Err(Error::OutOfOrderSequence {
            producer_id: h.producer_id,
            expected,
            got,
        }),
        SequenceCheck::StaleEpoch { current, got } => Err(Error::InvalidProducerEpoch {
            producer_id: h.producer_id,
            current,
            got,
        }),
        SequenceCheck::Append => Ok(Accepted::Append),
        SequenceCheck::Duplicate(slot) => Ok(Accepted::Duplicate(slot)),
    }
}

/// Waits (at most `timeout`) until `done` holds, looking again each time `notify` fires.
pub(crate) async fn wait_until(
    notify: &Notify,
    done: impl Fn() -> bool,
    timeout: Duration,
) -> bool {
    let wait = async {
        loop {
            let seen = notify.generation();
            if done() {
                return;
            }
            notify.wait_past(seen).await;
        }
    };
    glommio::timer::timeout(timeout, async {
        wait.await;
        Ok(())
    })
    .await
    .is_ok()
}

/// The producer snapshot, then every batch header after the offset it covers; and that offset.
async fn load_producers(log: &Log) -> Result<(ProducerTable, i64)> {
    let path = log.dir().join(PRODUCER_SNAPSHOT_FILE);
    let snapshot = match uring::File::open_read(&path).await {
        Ok(f) => {
            let size = f.size().map_err(|e| Error::io("stat", &path, e))?;
            let bytes = f
                .read_at(0, size as usize)
                .await
                .map_err(|e| Error::io("read", &path, e))?;
            ProducerTable::decode(&bytes)
        }
        Err(_) => None,
    };
    let end = log.log_end_offset();
    let start = log.log_start_offset();
    let now = now_ms();
    // A damaged `.txnindex` is rebuilt by replaying the whole log.
    let usable =
        |s: &DecodedSnapshot| s.below <= end && s.below >= start && log.txn_indexes_sound();
    let (mut table, from) = match snapshot {
        Some(s) if usable(&s) => {
            log.restart_transactions_at(s.below, &s.open);
            let mut table = s.table;
            table.open_transactions(&s.open, now);
            (table, s.below)
        }
        _ => {
            log.restart_transactions_at(start, &[]);
            (ProducerTable::default(), start)
        }
    };
    log.for_each_header(from, |h, marker| {
        table.replay(h, marker, now);
        log.replay_transaction(h, marker);
    })
    .await?;
    Ok((table, from))
}

#[cfg(test)]
mod replication_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod txn_tests;
