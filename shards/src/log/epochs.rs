//! The leader-epoch checkpoint: for each leader epoch, the first offset written in it (KIP-101).
//!
//! A follower that returns after a failover asks the leader where its last epoch ended and cuts
//! its log there, so a tail the new leader never had is never served. The file is Kafka's
//! `leader-epoch-checkpoint`: a version line, a count line, then `epoch start_offset` lines.
//!
//! Lives on: the shard that owns the partition.

use crate::uring;
use std::path::{Path, PathBuf};

pub(crate) const FILE_NAME: &str = "leader-epoch-checkpoint";

/// An epoch and the first offset the leader of that epoch wrote.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

#[derive(Debug)]
pub struct LeaderEpochCache {
    entries: Vec<EpochEntry>,
    path: PathBuf,
}

impl LeaderEpochCache {
    pub(crate) async fn load(dir: &Path) -> LeaderEpochCache {
        let path = dir.join(FILE_NAME);
        let mut entries = Vec::new();
        if let Ok(file) = uring::File::open_read(&path).await {
            if let Ok(bytes) = file.read_at(0, 1 << 20).await {
                match decode(&bytes) {
                    Some(parsed) => entries = parsed,
                    None => {
                        tracing::warn!(path = %path.display(), "leader epoch checkpoint unreadable; starting empty")
                    }
                }
            }
        }
        LeaderEpochCache { entries, path }
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    /// Records that `epoch` starts at `start_offset`, if it is newer than the latest epoch.
    /// Returns whether the cache changed (and must be stored).
    pub(crate) fn assign(&mut self, epoch: i32, start_offset: i64) -> bool {
        if epoch < 0 {
            return false;
        }
        match self.entries.last() {
            Some(last) if epoch <= last.epoch => false,
            _ => {
                debug_assert!(self
                    .entries
                    .last()
                    .is_none_or(|l| l.start_offset <= start_offset));
                self.entries.push(EpochEntry {
                    epoch,
                    start_offset,
                });
                true
            }
        }
    }

    /// For OffsetForLeaderEpoch: the largest epoch at or below `epoch` and the offset where it
    /// ended (the start of the next epoch, or `log_end` for the latest). `None` when `epoch` is
    /// older than every entry.
    pub fn end_offset_for(&self, epoch: i32, log_end: i64) -> Option<(i32, i64)> {
        let i = self.entries.partition_point(|e| e.epoch <= epoch);
        if i == 0 {
            return None;
        }
        let found = self.entries[i - 1].epoch;
        let end = self
            .entries
            .get(i)
            .map(|next| next.start_offset)
            .unwrap_or(log_end);
        Some((found, end))
    }

    /// Forgets epochs that start at or after `end` (the log was truncated there).
    pub(crate) fn truncate_from_end(&mut self, end: i64) -> bool {
        let keep = self.entries.partition_point(|e| e.start_offset < end);
        let changed = keep < self.entries.len();
        self.entries.truncate(keep);
        changed
    }

    /// Drops epochs wholly below `start` (retention moved the log start).
    pub(crate) fn truncate_from_start(&mut self, start: i64) -> bool {
        let first_kept = self.entries.partition_point(|e| e.start_offset <= start);
        if first_kept <= 1 {
            return false;
        }
        self.entries.drain(..first_kept - 1);
        true
    }

    /// The file's path and content, to write atomically without holding the cache.
    pub(crate) fn encoded(&self) -> (PathBuf, Vec<u8>) {
        let mut text = format!("0\n{}\n", self.entries.len());
        for e in &self.entries {
            text.push_str(&format!("{} {}\n", e.epoch, e.start_offset));
        }
        (self.path.clone(), text.into_bytes())
    }
}

fn decode(bytes: &[u8]) -> Option<Vec<EpochEntry>> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut lines = text.lines();
    if lines.next()? != "0" {
        return None;
    }
    let count: usize = lines.next()?.trim().parse().ok()?;
    let mut entries = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        let mut parts = lines.next()?.split_whitespace();
        let epoch = parts.next()?.parse().ok()?;
        let start_offset = parts.next()?.parse().ok()?;
        entries.push(EpochEntry {
            epoch,
            start_offset,
        });
    }
    Some(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(i32, i64)]) -> LeaderEpochCache {
        LeaderEpochCache {
            entries: entries
                .iter()
                .map(|&(epoch, start_offset)| EpochEntry {
                    epoch,
                    start_offset,
                })
                .collect(),
            path: PathBuf::from("/nonexistent"),
        }
    }

    #[test]
    fn end_offsets_follow_kip_101() {
        let c = cache(&[(0, 0), (2, 100), (5, 250)]);
        assert_eq!(c.end_offset_for(0, 300), Some((0, 100)));
        assert_eq!(
            c.end_offset_for(1, 300),
            Some((0, 100)),
            "epoch 1 never led: answer 0"
        );
        assert_eq!(c.end_offset_for(2, 300), Some((2, 250)));
        assert_eq!(c.end_offset_for(9, 300), Some((5, 300)));
        assert_eq!(cache(&[(3, 10)]).end_offset_for(2, 20), None);
    }

    #[test]
    fn assign_and_truncate() {
        let mut c = cache(&[]);
        assert!(c.assign(0, 0));
        assert!(!c.assign(0, 10), "same epoch keeps its start");
        assert!(c.assign(3, 10));
        assert!(c.truncate_from_end(10));
        assert_eq!(c.latest_epoch(), Some(0));
        assert!(c.assign(4, 10));
        assert!(c.assign(5, 20));
        assert!(c.truncate_from_start(15));
        assert_eq!(c.entries()[0].epoch, 4);
        assert!(!c.truncate_from_start(5));
    }

    #[test]
    fn file_format_round_trips() {
        assert_eq!(
            decode(b"0\n2\n0 0\n3 42\n"),
            Some(vec![
                EpochEntry {
                    epoch: 0,
                    start_offset: 0
                },
                EpochEntry {
                    epoch: 3,
                    start_offset: 42
                }
            ])
        );
        assert_eq!(decode(b"0\n3\n0 0\n"), None);
    }
}
