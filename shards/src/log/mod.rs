//! The partition log: an ordered, append-only sequence of record batches addressed by offset.
//!
//! Write path, in order (see `writer.rs`):
//! 1. `append` validates each batch from its header and CRC and queues it (bounded by bytes);
//! 2. the log's writer task takes the queued appends that fit the active segment (rolling first
//!    when needed), assigns offsets in queue order and writes them with one vectored write — the
//!    stamped 16-byte prefix of each batch, then the client's bytes unchanged;
//! 3. once the kernel has the bytes (page cache, or the device for O_DIRECT) the indexes and the
//!    log end move, waiting readers wake, and — if `flush.messages` is reached — an fdatasync
//!    runs before any append of the group is acknowledged;
//! 4. a periodic flush (`flush.ms`, and the recovery checkpoint interval) fdatasyncs and then
//!    writes the recovery point, which bounds what recovery must scan after a crash.
//!
//! Lives on: the shard that owns the partition; `Log` is `!Send`. What a read returns
//! (`Chunk`s) is `Send` and may be served by any shard.

mod admission;
mod cache;
mod checkpoint;
mod clean;
mod direct;
mod epochs;
mod flush;
mod group;
mod index;
mod read;
mod recovery;
mod reserve;
mod retention;
mod roll;
mod scan;
mod segment;
mod segment_file;
mod start;
mod txn;
mod verified;
mod writer;

#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod recovery_fuzz;
#[cfg(test)]
mod tests;

pub use admission::Admitted;
pub use cache::BatchCache;
pub use clean::{CleanOutcome, CleanerBudget, IoThrottle};
pub use epochs::{EpochEntry, LeaderEpochCache};
pub use group::AppendInfo;
pub use read::{Chunk, FoundBatch, ReadResult};
pub use retention::RetentionOutcome;
pub use segment_file::{
    open_segment_files, segment_file_reopens, segment_files_open_in_process,
    set_open_segment_files_max,
};
pub use txn::AbortedTxn;

use crate::batch::{self, BatchHeader, BatchOrigin};
use crate::config::{IoMode, LogConfig};
use crate::error::{Error, Result};
use crate::sync::Notify;
use bytes::Bytes;
use checkpoint::RecoveryPoint;
use glommio::sync::Semaphore;
use segment::Segment;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// How a log's writer batches and paces its writes (the tuning file's per-core fields).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriterTuning {
    /// Appends queued but not yet written, in bytes; `append` waits beyond it (write-behind).
    pub queued_bytes_max: usize,
    /// Bytes written by one write at most; `None` takes the I/O mode's default (1 MiB in
    /// both).
    pub write_bytes_max: Option<usize>,
    /// Writes to the file in flight at once, at consecutive positions.
    pub writes_in_flight: usize,
}

impl Default for WriterTuning {
    fn default() -> Self {
        WriterTuning {
            queued_bytes_max: 64 << 20,
            write_bytes_max: None,
            writes_in_flight: 8,
        }
    }
}

/// A batch that passed validation, with its parsed header.
#[derive(Clone, Debug)]
pub struct ValidBatch {
    pub bytes: Bytes,
    pub header: BatchHeader,
}

/// How a log is opened.
#[derive(Clone)]
pub struct LogOptions {
    pub config: LogConfig,
    pub io_mode: IoMode,
    pub writer: WriterTuning,
    /// The shard's cache of recent batches; direct mode serves tailing readers from it.
    pub cache: Option<Rc<BatchCache>>,
}

/// Counters a log keeps about itself.
#[derive(Default, Debug)]
pub struct LogStats {
    pub appended_batches: Cell<u64>,
    pub appended_records: Cell<u64>,
    pub appended_bytes: Cell<u64>,
    pub fdatasyncs: Cell<u64>,
    /// Direct mode: appends acknowledged with the write after theirs, which carried the
    /// partial block their write held back.
    pub appends_carried: Cell<u64>,
}

/// A handle to one partition log; clones share it.
#[derive(Clone)]
pub struct Log {
    inner: Rc<LogInner>,
}

