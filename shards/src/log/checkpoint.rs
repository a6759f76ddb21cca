//! The recovery point: how far a partition's log is known flushed and valid.
//!
//! Written only after an fdatasync of the segment it names, so after any crash everything
//! before it is on disk and recovery scans only what follows. Besides the offset it records
//! where that offset sits (segment and byte position) and the timestamp state of that segment
//! up to it, so opening a partition reads neither the log nor the segment before the point.
//!
//! File `<partition>/recovery-point`: two slots of `SLOT_BYTES`, each one sector, each a text
//! line `1 seq offset segment_base position max_timestamp offset_of_max_timestamp crc`
//! (crc: CRC-32C of what precedes it, hex). The slot with the highest valid `seq` is the point.
//!
//! A checkpoint overwrites the older slot in place and does not sync it. Every value a slot
//! ever held was covered by durable data when written, so after a crash either slot is a
//! safe place to start scanning: a torn slot fails its CRC and the other one is used. This
//! keeps the checkpoint of a partition to one write, where a temporary file, an fsync, a
//! rename and an fsync of the directory cost an inode allocation and two journal commits per
//! partition a second (with 1,000 partitions, a quarter of the broker's CPU went to ext4's
//! inode allocation).
//!
//! A point that moves backwards (truncation) must not be outlived by a higher one in the
//! other slot, and the first store after opening must replace whatever format was there:
//! both rewrite the whole file atomically (temporary file, fsync, rename, fsync of the
//! directory), the other slot empty.
//!
//! The previous format (version `0`: a version line, then the five fields) is still read.

use crate::uring::{self, WriteChunk};
use std::path::Path;

pub(crate) const FILE_NAME: &str = "recovery-point";
/// The whole-file format written before the slots.
const LEGACY_VERSION: &str = "0";
const SLOT_VERSION: &str = "1";
/// One sector: a torn write damages one slot at most.
const SLOT_BYTES: usize = 512;

/// Where the next store of a partition's recovery point goes.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PointFile {
    /// Sequence number of the newest slot written.
    seq: u64,
    /// The file holds two slots and the newest is at least as high as the older one, so the
    /// next store may overwrite the older slot in place.
    in_place: bool,
}

