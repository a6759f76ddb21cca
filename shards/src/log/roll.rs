//! Rolling: sealing the active segment and starting the next one.

use super::segment::{self, DirectTail, Segment};
use super::LogInner;
use crate::config::IoMode;
use crate::error::{Error, Result};
use crate::types::now_ms;
use std::rc::Rc;

/// Whether the next append (`next_bytes`, to go at `position` and `offset` of the active
/// segment) must go into a new segment: the active one would exceed `segment.bytes`, is older
/// than `segment.ms`, or its relative offsets near u32.
pub(crate) fn needed(inner: &LogInner, position: u64, offset: i64, next_bytes: u64) -> bool {
    let config = inner.config.borrow().clone();
    let st = inner.state.borrow();
    let active = st.active();
    let too_big = position > 0 && position + next_bytes > config.segment_bytes;
    let too_old = active
        .first_append_ms
        .is_some_and(|t| now_ms() - t >= config.segment_ms);
    let offsets_overflow = offset - active.base_offset > (u32::MAX / 2) as i64;
    too_big || too_old || offsets_overflow
}

/// Seals the active segment (trimmed, synced, final index entries) and starts a new one at
/// `next_base`. The caller holds the write lock and has no write in flight.
pub(crate) async fn roll(inner: &Rc<LogInner>, next_base: i64) -> Result<()> {
    let taken = inner.direct.borrow_mut().take();
    if let Some(direct) = taken {
        direct.close().await?;
    }
    let (file, size, writes) = {
        let mut st = inner.state.borrow_mut();
        let active = st.active_mut();
        active.seal_indexes();
        (active.file.clone(), active.size, active.index_writes())
    };
    segment::trim_file(&file, size).await?;
    file.fdatasync()
        .await
        .map_err(|e| Error::io("fdatasync", file.path(), e))?;
    segment::write_indexes(&writes, true).await?;
    let new = Segment::create(&inner.dir, next_base).await?;
    let direct = match inner.mode {
        IoMode::Direct => Some(DirectTail::open(&new.paths.log, 0, &new.file).await?),
        IoMode::Buffered => None,
    };
    crate::uring::sync_dir(&inner.dir)
        .await
        .map_err(|e| Error::io("fsync", &inner.dir, e))?;
    let mut st = inner.state.borrow_mut();
    let sealed = st.active_mut();
    sealed.indexes_persisted(&writes);
    st.segments.push(new);
    st.recent_positions.clear();
    *inner.direct.borrow_mut() = direct;
    tracing::debug!(log = %inner.dir.display(), base = next_base, "rolled segment");
    Ok(())
}
