//! The log start offset when it lies inside the first segment: DeleteRecords (and a follower
//! following its leader's) moves it past records that stay on disk until their whole segment
//! goes. Reads below it are out of range, ListOffsets "earliest" answers it, and segments
//! wholly below it are deleted at once.
//!
//! File `<partition>/log-start-offset` (Kafka keeps the same in `log-start-offset-checkpoint`
//! per log directory), text: a version line, then the offset. Written atomically before the
//! move is acknowledged; on open the start is the larger of it and the first segment's base,
//! never past the log end.

use super::{flush, writer, Log};
use crate::error::{Error, Result};
use crate::uring;
use std::path::{Path, PathBuf};

const FILE_NAME: &str = "log-start-offset";
const VERSION: &str = "0";

fn path(dir: &Path) -> PathBuf {
    dir.join(FILE_NAME)
}

/// The stored start, if a valid one is there.
pub(super) async fn load(dir: &Path) -> Option<i64> {
    let bytes = super::recovery::read_file(&path(dir)).await?;
    let text = String::from_utf8(bytes).ok()?;
    let mut lines = text.lines();
    if lines.next()? != VERSION {
        return None;
    }
    lines.next()?.trim().parse().ok().filter(|&o: &i64| o >= 0)
}

pub(super) async fn store(dir: &Path, offset: i64) -> Result<()> {
    let p = path(dir);
    uring::write_atomically(&p, format!("{VERSION}\n{offset}\n").into_bytes())
        .await
        .map_err(|e| Error::io("write log start offset", &p, e))
}

impl Log {
    /// Moves the log start up to `offset` (at most the log end) and deletes the segments wholly
    /// below it; a start already there or beyond is kept. Returns the log start after.
    pub async fn advance_start_to(&self, offset: i64) -> Result<i64> {
        let inner = &self.inner;
        // A compaction pass rewrites closed segments: let it finish first.
        let Ok(_cleaning) = inner.cleaning.acquire_permit(1).await else {
            return Err(inner.closed_error());
        };
        let _write = writer::exclusive(inner).await?;
        let (start, doomed) = {
            let mut st = inner.state.borrow_mut();
            let target = offset.min(st.end_offset);
            if target <= st.start_offset {
                return Ok(st.start_offset);
            }
            st.start_offset = target;
            let below = st
                .segments
                .windows(2)
                .take_while(|pair| pair[1].base_offset <= target)
                .count();
            st.read_hints.clear();
            let doomed: Vec<_> = st.segments.drain(..below).collect();
            (target, doomed)
        };
        store(&inner.dir, start).await?;
        for s in &doomed {
            s.delete_files().await?;
        }
        if inner.epochs.borrow_mut().truncate_from_start(start) {
            flush::store_epochs(inner).await?;
        }
        if let Some((cache, entries)) = &inner.cache {
            cache.forget(entries, |b| b.base_offset >= start);
        }
        tracing::info!(log = %inner.dir.display(), log_start = start, segments = doomed.len(), "log start moved");
        Ok(start)
    }
}

/// The start a log opens with: the stored one if it lies inside the log, else the first
/// segment's base.
pub(super) fn on_open(stored: Option<i64>, first_base: i64, end_offset: i64) -> i64 {
    stored.map_or(first_base, |s| {
        s.clamp(first_base, end_offset.max(first_base))
    })
}