impl PointFile {
    /// The next store rewrites the whole file (after a truncation lowered the point).
    pub fn must_replace(&mut self) {
        self.in_place = false;
    }
}

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

    /// One slot: the fields and their CRC, padded to `SLOT_BYTES`.
    fn encode_slot(&self, seq: u64) -> Vec<u8> {
        let fields = format!(
            "{SLOT_VERSION} {seq} {} {} {} {} {}",
            self.offset,
            self.segment_base,
            self.position,
            self.max_timestamp,
            self.offset_of_max_timestamp
        );
        let crc = crate::batch::crc::crc32c(fields.as_bytes());
        let mut slot = format!("{fields} {crc:08x}\n").into_bytes();
        slot.resize(SLOT_BYTES, b' ');
        slot
    }

    fn decode_slot(slot: &[u8]) -> Option<(RecoveryPoint, u64)> {
        let text = std::str::from_utf8(slot).ok()?;
        let line = text.split('\n').next()?;
        let (fields, crc) = line.rsplit_once(' ')?;
        if u32::from_str_radix(crc, 16).ok()? != crate::batch::crc::crc32c(fields.as_bytes()) {
            return None;
        }
        let mut words = fields.split_whitespace();
        if words.next()? != SLOT_VERSION {
            return None;
        }
        let seq: u64 = words.next()?.parse().ok()?;
        let rest: Vec<&str> = words.collect();
        Some((RecoveryPoint::decode_fields(&rest)?, seq))
    }

    /// The previous format: a version line, then the fields.
    fn decode_legacy(text: &str) -> Option<RecoveryPoint> {
        let mut lines = text.lines();
        if lines.next()? != LEGACY_VERSION {
            return None;
        }
        let rest: Vec<&str> = lines.next()?.split_whitespace().collect();
        RecoveryPoint::decode_fields(&rest)
    }

    fn decode_fields(words: &[&str]) -> Option<RecoveryPoint> {
        let fields: Vec<i64> = words
            .iter()
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

    /// The point a file holds: the valid slot with the highest sequence, or the legacy text.
    fn decode(bytes: &[u8]) -> Option<(RecoveryPoint, u64)> {
        if let Some(legacy) = std::str::from_utf8(bytes)
            .ok()
            .and_then(RecoveryPoint::decode_legacy)
        {
            return Some((legacy, 0));
        }
        bytes
            .chunks(SLOT_BYTES)
            .take(2)
            .filter_map(RecoveryPoint::decode_slot)
            .max_by_key(|&(_, seq)| seq)
    }

    /// Reads the point; `None` when missing or unreadable (recovery then scans everything).
    /// The `PointFile` says where the next store goes.
    pub async fn load(dir: &Path) -> (Option<RecoveryPoint>, PointFile) {
        let path = dir.join(FILE_NAME);
        let Ok(file) = uring::File::open_read(&path).await else {
            return (None, PointFile::default());
        };
        let Ok(bytes) = file.read_at(0, 2 * SLOT_BYTES).await else {
            return (None, PointFile::default());
        };
        match RecoveryPoint::decode(&bytes) {
            Some((point, seq)) => (
                Some(point),
                PointFile {
                    seq,
                    in_place: false,
                },
            ),
            None => {
                tracing::warn!(path = %path.display(), "recovery point unreadable; scanning the whole log");
                (None, PointFile::default())
            }
        }
    }

    /// Stores the point: in place into the older slot, or the whole file replaced (see the
    /// module's comment for which and why).
    pub async fn store(&self, dir: &Path, file: &mut PointFile) -> std::io::Result<()> {
        let seq = file.seq + 1;
        let path = dir.join(FILE_NAME);
        let opened = if file.in_place {
            match uring::File::open(&path, libc::O_WRONLY, 0).await {
                Ok(f) => Some(f),
                // Removed from under us: written again whole.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(e),
            }
        } else {
            None
        };
        if let Some(f) = opened {
            let slot = (seq % 2) * SLOT_BYTES as u64;
            f.write_all_at(slot, vec![WriteChunk::Owned(self.encode_slot(seq))])
                .await?;
        } else {
            let mut bytes = vec![0u8; 2 * SLOT_BYTES];
            let slot = (seq % 2) as usize * SLOT_BYTES;
            bytes[slot..slot + SLOT_BYTES].copy_from_slice(&self.encode_slot(seq));
            uring::write_atomically(&path, bytes).await?;
            file.in_place = true;
        }
        file.seq = seq;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(offset: i64) -> RecoveryPoint {
        RecoveryPoint {
            offset,
            segment_base: 100,
            position: 4096,
            max_timestamp: 17,
            offset_of_max_timestamp: 110,
        }
    }

    #[test]
    fn a_slot_encodes_and_decodes_and_a_damaged_one_is_refused() {
        let p = point(120);
        let slot = p.encode_slot(7);
        assert_eq!(slot.len(), SLOT_BYTES);
        assert_eq!(RecoveryPoint::decode_slot(&slot), Some((p, 7)));
        let mut torn = slot.clone();
        torn[4] ^= 1;
        assert_eq!(RecoveryPoint::decode_slot(&torn), None, "CRC");
        assert_eq!(RecoveryPoint::decode_slot(&[0u8; SLOT_BYTES]), None);
        assert_eq!(
            RecoveryPoint::decode_fields(&["1", "5", "0", "-1", "-1"]),
            None,
            "offset below its segment"
        );
    }

    #[test]
    fn the_newest_valid_slot_wins_and_the_legacy_format_is_read() {
        let mut file = point(150).encode_slot(4);
        file.extend(point(160).encode_slot(5));
        assert_eq!(RecoveryPoint::decode(&file), Some((point(160), 5)));
        file[SLOT_BYTES + 3] ^= 1; // the newer slot torn: the older one is used
        assert_eq!(RecoveryPoint::decode(&file), Some((point(150), 4)));
        assert_eq!(
            RecoveryPoint::decode(b"0\n120 100 4096 17 110\n"),
            Some((point(120), 0))
        );
        assert_eq!(RecoveryPoint::decode(b"1\n1 1 1 1 1\n"), None);
    }

    #[test]
    fn stores_go_in_place_after_the_first_and_a_lowered_point_replaces_the_file() {
        crate::testing::run_local(|| async {
            let dir = tempfile::tempdir().unwrap();
            let (none, mut file) = RecoveryPoint::load(dir.path()).await;
            assert_eq!(none, None);
            for offset in [120, 130, 140] {
                point(offset).store(dir.path(), &mut file).await.unwrap();
                assert_eq!(RecoveryPoint::load(dir.path()).await.0, Some(point(offset)));
            }
            let len = |d: &Path| std::fs::metadata(d.join(FILE_NAME)).unwrap().len();
            assert_eq!(len(dir.path()), 2 * SLOT_BYTES as u64);
            // A truncation lowers the point: the higher one must not survive in a slot.
            file.must_replace();
            point(101).store(dir.path(), &mut file).await.unwrap();
            let bytes = std::fs::read(dir.path().join(FILE_NAME)).unwrap();
            let slots: Vec<_> = bytes
                .chunks(SLOT_BYTES)
                .filter_map(RecoveryPoint::decode_slot)
                .collect();
            assert_eq!(slots, vec![(point(101), 4)]);
            // Reopened, the next store replaces the file again and then goes in place.
            let (loaded, mut file) = RecoveryPoint::load(dir.path()).await;
            assert_eq!(loaded, Some(point(101)));
            point(102).store(dir.path(), &mut file).await.unwrap();
            point(103).store(dir.path(), &mut file).await.unwrap();
            assert_eq!(RecoveryPoint::load(dir.path()).await.0, Some(point(103)));
            // A file removed from under the log is written again whole.
            std::fs::remove_file(dir.path().join(FILE_NAME)).unwrap();
            point(104).store(dir.path(), &mut file).await.unwrap();
            assert_eq!(RecoveryPoint::load(dir.path()).await.0, Some(point(104)));
        });
    }
}
