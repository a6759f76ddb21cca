//! What the cleaner remembers of a log between passes: how far it has cleaned, and when each
//! stretch was first cleaned, which decides when its tombstones may go.
//!
//! A tombstone must outlive `delete.retention.ms` after the pass that first cleaned it (the
//! pass that removed the values it deletes), so a consumer reading the log from the start in
//! that time still sees the delete. Each completed pass records `(end offset, time)`; a later
//! pass may drop tombstones below the end of every stretch cleaned at least
//! `delete.retention.ms` ago. The same rule as Kafka's delete horizon (KIP-534), kept beside the
//! log instead of inside the batches.
//!
//! File `<partition>/cleaner-checkpoint`, text: a version line, `first_dirty horizon_applied`,
//! a count line, then `end_offset cleaned_at_ms` lines; written atomically.

use crate::uring;
use std::path::Path;

pub(crate) const FILE_NAME: &str = "cleaner-checkpoint";
const VERSION: &str = "0";
/// Stretches remembered; beyond it the two oldest merge, keeping the later time (tombstones
/// then live a little longer, never shorter).
const STRETCHES_MAX: usize = 256;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CleanerState {
    /// Every record below was in the offset map of a completed pass.
    pub first_dirty: i64,
    /// The tombstone horizon the last pass applied; a pass is due when it would move.
    pub horizon_applied: i64,
    /// Ascending by end offset: `(end_offset, cleaned_at_ms)` of completed passes.
    stretches: Vec<(i64, i64)>,
}

impl CleanerState {
    pub async fn load(dir: &Path) -> CleanerState {
        let path = dir.join(FILE_NAME);
        let Ok(file) = uring::File::open_read(&path).await else {
            return CleanerState::default();
        };
        let bytes = file.read_at(0, 1 << 20).await.unwrap_or_default();
        match std::str::from_utf8(&bytes).ok().and_then(decode) {
            Some(state) => state,
            None => {
                // Forgetting loses no data: the next pass maps the whole log again and keeps
                // every tombstone one more delete.retention.ms.
                tracing::warn!(path = %path.display(), "cleaner checkpoint unreadable; starting over");
                CleanerState::default()
            }
        }
    }

    pub async fn store(&self, dir: &Path) -> std::io::Result<()> {
        uring::write_atomically(&dir.join(FILE_NAME), self.encode()).await
    }

    /// Tombstones below the returned offset have waited `delete_retention_ms` since first cleaned.
    pub fn tombstone_horizon(&self, now_ms: i64, delete_retention_ms: i64) -> i64 {
        self.stretches
            .iter()
            .filter(|&&(_, at)| at.saturating_add(delete_retention_ms) <= now_ms)
            .map(|&(end, _)| end)
            .max()
            .unwrap_or(0)
    }

    /// A pass mapped everything below `end` at `now_ms`.
    pub fn pass_completed(&mut self, end: i64, now_ms: i64, horizon: i64) {
        if end > self.first_dirty {
            self.stretches.push((end, now_ms));
        }
        self.first_dirty = end;
        self.horizon_applied = horizon;
        if self.stretches.len() > STRETCHES_MAX {
            let (_, older_at) = self.stretches.remove(0);
            let newer = &mut self.stretches[0];
            newer.1 = newer.1.max(older_at);
        }
    }

    /// The log now ends at `end` (truncation): what was cleaned above it is gone, and records
    /// written there later are dirty.
    pub fn truncated_to(&mut self, end: i64) {
        self.first_dirty = self.first_dirty.min(end);
        self.horizon_applied = self.horizon_applied.min(end);
        for s in &mut self.stretches {
            s.0 = s.0.min(end);
        }
    }

    fn encode(&self) -> Vec<u8> {
        let mut text = format!(
            "{VERSION}\n{} {}\n{}\n",
            self.first_dirty,
            self.horizon_applied,
            self.stretches.len()
        );
        for (end, at) in &self.stretches {
            text.push_str(&format!("{end} {at}\n"));
        }
        text.into_bytes()
    }
}

fn decode(text: &str) -> Option<CleanerState> {
    let mut lines = text.lines();
    if lines.next()? != VERSION {
        return None;
    }
    let mut first = lines.next()?.split_whitespace();
    let first_dirty = first.next()?.parse().ok()?;
    let horizon_applied = first.next()?.parse().ok()?;
    let count: usize = lines.next()?.trim().parse().ok()?;
    let mut stretches = Vec::with_capacity(count.min(STRETCHES_MAX + 1));
    for _ in 0..count {
        let mut parts = lines.next()?.split_whitespace();
        stretches.push((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?));
    }
    Some(CleanerState {
        first_dirty,
        horizon_applied,
        stretches,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tombstones_wait_delete_retention_after_their_first_pass() {
        let mut s = CleanerState::default();
        s.pass_completed(100, 1_000, 0);
        s.pass_completed(250, 5_000, 0);
        assert_eq!(s.tombstone_horizon(1_999, 1_000), 0);
        assert_eq!(s.tombstone_horizon(2_000, 1_000), 100);
        assert_eq!(s.tombstone_horizon(6_000, 1_000), 250);
        s.truncated_to(150);
        assert_eq!(s.first_dirty, 150);
        assert_eq!(s.tombstone_horizon(6_000, 1_000), 150);
        assert_eq!(decode(std::str::from_utf8(&s.encode()).unwrap()), Some(s));
    }

    #[test]
    fn merging_old_stretches_never_shortens_a_wait() {
        let mut s = CleanerState::default();
        for i in 1..=(STRETCHES_MAX as i64 + 10) {
            s.pass_completed(i * 10, i * 100, 0);
        }
        assert_eq!(s.stretches.len(), STRETCHES_MAX);
        for &(end, at) in &s.stretches {
            assert!(at >= end * 10, "stretch ending {end} cleaned at {at}");
        }
    }
}