pub(crate) struct LogInner {
    dir: PathBuf,
    mode: IoMode,
    config: RefCell<Rc<LogConfig>>,
    state: RefCell<LogState>,
    epochs: RefCell<LeaderEpochCache>,
    /// Serialises leader-epoch checkpoint writes so the newest content lands last.
    epochs_lock: Semaphore,
    /// How far compaction has gone (compacted topics).
    cleaner: RefCell<clean::state::CleanerState>,
    /// Held for a whole compaction pass (see `clean`).
    cleaning: Semaphore,
    /// Truncation, close and delete waiting for a pass to stop.
    cleaner_stop_requests: Cell<usize>,
    queue: RefCell<VecDeque<writer::PendingAppend>>,
    queue_space: Rc<crate::sync::FifoGate>,
    writer_tuning: WriterTuning,
    /// Wakes the writer task when an append is queued or the log closes.
    work: Notify,
    /// Wakes readers when the log end moves (append, truncation).
    appended: Notify,
    /// Held while the segment list or the active segment changes shape: writes, rolls,
    /// truncation, retention, close.
    write_lock: Semaphore,
    /// Truncation, retention and close waiting for (or holding) `write_lock`: the writer
    /// finishes its writes in flight and holds back while this is non-zero.
    exclusive_waiting: Cell<usize>,
    exclusive_done: Notify,
    /// Serialises flushes so recovery points are written in order. Taken before `write_lock`
    /// by whoever needs both.
    flush_lock: Semaphore,
    /// One fdatasync at a time; others wait for it (see `flush::sync_data`).
    sync_running: Cell<bool>,
    sync_done: Notify,
    /// Seals of rolled segments still running (see `roll::roll`); flushes wait for them.
    pending_seals: RefCell<Vec<Rc<crate::sync::Latch>>>,
    /// The first seal that failed, reported by the next flush.
    seal_failure: RefCell<Option<Error>>,
    /// The O_DIRECT writer of the active segment (direct mode); used under `write_lock`.
    direct: RefCell<Option<direct::DirectTail>>,
    /// Blocks reserved ahead of the buffered writer in the active segment (`reserve`).
    reservation: reserve::Reservation,
    cache: Option<(Rc<BatchCache>, cache::Entries)>,
    closed: Cell<bool>,
    /// Set by `delete`: the log is closed for good and its files are gone, though its segment
    /// list stays (never empty) for operations that were already running.
    deleted: Cell<bool>,
    writer_done: Notify,
    writer_running: Cell<bool>,
    stats: LogStats,
}

pub(crate) struct LogState {
    /// Ascending by base offset; the last is the active segment. Never empty.
    segments: Vec<Segment>,
    /// The first offset served: the first segment's base, or past it after DeleteRecords
    /// (`start.rs`).
    start_offset: i64,
    /// Offset after the last written batch.
    end_offset: i64,
    /// Everything below is on stable storage.
    flushed_offset: i64,
    recovery_point: RecoveryPoint,
    /// Where the next recovery point store goes (`checkpoint.rs`).
    recovery_point_file: checkpoint::PointFile,
    unflushed_messages: i64,
    oldest_unflushed_ms: Option<i64>,
    last_checkpoint_ms: i64,
    /// Where recent reads ended, so the next read from there skips the index walk.
    read_hints: VecDeque<read::ReadHint>,
    /// (segment base, position) up to which writeback of the active segment has been started.
    writeback: (i64, u64),
    /// (base offset, position) of recent batches of the active segment: maps a high watermark
    /// to a byte position without reading headers.
    recent_positions: VecDeque<(i64, u64)>,
    /// Open transactions, in written order.
    txns: txn::TxnTracker,
    /// False when a `.txnindex` was damaged on open: the partition then rebuilds every index
    /// from the log (see `Log::restart_transactions_at`).
    txn_indexes_sound: bool,
}

impl LogInner {
    /// Why an operation on a closed log fails: closed (shutdown, retriable elsewhere) or
    /// deleted (the partition is gone).
    fn closed_error(&self) -> Error {
        if self.deleted.get() {
            Error::Deleted(self.dir.clone())
        } else {
            Error::Closed(self.dir.clone())
        }
    }
}

impl LogState {
    fn active(&self) -> &Segment {
        self.segments
            .last()
            .expect("a log always has an active segment")
    }

    fn active_mut(&mut self) -> &mut Segment {
        self.segments
            .last_mut()
            .expect("a log always has an active segment")
    }
}

impl Log {
    /// Opens the log in `dir` (created when missing), recovering what a crash may have torn.
    pub async fn open(dir: &Path, options: LogOptions) -> Result<Log> {
        recovery::open(dir, options).await
    }

    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    pub fn io_mode(&self) -> IoMode {
        self.inner.mode
    }

    pub fn config(&self) -> Rc<LogConfig> {
        self.inner.config.borrow().clone()
    }

    /// Applies new settings (AlterConfigs); they take effect from the next append or tick.
    pub fn set_config(&self, config: LogConfig) {
        *self.inner.config.borrow_mut() = Rc::new(config);
    }

    pub fn stats(&self) -> &LogStats {
        &self.inner.stats
    }

    /// Splits a record set from the leader into batches and validates each one (framing and
    /// CRC, as Kafka's follower append: no record-level or producer checks).
    pub fn validate(&self, records: &Bytes, origin: BatchOrigin) -> Result<Vec<ValidBatch>> {
        // Kafka's follower append ignores max.message.bytes (`ignoreRecordSize`): the leader
        // already decided.
        let max = match origin {
            BatchOrigin::Client => self.inner.config.borrow().max_message_bytes,
            BatchOrigin::Replica => usize::MAX,
        };
        batch::split_batches(records)?
            .into_iter()
            .map(|bytes| {
                let header = batch::validate(&bytes, max, origin)?;
                Ok(ValidBatch { bytes, header })
            })
            .collect()
    }

