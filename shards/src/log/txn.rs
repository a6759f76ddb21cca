//! Transactions as the log sees them: which are still open (the last stable offset), and the
//! aborted ones, indexed per segment as Kafka's `.txnindex`.
//!
//! Kept in written order: `group::record` calls [`TxnTracker::observe`] for every batch placed
//! in the file, on the leader and on followers alike, and the replay on open calls it for the
//! batches after the producer snapshot. A transaction opens at its producer's first
//! transactional batch and ends at the producer's marker (a control batch); an aborted one
//! leaves an entry in the segment active when its marker was written (`LogSegment.updateTxnIndex`:
//! only aborted transactions are indexed). Readers at READ_COMMITTED stop at the first offset
//! still unstable and learn from the index which of the batches below it to drop.
//!
//! `.txnindex` layout (`AbortedTxn.java`): fixed 34-byte big-endian entries, `version i16 = 0 |
//! producerId i64 | firstOffset i64 | lastOffset i64 (the ABORT marker) | lastStableOffset i64`.
//! A segment without aborted transactions has no file.

use crate::batch::control::{Marker, MarkerRecord};
use crate::batch::BatchHeader;
use crate::error::{Error, Result};
use crate::uring::{self, File, WriteChunk};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

const ENTRY_BYTES: usize = 34;

/// An aborted transaction: its producer, its first and last (marker) offsets, and the last
/// stable offset once it ended, which bounds how far a reader must look for more.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&0i16.to_be_bytes());
        for v in [
            self.producer_id,
            self.first_offset,
            self.last_offset,
            self.last_stable_offset,
        ] {
            out.extend_from_slice(&v.to_be_bytes());
        }
    }

    fn decode(b: &[u8]) -> AbortedTxn {
        let at = |i: usize| i64::from_be_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        AbortedTxn {
            producer_id: at(2),
            first_offset: at(10),
            last_offset: at(18),
            last_stable_offset: at(26),
        }
    }
}

/// One segment's aborted transactions, in marker order, and how much of them is on disk.
#[derive(Default)]
pub(crate) struct TxnIndex {
    pub entries: Vec<AbortedTxn>,
    /// Entries already in the file.
    on_disk: usize,
    /// The file holds entries removed since (truncation): it is rewritten whole.
    rewrite: bool,
}

impl TxnIndex {
    pub fn push(&mut self, entry: AbortedTxn) {
        self.entries.push(entry);
    }

    /// Forgets the transactions whose marker is at or after `offset` (truncation, replay).
    pub fn truncate_from(&mut self, offset: i64) {
        let keep = self.entries.partition_point(|e| e.last_offset < offset);
        if keep < self.entries.len() {
            self.entries.truncate(keep);
            if keep < self.on_disk {
                self.on_disk = keep;
                self.rewrite = true;
            }
        }
    }

    /// Whether the file lacks something.
    pub fn is_dirty(&self) -> bool {
        self.rewrite || self.on_disk < self.entries.len()
    }

    /// What the file lacks: the entries to write from which entry on, and whether the file is
    /// rewritten from the start; `None` when it lacks nothing.
    fn unwritten(&self) -> Option<UnwrittenEntries> {
        if !self.is_dirty() {
            return None;
        }
        let from = if self.rewrite { 0 } else { self.on_disk };
        let mut bytes = Vec::with_capacity((self.entries.len() - from) * ENTRY_BYTES);
        for e in &self.entries[from..] {
            e.encode(&mut bytes);
        }
        Some(UnwrittenEntries {
            from,
            bytes,
            count: self.entries.len(),
            rewrite: self.rewrite,
        })
    }

    /// `written` reached the file (entries pushed meanwhile are still unwritten).
    fn mark_written(&mut self, written: &UnwrittenEntries) {
        self.on_disk = written.count.min(self.entries.len());
        self.rewrite = false;
    }

    /// Writes what the file lacks, durable.
    pub async fn persist(&mut self, path: &Path) -> Result<()> {
        if let Some(w) = self.unwritten() {
            w.write(path).await?;
            self.mark_written(&w);
        }
        Ok(())
    }

