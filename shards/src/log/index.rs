//! The sparse indexes of a segment, in Kafka's file formats.
//!
//! `.index`: entries of (relative offset u32, file position u32), big-endian, ascending in both.
//! The key is the base offset of the batch that starts at the position, so a lookup lands on the
//! batch to read first. `.timeindex`: entries of (timestamp i64, relative offset u32); each entry
//! says "every batch before this offset has a timestamp at or below this one".
//!
//! The in-memory vectors are the truth while the log runs; files are written at checkpoints and
//! rolls, and checked (then trusted or rebuilt) on open.
//!
//! Lives on: the shard that owns the partition.

/// Why an index file could not be trusted.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Damaged(pub &'static str);

pub(crate) const OFFSET_ENTRY_BYTES: usize = 8;

/// Bytes an index file lacks: write `bytes` at `at`, cutting the file to `at` first if asked.
#[derive(Debug)]
pub(crate) struct IndexWrite {
    pub at: u64,
    pub cut_first: bool,
    pub bytes: Vec<u8>,
    pub entries_after: usize,
}
pub(crate) const TIME_ENTRY_BYTES: usize = 12;

#[derive(Clone, Debug, Default)]
pub(crate) struct OffsetIndex {
    entries: Vec<(u32, u32)>,
    /// Entries already in the file; the rest are written at the next persist.
    persisted: usize,
    /// The file holds entries beyond `entries` (after a truncation) and must be cut first.
    file_longer: bool,
}

impl OffsetIndex {
    pub fn append(&mut self, relative_offset: u32, position: u32) {
        if let Some(&(last_off, last_pos)) = self.entries.last() {
            assert!(relative_offset > last_off, "index offsets ascend");
            assert!(position > last_pos, "index positions ascend");
        }
        self.entries.push((relative_offset, position));
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn last(&self) -> Option<(u32, u32)> {
        self.entries.last().copied()
    }

    pub fn first(&self) -> Option<(u32, u32)> {
        self.entries.first().copied()
    }

    /// The entry with the largest offset at or below `relative_offset`, else the segment start.
    pub fn lookup(&self, relative_offset: u32) -> (u32, u32) {
        let i = self.entries.partition_point(|&(o, _)| o <= relative_offset);
        if i == 0 {
            (0, 0)
        } else {
            self.entries[i - 1]
        }
    }

    /// The entry with the largest position at or below `position`, else the segment start.
    pub fn lookup_position(&self, position: u32) -> (u32, u32) {
        let i = self.entries.partition_point(|&(_, p)| p <= position);
        if i == 0 {
            (0, 0)
        } else {
            self.entries[i - 1]
        }
    }

    /// Drops entries whose batch starts at or after `position`.
    pub fn truncate_to_position(&mut self, position: u32) {
        let keep = self.entries.partition_point(|&(_, p)| p < position);
        self.truncate_entries(keep);
    }

    fn truncate_entries(&mut self, keep: usize) {
        if keep < self.persisted {
            self.persisted = keep;
            self.file_longer = true;
        }
        self.entries.truncate(keep);
    }

    /// What the file lacks; write it, then call `mark_persisted` with it.
    pub fn unpersisted(&self) -> IndexWrite {
        let mut bytes =
            Vec::with_capacity((self.entries.len() - self.persisted) * OFFSET_ENTRY_BYTES);
        for &(o, p) in &self.entries[self.persisted..] {
            bytes.extend_from_slice(&o.to_be_bytes());
            bytes.extend_from_slice(&p.to_be_bytes());
        }
        IndexWrite {
            at: (self.persisted * OFFSET_ENTRY_BYTES) as u64,
            cut_first: self.file_longer,
            bytes,
            entries_after: self.entries.len(),
        }
    }

    /// The file now holds the first `write.entries_after` entries (unless a truncation since).
    pub fn mark_persisted(&mut self, write: &IndexWrite) {
        if write.entries_after <= self.entries.len() {
            self.persisted = write.entries_after;
            self.file_longer = false;
        }
    }

    /// Parses an index file; every entry must ascend and point inside the first `valid_bytes`
    /// of the segment.
    pub fn decode(bytes: &[u8], valid_bytes: u64) -> Result<OffsetIndex, Damaged> {
        if bytes.len() % OFFSET_ENTRY_BYTES != 0 {
            return Err(Damaged("index length is not a whole number of entries"));
        }
        let mut index = OffsetIndex::default();
        for entry in bytes.chunks_exact(OFFSET_ENTRY_BYTES) {
            let o = u32::from_be_bytes(entry[0..4].try_into().expect("4 bytes"));
            let p = u32::from_be_bytes(entry[4..8].try_into().expect("4 bytes"));
            if p as u64 >= valid_bytes {
                return Err(Damaged("index entry points beyond the segment"));
            }
            if let Some(&(lo, lp)) = index.entries.last() {
                if o <= lo || p <= lp {
                    return Err(Damaged("index entries do not ascend"));
                }
            }
            index.entries.push((o, p));
        }
        index.persisted = index.entries.len();
        Ok(index)
    }
}

#[derive(Clone, Debug, Default)]
pub(crate) struct TimeIndex {
    entries: Vec<(i64, u32)>,
    persisted: usize,
    file_longer: bool,
}

impl TimeIndex {
    /// Records that batches up to `relative_offset` have timestamps at most `timestamp`; kept
    /// only when the timestamp grows, so the entries ascend in both fields.
    pub fn maybe_append(&mut self, timestamp: i64, relative_offset: u32) {
        match self.entries.last() {
            Some(&(t, o)) if timestamp <= t || relative_offset <= o => {}
            _ => self.entries.push((timestamp, relative_offset)),
        }
    }