    pub fn log_start_offset(&self) -> i64 {
        self.inner.state.borrow().start_offset
    }

    /// The offset the next appended record will get.
    pub fn log_end_offset(&self) -> i64 {
        self.inner.state.borrow().end_offset
    }

    /// Everything below this offset is on stable storage.
    pub fn flushed_offset(&self) -> i64 {
        self.inner.state.borrow().flushed_offset
    }

    /// Bytes of all segments.
    pub fn size_bytes(&self) -> u64 {
        self.inner
            .state
            .borrow()
            .segments
            .iter()
            .map(|s| s.size)
            .sum()
    }

    pub fn segment_count(&self) -> usize {
        self.inner.state.borrow().segments.len()
    }

    /// Base offsets of the segments, oldest first.
    pub fn segment_bases(&self) -> Vec<i64> {
        self.inner
            .state
            .borrow()
            .segments
            .iter()
            .map(|s| s.base_offset)
            .collect()
    }

    /// (base offset, newest record timestamp or -1) of each segment, oldest first: what
    /// ListOffsets v0 answers from (Kafka uses each segment file's modification time; the
    /// newest timestamp the segment holds is the closest thing the log tracks).
    pub fn segment_times(&self) -> Vec<(i64, i64)> {
        self.inner
            .state
            .borrow()
            .segments
            .iter()
            .map(|s| (s.base_offset, s.max_timestamp))
            .collect()
    }

    /// Wakes when the log end moves; compare generations to avoid lost wake-ups.
    pub fn appended(&self) -> &Notify {
        &self.inner.appended
    }

    /// The leader epochs recorded for this log.
    pub fn leader_epochs(&self) -> Vec<EpochEntry> {
        self.inner.epochs.borrow().entries().to_vec()
    }

    /// KIP-101: the largest epoch at or below `epoch` and the offset where it ended.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)> {
        let end = self.log_end_offset();
        self.inner.epochs.borrow().end_offset_for(epoch, end)
    }

    /// The newest batch timestamp and its batch's base offset, for ListOffsets max-timestamp.
    pub fn max_timestamp(&self) -> Option<(i64, i64)> {
        let st = self.inner.state.borrow();
        st.segments
            .iter()
            .filter(|s| s.max_timestamp >= 0)
            .max_by_key(|s| s.max_timestamp)
            .map(|s| (s.max_timestamp, s.offset_of_max_timestamp))
    }

    /// Stops the writer after what is queued, flushes, writes the recovery point and the
    /// indexes. Appends after close fail with `Error::Closed`.
    pub async fn close(&self) -> Result<()> {
        let inner = &self.inner;
        let _cleaning = clean::stop_cleaning(inner).await;
        inner.cleaning.close();
        writer::stop(inner).await;
        let Ok(_flush) = inner.flush_lock.acquire_permit(1).await else {
            return Err(Error::Closed(inner.dir.clone()));
        };
        let _write = writer::exclusive(inner).await?;
        // Deleted while this close waited (a shutdown during DeleteTopics): nothing to keep.
        if inner.deleted.get() {
            return Ok(());
        }
        let taken = inner.direct.borrow_mut().take();
        if let Some(direct) = taken {
            direct.close().await?;
        }
        let (file, size) = {
            let st = inner.state.borrow();
            (st.active().file.clone(), st.active().size)
        };
        reserve::cut_past_end(inner, &file.get().await?, size, false).await?;
        flush::flush_locked(inner).await?;
        // An append may have left a detached epoch store queued; write the final content here
        // and close the lock so nothing older lands after it.
        flush::store_epochs(inner).await?;
        inner.epochs_lock.close();
        Ok(())
    }

    /// Closes the log and removes its directory (DeleteTopics). Afterwards reads and appends
    /// fail with `Error::Deleted`.
    pub async fn delete(&self) -> Result<()> {
        let inner = &self.inner;
        let _cleaning = clean::stop_cleaning(inner).await;
        inner.cleaning.close();
        writer::stop(inner).await;
        let _write = writer::exclusive(inner).await?;
        let taken = inner.direct.borrow_mut().take();
        if let Some(direct) = taken {
            direct.close().await?;
        }
        // Wait out an epoch store in flight; later ones find the lock closed.
        let _epochs = inner.epochs_lock.acquire_permit(1).await;
        inner.epochs_lock.close();
        // The segments stay in the list: a read that started before may still look them up
        // (their open files stay readable until it drops them); new operations see `deleted`.
        inner.deleted.set(true);
        segment::delete_listed_files(inner).await?;
        // Listing and removing a directory tree has no io_uring operation; topic deletion is rare.
        std::fs::remove_dir_all(&inner.dir).or_else(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Ok(())
            } else {
                Err(Error::io("remove", &inner.dir, e))
            }
        })
    }
}