    /// Writes the whole index to `path` (a cleaned segment's, even when empty: the swap renames
    /// it over the old one), durable.
    pub async fn write_whole(&mut self, path: &Path) -> Result<()> {
        let file = File::open(path, libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC, 0o644)
            .await
            .map_err(|e| Error::io("create", path, e))?;
        self.on_disk = 0;
        self.rewrite = false;
        if !self.entries.is_empty() {
            drop(file);
            return self.persist(path).await;
        }
        file.fdatasync()
            .await
            .map_err(|e| Error::io("fdatasync", path, e))
    }

    /// Reads a segment's index; `None` when the file is damaged (a partial entry, an entry
    /// before the segment or out of order): Kafka's `sanityCheck` fails then, and the caller
    /// rebuilds the index from the log.
    pub async fn load(path: &Path, base_offset: i64) -> Option<TxnIndex> {
        let Ok(file) = uring::File::open_read(path).await else {
            return Some(TxnIndex::default());
        };
        let size = file.size().ok()? as usize;
        let bytes = file.read_at(0, size).await.ok()?;
        if bytes.len() != size || size % ENTRY_BYTES != 0 {
            return None;
        }
        let entries: Vec<AbortedTxn> = bytes
            .chunks_exact(ENTRY_BYTES)
            .map(AbortedTxn::decode)
            .collect();
        let ordered = entries
            .windows(2)
            .all(|w| w[0].last_offset < w[1].last_offset);
        let inside = entries
            .iter()
            .all(|e| e.last_offset >= base_offset && e.first_offset <= e.last_offset);
        (ordered && inside).then_some(TxnIndex {
            on_disk: entries.len(),
            entries,
            rewrite: false,
        })
    }
}

struct UnwrittenEntries {
    from: usize,
    bytes: Vec<u8>,
    count: usize,
    rewrite: bool,
}

impl UnwrittenEntries {
    async fn write(&self, path: &Path) -> Result<()> {
        let file = File::open(path, libc::O_RDWR | libc::O_CREAT, 0o644)
            .await
            .map_err(|e| Error::io("open", path, e))?;
        if self.rewrite {
            file.truncate(0)
                .await
                .map_err(|e| Error::io("truncate", path, e))?;
        }
        if !self.bytes.is_empty() {
            let at = (self.from * ENTRY_BYTES) as u64;
            file.write_all_at(at, vec![WriteChunk::Owned(self.bytes.clone())])
                .await
                .map_err(|e| Error::io("write", path, e))?;
        }
        file.fdatasync()
            .await
            .map_err(|e| Error::io("fdatasync", path, e))
    }
}

/// The transactions open in the log, and those ended by a marker not yet below the high
/// watermark (a new leader might not have that marker, so they are not stable yet).
#[derive(Default, Debug)]
pub(crate) struct TxnTracker {
    /// First offset → producer id, of every open transaction.
    ongoing: BTreeMap<i64, i64>,
    /// Producer id → first offset of its open transaction.
    open_by_producer: HashMap<i64, i64>,
    /// First offset → marker offset, of transactions whose marker is at or above the high
    /// watermark.
    unreplicated: BTreeMap<i64, i64>,
}

impl TxnTracker {
    /// Accounts for a batch in the log; an aborted transaction it ends is returned, for the
    /// index of the segment the marker is in.
    pub fn observe(&mut self, h: &BatchHeader, marker: Option<MarkerRecord>) -> Option<AbortedTxn> {
        // Kafka keeps producer state only for batches with a producer id.
        if !h.is_transactional() || h.producer_id < 0 {
            return None;
        }
        if !h.is_control() {
            self.open_by_producer
                .entry(h.producer_id)
                .or_insert_with(|| {
                    self.ongoing.insert(h.base_offset, h.producer_id);
                    h.base_offset
                });
            return None;
        }
        let marker = marker?;
        let first = self.open_by_producer.remove(&h.producer_id)?;
        self.ongoing.remove(&first);
        self.unreplicated.insert(first, h.base_offset);
        (marker.marker == Marker::Abort).then(|| AbortedTxn {
            producer_id: h.producer_id,
            first_offset: first,
            last_offset: h.base_offset,
            // `ProducerStateManager.lastStableOffset`: the first offset of another producer's
            // open transaction, else just past this marker.
            last_stable_offset: self
                .ongoing
                .keys()
                .next()
                .copied()
                .unwrap_or(h.base_offset + 1),
        })
    }

    /// A transaction the producer snapshot says was open at the offset it covers.
    pub fn seed(&mut self, producer_id: i64, first_offset: i64) {
        self.open_by_producer.insert(producer_id, first_offset);
        self.ongoing.insert(first_offset, producer_id);
    }

