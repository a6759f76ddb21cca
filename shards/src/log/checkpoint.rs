//! The recovery point: how far a partition's log is known flushed and valid.
//!
//! Written atomically (temporary file, fsync, rename, fsync of the directory) only after an
//! fdatasync of the segment it names, so after any crash everything before it is on disk and
//! recovery scans only what follows. Besides the offset it records where that offset sits (segment
//! and byte position) and the timestamp state of that segment up to it, so opening a partition
//! reads neither the log nor the segment before the point.
//!
//! File `<partition>/recovery-point`, text: a version line, then
//! `offset segment_base position max_timestamp offset_of_max_timestamp`.

use crate::uring;
use std::path::Path;

pub(crate) const FILE_NAME: &str = "recovery-point";
const VERSION: &str = "0";

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct RecoveryPoint {
    /// Every batch below this offset is flushed and was validated.
    pub offset: i64,
    /// The segment holding `offset` (or whose end it is).
    pub segment_base: i64,
    /// Byte position of `offset` in that segment.
    pub position: u64,
    /// Largest batch timestamp in that segment before `position`; -1 when none.
    pub max_timestamp: i64,
    pub offset_of_max_timestamp: i64,
}

impl RecoveryPoint {
    pub fn start_of(segment_base: i64) -> RecoveryPoint {
        RecoveryPoint {
            offset: segment_base,
            segment_base,
            position: 0,
            max_timestamp: -1,
            offset_of_max_timestamp: -1,
        }
    }

    fn encode(&self) -> Vec<u8> {
        format!(
            "{VERSION}\n{} {} {} {} {}\n",
            self.offset,
            self.segment_base,
            self.position,
            self.max_timestamp,
            self.offset_of_max_timestamp
        )
        .into_bytes()
    }

    fn decode(text: &str) -> Option<RecoveryPoint> {
        let mut lines = text.lines();
        if lines.next()? != VERSION {
            return None;
        }
        let fields: Vec<i64> = lines
            .next()?
            .split_whitespace()
            .map(|f| f.parse().ok())
            .collect::<Option<_>>()?;
        let [offset, segment_base, position, max_timestamp, offset_of_max_timestamp] =
            fields.as_slice()
        else {
            return None;
        };
        if *position < 0 || offset < segment_base {
            return None;
        }
        Some(RecoveryPoint {
            offset: *offset,
            segment_base: *segment_base,
            position: *position as u64,
            max_timestamp: *max_timestamp,
            offset_of_max_timestamp: *offset_of_max_timestamp,
        })
    }

    /// Reads the point; `None` when missing or unreadable (recovery then scans everything).
    pub async fn load(dir: &Path) -> Option<RecoveryPoint> {
        let path = dir.join(FILE_NAME);
        let file = uring::File::open_read(&path).await.ok()?;
        let bytes = file.read_at(0, 4096).await.ok()?;
        let parsed = RecoveryPoint::decode(std::str::from_utf8(&bytes).ok()?);
        if parsed.is_none() {
            tracing::warn!(path = %path.display(), "recovery point unreadable; scanning the whole log");
        }
        parsed
    }

    pub async fn store(&self, dir: &Path) -> std::io::Result<()> {
        uring::write_atomically(&dir.join(FILE_NAME), self.encode()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_and_decodes() {
        let p = RecoveryPoint {
            offset: 120,
            segment_base: 100,
            position: 4096,
            max_timestamp: 17,
            offset_of_max_timestamp: 110,
        };
        let text = String::from_utf8(p.encode()).unwrap();
        assert_eq!(RecoveryPoint::decode(&text), Some(p));
        assert_eq!(RecoveryPoint::decode("1\n1 1 1 1 1\n"), None);
        assert_eq!(RecoveryPoint::decode("0\n1 2\n"), None);
        assert_eq!(
            RecoveryPoint::decode("0\n1 5 0 -1 -1\n"),
            None,
            "offset below its segment"
        );
    }
}