    pub fn last(&self) -> Option<(i64, u32)> {
        self.entries.last().copied()
    }

    /// Where to start scanning for the first batch with a timestamp at or above `timestamp`:
    /// the offset of the last entry below it, or the segment start.
    pub fn scan_start(&self, timestamp: i64) -> u32 {
        let i = self.entries.partition_point(|&(t, _)| t < timestamp);
        if i == 0 {
            0
        } else {
            self.entries[i - 1].1
        }
    }

    /// Drops entries at or beyond `relative_offset`.
    pub fn truncate_to_offset(&mut self, relative_offset: u32) {
        let keep = self.entries.partition_point(|&(_, o)| o < relative_offset);
        if keep < self.persisted {
            self.persisted = keep;
            self.file_longer = true;
        }
        self.entries.truncate(keep);
    }

    pub fn unpersisted(&self) -> IndexWrite {
        let mut bytes =
            Vec::with_capacity((self.entries.len() - self.persisted) * TIME_ENTRY_BYTES);
        for &(t, o) in &self.entries[self.persisted..] {
            bytes.extend_from_slice(&t.to_be_bytes());
            bytes.extend_from_slice(&o.to_be_bytes());
        }
        IndexWrite {
            at: (self.persisted * TIME_ENTRY_BYTES) as u64,
            cut_first: self.file_longer,
            bytes,
            entries_after: self.entries.len(),
        }
    }

    pub fn mark_persisted(&mut self, write: &IndexWrite) {
        if write.entries_after <= self.entries.len() {
            self.persisted = write.entries_after;
            self.file_longer = false;
        }
    }

    /// Parses a time index; offsets must not exceed `offset_limit` (relative: the segment's
    /// offset span, which the final entry of a sealed segment names).
    pub fn decode(bytes: &[u8], offset_limit: u64) -> Result<TimeIndex, Damaged> {
        if bytes.len() % TIME_ENTRY_BYTES != 0 {
            return Err(Damaged(
                "time index length is not a whole number of entries",
            ));
        }
        let mut index = TimeIndex::default();
        for entry in bytes.chunks_exact(TIME_ENTRY_BYTES) {
            let t = i64::from_be_bytes(entry[0..8].try_into().expect("8 bytes"));
            let o = u32::from_be_bytes(entry[8..12].try_into().expect("4 bytes"));
            if o as u64 > offset_limit {
                return Err(Damaged("time index entry points beyond the segment"));
            }
            if let Some(&(lt, lo)) = index.entries.last() {
                if t <= lt || o <= lo {
                    return Err(Damaged("time index entries do not ascend"));
                }
            }
            index.entries.push((t, o));
        }
        index.persisted = index.entries.len();
        Ok(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_lookup_finds_the_entry_at_or_below() {
        let mut index = OffsetIndex::default();
        index.append(0, 0);
        index.append(10, 4096);
        index.append(25, 9000);
        assert_eq!(index.lookup(0), (0, 0));
        assert_eq!(index.lookup(9), (0, 0));
        assert_eq!(index.lookup(10), (10, 4096));
        assert_eq!(index.lookup(1000), (25, 9000));
        assert_eq!(index.lookup_position(5000), (10, 4096));
        index.truncate_to_position(4096);
        assert_eq!(index.len(), 1);
    }

    #[test]
    fn offset_index_round_trips_and_rejects_damage() {
        let mut index = OffsetIndex::default();
        index.append(0, 0);
        index.append(3, 100);
        let w = index.unpersisted();
        assert_eq!((w.at, w.cut_first), (0, false));
        let bytes = w.bytes;
        let back = OffsetIndex::decode(&bytes, 200).unwrap();
        assert_eq!(back.lookup(5), (3, 100));
        assert!(OffsetIndex::decode(&bytes[..7], 200).is_err());
        assert!(
            OffsetIndex::decode(&bytes, 50).is_err(),
            "entry beyond the segment"
        );
        let mut swapped = bytes.clone();
        swapped.rotate_left(8);
        assert!(OffsetIndex::decode(&swapped, 200).is_err(), "not ascending");
    }

    #[test]
    fn truncating_persisted_entries_asks_for_a_cut() {
        let mut index = OffsetIndex::default();
        index.append(0, 0);
        index.append(5, 50);
        let w = index.unpersisted();
        index.mark_persisted(&w);
        index.truncate_to_position(50);
        index.append(6, 60);
        let w = index.unpersisted();
        assert_eq!((w.at, w.cut_first, w.bytes.len()), (8, true, 8));
    }

    #[test]
    fn time_index_keeps_growing_timestamps_only() {
        let mut t = TimeIndex::default();
        t.maybe_append(100, 0);
        t.maybe_append(90, 4);
        t.maybe_append(200, 8);
        assert_eq!(t.last(), Some((200, 8)));
        assert_eq!(t.scan_start(50), 0);
        assert_eq!(t.scan_start(150), 0);
        assert_eq!(t.scan_start(201), 8);
        t.truncate_to_offset(8);
        assert_eq!(t.last(), Some((100, 0)));
    }
}
