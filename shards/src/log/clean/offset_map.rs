//! Key → latest offset over the dirty part of a log, within a fixed memory budget.
//!
//! Keys are stored as 128-bit hashes (two independently keyed SipHashes), as Kafka stores MD5
//! digests: the map's size does not depend on key sizes, and a collision (which would make the
//! cleaner drop a record whose key only shares a hash with a newer one) is as unlikely as an
//! MD5 collision of random keys.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;

/// Budgeted bytes per entry: the 16-byte hash, the 8-byte offset, and the table's slack (a
/// swiss table runs at most 7/8 full and doubles when it grows).
const BYTES_PER_ENTRY: usize = 48;

pub(crate) struct OffsetMap {
    hashers: (RandomState, RandomState),
    latest: HashMap<u128, i64>,
    capacity: usize,
}

impl OffsetMap {
    /// A map within `bytes`, for at most `entries_needed` keys. The table is sized once, up
    /// front, so it never grows past the budget.
    pub fn with_memory(bytes: usize, entries_needed: usize) -> OffsetMap {
        let capacity = (bytes / BYTES_PER_ENTRY).clamp(1, entries_needed.max(1));
        OffsetMap {
            hashers: (RandomState::new(), RandomState::new()),
            latest: HashMap::with_capacity(capacity),
            capacity,
        }
    }

    fn digest(&self, key: &[u8]) -> u128 {
        let high = self.hashers.0.hash_one(key) as u128;
        let low = self.hashers.1.hash_one(key) as u128;
        high << 64 | low
    }

    /// Records `offset` as the latest for `key`; false when a new key does not fit.
    pub fn put(&mut self, key: &[u8], offset: i64) -> bool {
        let digest = self.digest(key);
        if let Some(latest) = self.latest.get_mut(&digest) {
            *latest = (*latest).max(offset);
            return true;
        }
        if self.latest.len() >= self.capacity {
            return false;
        }
        self.latest.insert(digest, offset);
        true
    }

    pub fn latest(&self, key: &[u8]) -> Option<i64> {
        self.latest.get(&self.digest(key)).copied()
    }

    pub fn len(&self) -> usize {
        self.latest.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_latest_offset_and_refuses_new_keys_when_full() {
        let mut m = OffsetMap::with_memory(2 * BYTES_PER_ENTRY, 100);
        assert!(m.put(b"a", 1));
        assert!(m.put(b"b", 2));
        assert!(m.put(b"a", 5), "a known key always fits");
        assert!(!m.put(b"c", 6));
        assert_eq!(m.latest(b"a"), Some(5));
        assert_eq!(m.latest(b"c"), None);
        assert_eq!(m.len(), 2);
    }
}
