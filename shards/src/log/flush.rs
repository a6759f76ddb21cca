//! Making appended data durable: fdatasync on demand (flush policy) and the periodic flush that
//! moves the recovery point.

use super::checkpoint::RecoveryPoint;
use super::segment;
use super::LogInner;
use crate::error::{Error, Result};
use crate::types::now_ms;
use crate::uring;
use std::rc::Rc;

/// Makes everything written so far durable. Concurrent callers share one fdatasync: a caller
/// that finds one running waits for it, then syncs again only if its data came after.
pub(crate) async fn sync_data(inner: &Rc<LogInner>) -> Result<()> {
    let target = inner.state.borrow().end_offset;
    // Data in segments rolled since is made durable by their seals.
    super::roll::wait_for_seals(inner).await?;
    loop {
        if inner.state.borrow().flushed_offset >= target {
            return Ok(());
        }
        if inner.sync_running.get() {
            let seen = inner.sync_done.generation();
            inner.sync_done.wait_past(seen).await;
            continue;
        }
        inner.sync_running.set(true);
        let result = sync_active(inner).await;
        inner.sync_running.set(false);
        inner.sync_done.notify_all();
        result?;
    }
}

/// One fdatasync of the active segment; sealed segments were synced when they rolled.
async fn sync_active(inner: &Rc<LogInner>) -> Result<()> {
    let (file, end, unflushed) = {
        let st = inner.state.borrow();
        (
            st.active().file.clone(),
            st.end_offset,
            st.unflushed_messages,
        )
    };
    let file = file.get().await?;
    // Its latency goes to the shard's fsync histogram (`uring::File::fdatasync`).
    file.fdatasync()
        .await
        .map_err(|e| Error::io("fdatasync", file.path(), e))?;
    let stats = &inner.stats;
    stats.fdatasyncs.set(stats.fdatasyncs.get() + 1);
    let mut st = inner.state.borrow_mut();
    if end > st.flushed_offset {
        st.flushed_offset = end;
    }
    st.unflushed_messages = (st.unflushed_messages - unflushed).max(0);
    if st.flushed_offset >= st.end_offset {
        st.oldest_unflushed_ms = None;
    }
    Ok(())
}

/// fdatasync, then the active segment's new index entries, then the recovery point.
pub(crate) async fn flush_and_checkpoint(inner: &Rc<LogInner>) -> Result<()> {
    let Ok(_lock) = inner.flush_lock.acquire_permit(1).await else {
        return Err(Error::Closed(inner.dir.clone()));
    };
    flush_locked(inner).await
}

/// At open, after recovery, given `stored` (the recovery point found on disk). As Kafka's log
/// loader, recovery does not flush: what it read past the point stays unflushed, and the
/// periodic checkpoint (`flush_if_due`, `log.recovery.checkpoint.interval.ms`) syncs it and
/// moves the point once the log is served (the sealed segments among what it read are sealed
/// again in the background at open, and the checkpoint waits for those seals). A checkpoint
/// here made every partition with data past its point cost four syncs (segment, both
/// indexes, the point) before the broker listened: most of a restart after kill -9 during a
/// produce to 10,000 partitions, and of a clean restart when the point was stored again
/// regardless.
///
/// Stored here all the same when recovery found less than the stored point claims (data lost
/// below it): appends would otherwise reach past the stale point at other positions, and a
/// crash before the next checkpoint would scan from a position inside a batch and cut valid
/// records there. A log with no point at all is scanned whole, at this start and at any
/// before its first checkpoint (Kafka recovers a log without a checkpoint from its start).
pub(crate) async fn checkpoint_at_open(
    inner: &Rc<LogInner>,
    stored: Option<RecoveryPoint>,
) -> Result<()> {
    let end = inner.state.borrow().end_offset;
    if stored.is_some_and(|point| point.offset > end) {
        flush_and_checkpoint(inner).await
    } else {
        Ok(())
    }
}

/// As `flush_and_checkpoint`, for a caller that holds the flush lock.
pub(crate) async fn flush_locked(inner: &Rc<LogInner>) -> Result<()> {
    // The point is taken before the sync: everything it names is then covered by the sync.
    let (point, writes) = {
        let st = inner.state.borrow();
        let a = st.active();
        (
            RecoveryPoint {
                offset: st.end_offset,
                segment_base: a.base_offset,
                position: a.size,
                max_timestamp: a.max_timestamp,
                offset_of_max_timestamp: a.offset_of_max_timestamp,
            },
            a.index_writes(),
        )
    };
    sync_data(inner).await?;
    segment::write_indexes(&writes, true).await?;
    // Stores are serialised by the flush lock, so the file's slots are not raced.
    let mut file = inner.state.borrow().recovery_point_file;
    point
        .store(&inner.dir, &mut file)
        .await
        .map_err(|e| Error::io("write recovery point", &inner.dir, e))?;
    let mut st = inner.state.borrow_mut();
    st.recovery_point_file = file;
    if let Some(seg) = st
        .segments
        .iter_mut()
        .find(|s| s.base_offset == point.segment_base)
    {
        seg.indexes_persisted(&writes);
    }
    st.recovery_point = point;
    st.last_checkpoint_ms = now_ms();
    Ok(())
}

/// Writes the leader-epoch checkpoint as it is now; stores are serialised so the newest wins.
pub(crate) async fn store_epochs(inner: &Rc<LogInner>) -> Result<()> {
    let Ok(_lock) = inner.epochs_lock.acquire_permit(1).await else {
        return Err(Error::Closed(inner.dir.clone()));
    };
    let (path, bytes) = inner.epochs.borrow().encoded();
    uring::write_atomically(&path, bytes)
        .await
        .map_err(|e| Error::io("write leader epochs", &path, e))
}

impl super::Log {
    /// fdatasync and a new recovery point.
    pub async fn flush(&self) -> Result<()> {
        flush_and_checkpoint(&self.inner).await
    }

    /// Periodic duties: flush when `flush.ms` has passed since the oldest unflushed append, or
    /// when the recovery point is older than `checkpoint_interval_ms` and data has come since.
    pub async fn flush_if_due(&self, checkpoint_interval_ms: i64) -> Result<bool> {
        let now = now_ms();
        let due = {
            let st = self.inner.state.borrow();
            let flush_ms = self.inner.config.borrow().flush_ms;
            let by_policy = st
                .oldest_unflushed_ms
                .is_some_and(|t| now.saturating_sub(t) >= flush_ms);
            let by_checkpoint = st.recovery_point.offset < st.end_offset
                && now.saturating_sub(st.last_checkpoint_ms) >= checkpoint_interval_ms;
            by_policy || by_checkpoint
        };
        if due {
            self.flush().await?;
        }
        Ok(due)
    }
}
