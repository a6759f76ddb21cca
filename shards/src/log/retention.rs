//! Shortening the log: retention from the front, truncation from the back.

use super::direct::DirectTail;
use super::scan::HeaderWalker;
use super::segment::Segment;
use super::{flush, roll, writer, LogInner};
use crate::config::IoMode;
use crate::error::{Error, Result};
use std::rc::Rc;

/// What a retention pass removed.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct RetentionOutcome {
    pub deleted_segments: usize,
    pub deleted_bytes: u64,
    pub log_start_offset: i64,
}

impl super::Log {
    /// Deletes whole segments past `retention.ms` (by their newest timestamp) or beyond
    /// `retention.bytes`, oldest first, and moves the log start. The active segment is never
    /// deleted by size; when it too is past `retention.ms`, it is rolled first and then deleted,
    /// as Kafka does, so an idle topic does not keep expired data forever.
    pub async fn apply_retention(&self, now_ms: i64) -> Result<RetentionOutcome> {
        let inner = &self.inner;
        let config = self.config();
        if !config.cleanup_policy.deletes() {
            return Ok(RetentionOutcome {
                log_start_offset: self.log_start_offset(),
                ..Default::default()
            });
        }
        // A compaction pass on this log is rewriting its closed segments: try again next time.
        // (Closed: cleaning stopped for good on this log, which must not stop retention.)
        let _cleaning = match inner.cleaning.try_acquire_permit(1) {
            Err(glommio::GlommioError::WouldBlock(_)) => {
                return Ok(RetentionOutcome {
                    log_start_offset: self.log_start_offset(),
                    ..Default::default()
                })
            }
            other => other.ok(),
        };
        let _lock = writer::exclusive(inner).await?;
        let expired = |s: &Segment| {
            config.retention_ms >= 0
                && s.max_timestamp >= 0
                && now_ms.saturating_sub(s.max_timestamp) > config.retention_ms
        };
        let roll_active = {
            let st = inner.state.borrow();
            st.segments[..st.segments.len() - 1].iter().all(expired)
                && st.active().size > 0
                && expired(st.active())
        };
        if roll_active {
            let next = inner.state.borrow().end_offset;
            roll::roll(inner, next).await?;
        }
        let doomed: Vec<Segment> = {
            let mut st = inner.state.borrow_mut();
            let total: u64 = st.segments.iter().map(|s| s.size).sum();
            let mut removed_bytes = 0u64;
            let mut count = 0usize;
            for s in &st.segments[..st.segments.len() - 1] {
                let over_size = config.retention_bytes >= 0
                    && total - removed_bytes >= config.retention_bytes as u64 + s.size;
                if !(expired(s) || over_size) {
                    break;
                }
                removed_bytes += s.size;
                count += 1;
            }
            let doomed = st.segments.drain(..count).collect();
            st.start_offset = st.start_offset.max(st.segments[0].base_offset);
            doomed
        };
        let deleted_bytes = doomed.iter().map(|s| s.size).sum();
        for s in &doomed {
            s.delete_files().await?;
        }
        let log_start = self.log_start_offset();
        if !doomed.is_empty() {
            tracing::info!(log = %inner.dir.display(), segments = doomed.len(), log_start, "retention deleted segments");
            if inner.epochs.borrow_mut().truncate_from_start(log_start) {
                flush::store_epochs(inner).await?;
            }
            if let Some((cache, entries)) = &inner.cache {
                cache.forget(entries, |b| b.base_offset >= log_start);
            }
        }
        Ok(RetentionOutcome {
            deleted_segments: doomed.len(),
            deleted_bytes,
            log_start_offset: log_start,
        })
    }

    /// Removes every batch at or after `offset`; a batch holding `offset` goes whole, so the log
    /// may end a little before it. Replication uses this after a leader change (KIP-101).
    pub async fn truncate_to(&self, offset: i64) -> Result<()> {
        let inner = &self.inner;
        let _cleaning = super::clean::stop_cleaning(inner).await;
        let Ok(_flush) = inner.flush_lock.acquire_permit(1).await else {
            return Err(Error::Closed(inner.dir.clone()));
        };
        let _write = writer::exclusive(inner).await?;
        if offset >= self.log_end_offset() {
            return Ok(());
        }
        // Before any cut: a crash half way must not leave the cleaner trusting what follows.
        super::clean::after_truncation(inner, offset).await?;
        if offset <= self.log_start_offset() {
            return restart_at(inner, offset).await;
        }
        // Whole segments at or after the offset go first.
        let doomed: Vec<Segment> = {
            let mut st = inner.state.borrow_mut();
            let keep = st.segments.partition_point(|s| s.base_offset < offset);
            st.segments.drain(keep..).collect()
        };
        if !doomed.is_empty() {
            let taken = inner.direct.borrow_mut().take();
            if let Some(d) = taken {
                d.close().await?;
            }
            for s in &doomed {
                s.delete_files().await?;
            }
        }
        cut_active(inner, offset).await?;
        after_truncation(inner).await
    }

    /// Empties the log and makes `offset` its start and end (a replica far behind the leader's
    /// log start).
    pub async fn truncate_fully_and_start_at(&self, offset: i64) -> Result<()> {
        let inner = &self.inner;
        let _cleaning = super::clean::stop_cleaning(inner).await;
        let Ok(_flush) = inner.flush_lock.acquire_permit(1).await else {
            return Err(Error::Closed(inner.dir.clone()));
        };
        let _write = writer::exclusive(inner).await?;
        restart_at(inner, offset).await
    }
}