    pub fn clear(&mut self) {
        *self = TxnTracker::default();
    }

    /// The first offset of the producer's open transaction.
    pub fn open_transaction(&self, producer_id: i64) -> Option<i64> {
        self.open_by_producer.get(&producer_id).copied()
    }

    /// Every open transaction as (producer id, first offset).
    pub fn open_transactions(&self) -> Vec<(i64, i64)> {
        self.ongoing
            .iter()
            .map(|(&first, &pid)| (pid, first))
            .collect()
    }

    /// The first offset a READ_COMMITTED reader may not pass yet, if any.
    pub fn first_unstable(&self) -> Option<i64> {
        let ongoing = self.ongoing.keys().next().copied();
        let unreplicated = self.unreplicated.keys().next().copied();
        match (ongoing, unreplicated) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The high watermark reached `hw`: transactions whose marker is below it are stable.
    pub fn on_high_watermark(&mut self, hw: i64) {
        self.unreplicated.retain(|_, marker| *marker >= hw);
    }
}

impl super::Log {
    /// The first offset a READ_COMMITTED reader may not read yet (an open transaction's first
    /// batch, or one whose marker is not yet below the high watermark), never below the log
    /// start; `None` when every transaction in the log is complete.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        let st = self.inner.state.borrow();
        st.txns.first_unstable().map(|o| o.max(st.start_offset))
    }

    /// The high watermark moved to `hw` (see [`TxnTracker::on_high_watermark`]).
    pub fn on_high_watermark(&self, hw: i64) {
        self.inner.state.borrow_mut().txns.on_high_watermark(hw);
    }

    /// The first offset of the producer's open transaction in this log.
    pub fn open_transaction(&self, producer_id: i64) -> Option<i64> {
        self.inner.state.borrow().txns.open_transaction(producer_id)
    }

    /// Every open transaction as (producer id, first offset), oldest first.
    pub fn open_transactions(&self) -> Vec<(i64, i64)> {
        self.inner.state.borrow().txns.open_transactions()
    }

    /// The aborted transactions a read of `[from, upper)` must be told about: those ending at
    /// or after `from` and starting before `upper` (`LocalLog.collectAbortedTransactions`).
    /// The walk stops at the first entry whose last stable offset reaches `upper`: no
    /// transaction that starts before `upper` can be indexed after it.
    pub fn aborted_transactions(&self, from: i64, upper: i64) -> Vec<AbortedTxn> {
        let st = self.inner.state.borrow();
        let first = st.segments.partition_point(|s| s.next_offset <= from);
        let mut out = Vec::new();
        for s in &st.segments[first..] {
            for e in &s.txn_index.entries {
                if e.last_offset >= from && e.first_offset < upper {
                    out.push(*e);
                }
                if e.last_stable_offset >= upper {
                    return out;
                }
            }
        }
        out
    }

    /// Whether every `.txnindex` read on open was sound; when not, the caller replays the whole
    /// log (`restart_transactions_at(log start, [])`).
    pub fn txn_indexes_sound(&self) -> bool {
        self.inner.state.borrow().txn_indexes_sound
    }

    /// Before replaying the log from `from` (open, truncation): forgets what the replay will
    /// find again — open transactions and index entries whose marker is at or after `from` —
    /// and takes `open` (from the producer snapshot) as the transactions open at `from`.
    pub fn restart_transactions_at(&self, from: i64, open: &[(i64, i64)]) {
        let mut st = self.inner.state.borrow_mut();
        st.txns.clear();
        for &(pid, first) in open {
            st.txns.seed(pid, first);
        }
        for s in &mut st.segments {
            s.txn_index.truncate_from(from);
        }
        st.txn_indexes_sound = true;
    }

    /// Accounts for a batch found by the replay after [`restart_transactions_at`].
    ///
    /// [`restart_transactions_at`]: super::Log::restart_transactions_at
    pub fn replay_transaction(&self, h: &BatchHeader, marker: Option<MarkerRecord>) {
        let mut st = self.inner.state.borrow_mut();
        let st = &mut *st;
        if let Some(aborted) = st.txns.observe(h, marker) {
            let at = st
                .segments
                .partition_point(|s| s.base_offset <= h.base_offset)
                .saturating_sub(1);
            st.segments[at].txn_index.push(aborted);
        }
    }

