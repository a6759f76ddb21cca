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

/// Bytes an index file lacks: write `bytes` at `at`, cutting the file to `at` first if asked.
#[derive(Debug)]
pub(crate) struct IndexWrite {
    pub at: u64,
    pub cut_first: bool,
    pub bytes: Vec<u8>,
    pub entries_after: usize,
}

/// One fixed-size, big-endian index entry whose two fields both ascend.
trait Entry: Copy {
    const BYTES: usize;
    fn encode(&self, out: &mut Vec<u8>);
    fn decode(bytes: &[u8]) -> Self;
    /// Whether `self` may follow `prev` (both fields strictly greater).
    fn follows(&self, prev: &Self) -> bool;
}

impl Entry for (u32, u32) {
    const BYTES: usize = 8;
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0.to_be_bytes());
        out.extend_from_slice(&self.1.to_be_bytes());
    }
    fn decode(b: &[u8]) -> Self {
        (
            u32::from_be_bytes(b[0..4].try_into().expect("4 bytes")),
            u32::from_be_bytes(b[4..8].try_into().expect("4 bytes")),
        )
    }
    fn follows(&self, prev: &Self) -> bool {
        self.0 > prev.0 && self.1 > prev.1
    }
}

impl Entry for (i64, u32) {
    const BYTES: usize = 12;
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0.to_be_bytes());
        out.extend_from_slice(&self.1.to_be_bytes());
    }
    fn decode(b: &[u8]) -> Self {
        (
            i64::from_be_bytes(b[0..8].try_into().expect("8 bytes")),
            u32::from_be_bytes(b[8..12].try_into().expect("4 bytes")),
        )
    }
    fn follows(&self, prev: &Self) -> bool {
        self.0 > prev.0 && self.1 > prev.1
    }
}

/// Entries in memory, and how much of them the file already holds.
#[derive(Clone, Debug)]
struct Entries<E> {
    entries: Vec<E>,
    /// Entries already in the file; the rest are written at the next persist.
    persisted: usize,
    /// The file holds entries beyond `entries` (after a truncation) and must be cut first.
    file_longer: bool,
}

impl<E> Default for Entries<E> {
    fn default() -> Self {
        Entries {
            entries: Vec::new(),
            persisted: 0,
            file_longer: false,
        }
    }
}

impl<E: Entry> Entries<E> {
    fn truncate(&mut self, keep: usize) {
        if keep < self.persisted {
            self.persisted = keep;
            self.file_longer = true;
        }
        self.entries.truncate(keep);
    }

    fn unpersisted(&self) -> IndexWrite {
        let mut bytes = Vec::with_capacity((self.entries.len() - self.persisted) * E::BYTES);
        for e in &self.entries[self.persisted..] {
            e.encode(&mut bytes);
        }
        IndexWrite {
            at: (self.persisted * E::BYTES) as u64,
            cut_first: self.file_longer,
            bytes,
            entries_after: self.entries.len(),
        }
    }

    /// The file now holds the first `write.entries_after` entries (unless a truncation since).
    fn mark_persisted(&mut self, write: &IndexWrite) {
        if write.entries_after <= self.entries.len() {
            self.persisted = write.entries_after;
            self.file_longer = false;
        }
    }

    /// Parses a file; `check` refuses entries that point outside the segment.
    fn decode(bytes: &[u8], check: impl Fn(&E) -> bool) -> Result<Entries<E>, Damaged> {
        if bytes.len() % E::BYTES != 0 {
            return Err(Damaged("index length is not a whole number of entries"));
        }
        let mut out = Entries::default();
        for raw in bytes.chunks_exact(E::BYTES) {
            let e = E::decode(raw);
            if !check(&e) {
                return Err(Damaged("index entry points beyond the segment"));
            }
            if out.entries.last().is_some_and(|prev| !e.follows(prev)) {
                return Err(Damaged("index entries do not ascend"));
            }
            out.entries.push(e);
        }
        out.persisted = out.entries.len();
        Ok(out)
    }
}