async fn restart_at(inner: &Rc<LogInner>, offset: i64) -> Result<()> {
    super::clean::after_truncation(inner, offset).await?;
    let taken = inner.direct.borrow_mut().take();
    if let Some(d) = taken {
        d.close().await?;
    }
    // The old segments stay listed until the fresh one replaces them in one step: a read
    // running meanwhile never finds the list empty (their unlinked files stay readable).
    super::segment::delete_listed_files(inner).await?;
    let fresh = Segment::create(&inner.dir, offset).await?;
    {
        let mut st = inner.state.borrow_mut();
        st.segments = vec![fresh];
        st.start_offset = offset;
        st.end_offset = offset;
        st.flushed_offset = offset;
    }
    // A start stored before (DeleteRecords) would otherwise hide records once the log grows
    // past it again.
    super::start::store(&inner.dir, offset).await?;
    reopen_direct(inner).await?;
    after_truncation(inner).await
}

/// Cuts the (new) active segment before the batch holding `offset`.
async fn cut_active(inner: &Rc<LogInner>, offset: i64) -> Result<()> {
    let (file, size, start) = {
        let st = inner.state.borrow();
        let a = st.active();
        (
            a.file.clone(),
            a.size,
            a.index.lookup(a.relative(offset)).1 as u64,
        )
    };
    let file = file.get().await?;
    let mut walker = HeaderWalker::new(&file);
    let mut pos = start;
    let mut cut_at = (size, None);
    while let Some(h) = walker.header_at(pos, size).await? {
        if h.last_offset() >= offset {
            cut_at = (pos, Some(h.base_offset));
            break;
        }
        pos += h.total_bytes() as u64;
    }
    let (new_size, new_end) = match cut_at {
        (p, Some(base)) => (p, base),
        (_, None) => {
            // Nothing to cut here: the segments after this one were the whole excess. A
            // cleaned segment may end (by its offsets) past its last batch: the log ends at
            // `offset` at the latest.
            {
                let mut st = inner.state.borrow_mut();
                let end = offset.min(st.active().next_offset);
                st.active_mut().next_offset = end;
                st.end_offset = end;
                st.flushed_offset = st.flushed_offset.min(end);
            }
            return reopen_direct(inner).await;
        }
    };
    file.truncate(new_size)
        .await
        .map_err(|e| Error::io("truncate", file.path(), e))?;
    // The newest remaining timestamp: the time index covers up to its last entry, headers after.
    let (walk_from, mut max_ts) = {
        let mut st = inner.state.borrow_mut();
        let a = st.active_mut();
        a.index.truncate_to_position(new_size as u32);
        let rel_end = a.relative(new_end);
        a.time_index.truncate_to_offset(rel_end);
        a.verified.truncate(new_size);
        a.size = new_size;
        a.next_offset = new_end;
        a.bytes_since_index = new_size - a.index.last().map(|(_, p)| p as u64).unwrap_or(0);
        match a.time_index.last() {
            Some((t, o)) => (a.index.lookup(o).1 as u64, t),
            None => (0, -1),
        }
    };
    let mut pos = walk_from;
    let mut offset_of_max = -1;
    while let Some(h) = walker.header_at(pos, new_size).await? {
        if h.max_timestamp > max_ts {
            max_ts = h.max_timestamp;
            offset_of_max = h.base_offset;
        }
        pos += h.total_bytes() as u64;
    }
    {
        let mut st = inner.state.borrow_mut();
        st.end_offset = new_end;
        st.flushed_offset = st.flushed_offset.min(new_end);
        let a = st.active_mut();
        a.max_timestamp = max_ts;
        a.offset_of_max_timestamp = offset_of_max;
    }
    reopen_direct(inner).await
}

/// Direct mode: the O_DIRECT tail follows the active segment after it changed.
async fn reopen_direct(inner: &Rc<LogInner>) -> Result<()> {
    if inner.mode != IoMode::Direct {
        return Ok(());
    }
    let taken = inner.direct.borrow_mut().take();
    if let Some(d) = taken {
        d.close().await?;
    }
    let (path, size, file) = {
        let st = inner.state.borrow();
        let a = st.active();
        (a.paths.log.clone(), a.size, a.file.clone())
    };
    let file = file.get().await?;
    let tail = DirectTail::open(&path, size, &file).await?;
    *inner.direct.borrow_mut() = Some(tail);
    Ok(())
}

/// Everything that follows the log end: hints, cached batches, epochs, the recovery point.
async fn after_truncation(inner: &Rc<LogInner>) -> Result<()> {
    // The cut freed whatever was reserved past it.
    inner.reservation.restart();
    let end = {
        let mut st = inner.state.borrow_mut();
        let end = st.end_offset;
        st.start_offset = st.start_offset.min(end);
        st.read_hints.clear();
        st.recent_positions.retain(|&(o, _)| o < end);
        if st.recovery_point.offset > end {
            st.recovery_point =
                super::checkpoint::RecoveryPoint::start_of(st.segments[0].base_offset);
            // The stored point is above the new end: no slot may keep it.
            st.recovery_point_file.must_replace();
        }
        end
    };
    if let Some((cache, entries)) = &inner.cache {
        cache.forget(entries, |b| b.base_offset < end);
    }
    if inner.epochs.borrow_mut().truncate_from_end(end) {
        flush::store_epochs(inner).await?;
    }
    // The new file length must be durable before a recovery point names it.
    let file = inner.state.borrow().active().file.clone();
    let file = file.get().await?;
    file.fdatasync()
        .await
        .map_err(|e| Error::io("fdatasync", file.path(), e))?;
    flush::flush_locked(inner).await?;
    inner.appended.notify_all();
    tracing::info!(log = %inner.dir.display(), end, "log truncated");
    Ok(())
}
