//! The shard's cache of recently appended batches (direct mode).
//!
//! O_DIRECT writes bypass the page cache, so a consumer tailing the log would otherwise read
//! each batch back from the device. Each log keeps its recent batches in order; one FIFO across
//! all logs of the shard bounds the total bytes, evicting the oldest batch shard-wide first.
//!
//! Lives on: one shard, shared by the logs it owns.

use crate::batch::Stamp;
use bytes::Bytes;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::{Rc, Weak};

/// A batch as written: its stamped prefix and the rest as the client sent it.
#[derive(Clone, Debug)]
pub(crate) struct CachedBatch {
    pub base_offset: i64,
    pub last_offset: i64,
    pub stamp: Stamp,
    pub body: Bytes,
}

impl CachedBatch {
    pub fn len(&self) -> usize {
        self.stamp.len() + self.body.len()
    }
}

/// One log's cached batches, ascending and contiguous in offset.
pub(crate) type Entries = Rc<RefCell<VecDeque<CachedBatch>>>;

/// Where an inserted batch lives: its log's entries, its base offset, its size.
type FifoEntry = (Weak<RefCell<VecDeque<CachedBatch>>>, i64, usize);

pub struct BatchCache {
    capacity_bytes: usize,
    used_bytes: Cell<usize>,
    /// Insertion order across logs: (log's entries, base offset, bytes).
    fifo: RefCell<VecDeque<FifoEntry>>,
    hits: Cell<u64>,
    misses: Cell<u64>,
}

impl BatchCache {
    pub fn new(capacity_bytes: usize) -> Rc<BatchCache> {
        Rc::new(BatchCache {
            capacity_bytes,
            used_bytes: Cell::new(0),
            fifo: RefCell::new(VecDeque::new()),
            hits: Cell::new(0),
            misses: Cell::new(0),
        })
    }

    pub fn capacity_bytes(&self) -> usize {
        self.capacity_bytes
    }

    pub fn used_bytes(&self) -> usize {
        self.used_bytes.get()
    }

    /// (hits, misses) of reads that asked the cache.
    pub fn hit_counts(&self) -> (u64, u64) {
        (self.hits.get(), self.misses.get())
    }

    pub(crate) fn new_entries() -> Entries {
        Rc::new(RefCell::new(VecDeque::new()))
    }

    pub(crate) fn insert(&self, entries: &Entries, batch: CachedBatch) {
        let len = batch.len();
        if len > self.capacity_bytes {
            return;
        }
        while self.used_bytes.get() + len > self.capacity_bytes {
            if !self.evict_oldest() {
                break;
            }
        }
        {
            let mut e = entries.borrow_mut();
            debug_assert!(e.back().is_none_or(|b| b.last_offset < batch.base_offset));
            e.push_back(batch.clone());
        }
        self.fifo
            .borrow_mut()
            .push_back((Rc::downgrade(entries), batch.base_offset, len));
        self.used_bytes.set(self.used_bytes.get() + len);
    }

    fn evict_oldest(&self) -> bool {
        let Some((log, base, _)) = self.fifo.borrow_mut().pop_front() else {
            return false;
        };
        if let Some(entries) = log.upgrade() {
            let mut e = entries.borrow_mut();
            if e.front().is_some_and(|f| f.base_offset == base) {
                let gone = e.pop_front().expect("front exists");
                self.used_bytes.set(self.used_bytes.get() - gone.len());
            }
        }
        true
    }

    /// Drops a log's entries at or after `offset` (truncation) or before it (retention).
    pub(crate) fn forget(&self, entries: &Entries, keep: impl Fn(&CachedBatch) -> bool) {
        let mut e = entries.borrow_mut();
        let before: usize = e.iter().map(CachedBatch::len).sum();
        e.retain(|b| keep(b));
        let after: usize = e.iter().map(CachedBatch::len).sum();
        self.used_bytes
            .set(self.used_bytes.get() - (before - after));
    }

    /// Cached batches from the one holding `from`, whole, up to `max_bytes` (the first always)
    /// and below `upper`. `None` when `from` is not cached.
    pub(crate) fn read(
        &self,
        entries: &Entries,
        from: i64,
        max_bytes: usize,
        upper: i64,
    ) -> Option<Vec<CachedBatch>> {
        let e = entries.borrow();
        let first = e.front()?;
        if from < first.base_offset {
            self.misses.set(self.misses.get() + 1);
            return None;
        }
        let start = e.partition_point(|b| b.last_offset < from);
        if start == e.len() {
            self.misses.set(self.misses.get() + 1);
            return None;
        }
        let mut out = Vec::new();
        let mut bytes = 0usize;
        for b in e.iter().skip(start) {
            if b.base_offset >= upper || (!out.is_empty() && bytes + b.len() > max_bytes) {
                break;
            }
            bytes += b.len();
            out.push(b.clone());
        }
        self.hits.set(self.hits.get() + 1);
        Some(out)
    }
}

impl Drop for BatchCache {
    fn drop(&mut self) {
        debug_assert!(self.used_bytes.get() <= self.capacity_bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(base: i64, len: usize) -> CachedBatch {
        CachedBatch {
            base_offset: base,
            last_offset: base,
            stamp: [0; 16],
            body: Bytes::from(vec![0u8; len - 16]),
        }
    }

    #[test]
    fn oldest_batches_go_first_across_logs() {
        let cache = BatchCache::new(300);
        let a = BatchCache::new_entries();
        let b = BatchCache::new_entries();
        cache.insert(&a, batch(0, 100));
        cache.insert(&b, batch(0, 100));
        cache.insert(&a, batch(1, 100));
        cache.insert(&b, batch(1, 100));
        assert_eq!(cache.used_bytes(), 300);
        assert_eq!(
            a.borrow().front().unwrap().base_offset,
            1,
            "a's oldest evicted"
        );
        assert!(cache.read(&a, 0, 1000, 10).is_none());
        let got = cache.read(&b, 0, 1000, 10).unwrap();
        assert_eq!(got.len(), 2);
        let capped = cache.read(&b, 0, 150, 10).unwrap();
        assert_eq!(capped.len(), 1, "max bytes, first batch always");
        let below_upper = cache.read(&b, 0, 1000, 1).unwrap();
        assert_eq!(below_upper.len(), 1);
        cache.forget(&b, |x| x.base_offset < 1);
        assert_eq!(cache.used_bytes(), 200);
    }
}