#[derive(Clone, Debug, Default)]
pub(crate) struct OffsetIndex(Entries<(u32, u32)>);

impl OffsetIndex {
    pub fn append(&mut self, relative_offset: u32, position: u32) {
        let e = (relative_offset, position);
        assert!(
            self.0.entries.last().is_none_or(|prev| e.follows(prev)),
            "index offsets and positions ascend"
        );
        self.0.entries.push(e);
    }

    pub fn len(&self) -> usize {
        self.0.entries.len()
    }

    pub fn last(&self) -> Option<(u32, u32)> {
        self.0.entries.last().copied()
    }

    pub fn first(&self) -> Option<(u32, u32)> {
        self.0.entries.first().copied()
    }

    /// The entry with the largest offset at or below `relative_offset`, else the segment start.
    pub fn lookup(&self, relative_offset: u32) -> (u32, u32) {
        let e = &self.0.entries;
        match e.partition_point(|&(o, _)| o <= relative_offset) {
            0 => (0, 0),
            i => e[i - 1],
        }
    }

    /// The entry with the largest position at or below `position`, else the segment start.
    pub fn lookup_position(&self, position: u32) -> (u32, u32) {
        let e = &self.0.entries;
        match e.partition_point(|&(_, p)| p <= position) {
            0 => (0, 0),
            i => e[i - 1],
        }
    }

    /// Drops entries whose batch starts at or after `position`.
    pub fn truncate_to_position(&mut self, position: u32) {
        let keep = self.0.entries.partition_point(|&(_, p)| p < position);
        self.0.truncate(keep);
    }

    pub fn unpersisted(&self) -> IndexWrite {
        self.0.unpersisted()
    }

    pub fn mark_persisted(&mut self, write: &IndexWrite) {
        self.0.mark_persisted(write)
    }

    /// Parses an index file; every entry must ascend and point inside the first `valid_bytes`
    /// of the segment.
    pub fn decode(bytes: &[u8], valid_bytes: u64) -> Result<OffsetIndex, Damaged> {
        Entries::decode(bytes, |&(_, p)| (p as u64) < valid_bytes).map(OffsetIndex)
    }
}

#[derive(Clone, Debug, Default)]
pub(crate) struct TimeIndex(Entries<(i64, u32)>);

impl TimeIndex {
    /// Records that batches before `relative_offset` have timestamps at most `timestamp`; kept
    /// only when both grow, so the entries ascend in both fields.
    pub fn maybe_append(&mut self, timestamp: i64, relative_offset: u32) {
        let e = (timestamp, relative_offset);
        if self.0.entries.last().is_none_or(|prev| e.follows(prev)) {
            self.0.entries.push(e);
        }
    }

    pub fn last(&self) -> Option<(i64, u32)> {
        self.0.entries.last().copied()
    }

    /// Where to start scanning for the first batch with a timestamp at or above `timestamp`:
    /// the offset of the last entry below it, or the segment start.
    pub fn scan_start(&self, timestamp: i64) -> u32 {
        let e = &self.0.entries;
        match e.partition_point(|&(t, _)| t < timestamp) {
            0 => 0,
            i => e[i - 1].1,
        }
    }

    /// Drops entries at or beyond `relative_offset`.
    pub fn truncate_to_offset(&mut self, relative_offset: u32) {
        let keep = self
            .0
            .entries
            .partition_point(|&(_, o)| o < relative_offset);
        self.0.truncate(keep);
    }

    pub fn unpersisted(&self) -> IndexWrite {
        self.0.unpersisted()
    }

    pub fn mark_persisted(&mut self, write: &IndexWrite) {
        self.0.mark_persisted(write)
    }

    /// Parses a time index; offsets must not exceed `offset_limit` (relative: the segment's
    /// offset span, which the final entry of a sealed segment names).
    pub fn decode(bytes: &[u8], offset_limit: u64) -> Result<TimeIndex, Damaged> {
        Entries::decode(bytes, |&(_, o)| (o as u64) <= offset_limit).map(TimeIndex)
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