    /// Writes the index entries not yet on disk, durable. The producer snapshot is written
    /// after this: a snapshot covering an abort marker implies its entry is on disk, since the
    /// replay after that snapshot will not find the marker again.
    pub async fn persist_txn_indexes(&self) -> Result<()> {
        let inner = &self.inner;
        // Truncation (which rewrites indexes) holds the flush lock too.
        let Ok(_flush) = inner.flush_lock.acquire_permit(1).await else {
            return Err(Error::Closed(inner.dir.clone()));
        };
        let dirty: Vec<u64> = {
            let st = inner.state.borrow();
            st.segments
                .iter()
                .filter(|s| s.txn_index.is_dirty())
                .map(|s| s.id)
                .collect()
        };
        for id in dirty {
            let pending = {
                let st = inner.state.borrow();
                st.segments
                    .iter()
                    .find(|s| s.id == id)
                    .and_then(|s| Some((s.txn_index.unwritten()?, s.paths.txn_index.clone())))
            };
            let Some((unwritten, path)) = pending else {
                continue; // removed meanwhile (retention, compaction)
            };
            unwritten.write(&path).await?;
            let mut st = inner.state.borrow_mut();
            if let Some(s) = st.segments.iter_mut().find(|s| s.id == id) {
                s.txn_index.mark_written(&unwritten);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(pid: i64, base: i64, transactional: bool, control: bool) -> BatchHeader {
        BatchHeader {
            base_offset: base,
            batch_length: 0,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes: (transactional as i16) << 4 | (control as i16) << 5,
            last_offset_delta: 0,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: pid,
            producer_epoch: 0,
            base_sequence: if control { -1 } else { 0 },
            record_count: 1,
        }
    }

    fn marker(m: Marker) -> Option<MarkerRecord> {
        Some(MarkerRecord {
            marker: m,
            coordinator_epoch: 0,
        })
    }

    #[test]
    fn interleaved_transactions_move_the_first_unstable_offset_and_index_aborts() {
        let mut t = TxnTracker::default();
        assert_eq!(t.observe(&header(-1, 0, false, false), None), None);
        t.observe(&header(1, 1, true, false), None);
        t.observe(&header(2, 2, true, false), None);
        t.observe(&header(1, 3, true, false), None);
        assert_eq!(t.first_unstable(), Some(1));
        assert_eq!(
            t.observe(&header(1, 4, true, true), marker(Marker::Commit)),
            None
        );
        assert_eq!(
            t.first_unstable(),
            Some(1),
            "the commit marker is not below the HW yet"
        );
        t.on_high_watermark(5);
        assert_eq!(t.first_unstable(), Some(2));
        let aborted = t.observe(&header(2, 5, true, true), marker(Marker::Abort));
        assert_eq!(
            aborted,
            Some(AbortedTxn {
                producer_id: 2,
                first_offset: 2,
                last_offset: 5,
                last_stable_offset: 6
            })
        );
        t.on_high_watermark(6);
        assert_eq!(t.first_unstable(), None);
        assert_eq!(
            t.observe(&header(3, 6, true, true), marker(Marker::Abort)),
            None,
            "a marker without an open transaction indexes nothing"
        );
    }

    #[test]
    fn an_abort_while_another_producer_is_open_records_that_ones_start() {
        let mut t = TxnTracker::default();
        t.observe(&header(1, 10, true, false), None);
        t.observe(&header(2, 11, true, false), None);
        let a = t
            .observe(&header(2, 12, true, true), marker(Marker::Abort))
            .unwrap();
        assert_eq!(a.last_stable_offset, 10);
    }

    #[test]
    fn index_entries_truncate_and_persist() {
        let mut ix = TxnIndex::default();
        for i in 0..3 {
            ix.push(AbortedTxn {
                producer_id: i,
                first_offset: i * 10,
                last_offset: i * 10 + 5,
                last_stable_offset: i * 10 + 6,
            });
        }
        ix.on_disk = 3;
        ix.truncate_from(15);
        assert_eq!(ix.entries.len(), 1);
        assert!(ix.is_dirty(), "the file holds entries that are gone");
        let mut bytes = Vec::new();
        ix.entries[0].encode(&mut bytes);
        assert_eq!(bytes.len(), ENTRY_BYTES);
        assert_eq!(AbortedTxn::decode(&bytes), ix.entries[0]);
    }
}
