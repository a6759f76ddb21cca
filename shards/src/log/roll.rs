//! Rolling: sealing the active segment and starting the next one.

use super::direct::DirectTail;
use super::segment::{self, Segment};
use super::LogInner;
use crate::config::IoMode;
use crate::error::{Error, Result};
use crate::sync::Latch;
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

/// Starts a new active segment at `next_base` and seals the old one in the background.
///
/// Appends go on into the new segment at once; the old one's fdatasync (up to a whole segment
/// of page-cache data), its final index entries and the directory entry of the new file are
/// made durable by a background task. Until it finishes, flushes wait for it (`pending_seals`):
/// no recovery point and no `flush.messages` acknowledgement goes past data not yet synced.
/// The caller holds the write lock and has no write in flight.
pub(crate) async fn roll(inner: &Rc<LogInner>, next_base: i64) -> Result<()> {
    let taken = inner.direct.borrow_mut().take();
    if let Some(direct) = taken {
        direct.close().await?;
    }
    let (file, size, base) = {
        let mut st = inner.state.borrow_mut();
        let active = st.active_mut();
        active.seal_indexes();
        (active.file.clone(), active.size, active.base_offset)
    };
    let file = file.get().await?;
    super::reserve::cut_past_end(inner, &file, size, true).await?;
    inner.reservation.restart();
    let new = Segment::create(&inner.dir, next_base).await?;
    let direct = match inner.mode {
        IoMode::Direct => Some(DirectTail::open(&new.paths.log, 0, &new.file.get().await?).await?),
        IoMode::Buffered => None,
    };
    {
        let mut st = inner.state.borrow_mut();
        st.segments.push(new);
        st.recent_positions.clear();
    }
    *inner.direct.borrow_mut() = direct;
    seal_in_background(inner, file, base);
    tracing::debug!(log = %inner.dir.display(), base = next_base, "rolled segment");
    Ok(())
}

/// Makes the sealed segment at `base` (its file `file`) durable in a background task; flushes
/// wait for it (`pending_seals`). Also used at open for the sealed segments recovery read past
/// the recovery point, whose data reached the page cache but maybe not the disk.
pub(crate) fn seal_in_background(inner: &Rc<LogInner>, file: crate::uring::File, base: i64) {
    let sealed = Rc::new(Latch::default());
    inner.pending_seals.borrow_mut().push(sealed.clone());
    let inner2 = inner.clone();
    glommio::spawn_local(async move {
        if let Err(e) = seal(&inner2, &file, base).await {
            crate::repeated::error("sealing a segment failed", &inner2.dir.display(), &e);
            *inner2.seal_failure.borrow_mut() = Some(e);
        }
        sealed.open();
    })
    .detach();
}

/// The durable half of a roll: the sealed segment's data and indexes, and the new directory
/// entry.
async fn seal(inner: &Rc<LogInner>, file: &crate::uring::File, base: i64) -> Result<()> {
    file.fdatasync()
        .await
        .map_err(|e| Error::io("fdatasync", file.path(), e))?;
    let writes = {
        let st = inner.state.borrow();
        match st.segments.iter().find(|s| s.base_offset == base) {
            Some(s) => s.index_writes(),
            None => return Ok(()), // truncated or deleted meanwhile
        }
    };
    segment::write_indexes(&writes, true).await?;
    crate::uring::sync_dir(&inner.dir)
        .await
        .map_err(|e| Error::io("fsync", &inner.dir, e))?;
    if let Some(s) = inner
        .state
        .borrow_mut()
        .segments
        .iter_mut()
        .find(|s| s.base_offset == base)
    {
        s.indexes_persisted(&writes);
    }
    Ok(())
}

/// Waits for the seals of rolled segments; an error from one is returned once.
pub(crate) async fn wait_for_seals(inner: &LogInner) -> Result<()> {
    loop {
        let next = inner.pending_seals.borrow().first().cloned();
        let Some(latch) = next else { break };
        latch.wait().await;
        let mut pending = inner.pending_seals.borrow_mut();
        if pending.first().is_some_and(|l| Rc::ptr_eq(l, &latch)) {
            pending.remove(0);
        }
    }
    match inner.seal_failure.borrow_mut().take() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
