//! Which byte ranges of a segment have been validated since the log was opened.
//!
//! Batches appended by this process were validated before they were written, and recovery
//! validates what it scans. Older bytes — below the recovery point, trusted at open without
//! reading — are validated the first time a fetch reads them, so corruption there is reported
//! instead of served; after that they are spliced without being read.

/// Disjoint, sorted, merged `[start, end)` ranges. Sequential readers keep it at a few ranges.
#[derive(Clone, Debug, Default)]
pub(crate) struct VerifiedRanges {
    ranges: Vec<(u64, u64)>,
}

/// Ranges kept before the oldest are forgotten (they are verified again if read again).
const RANGES_MAX: usize = 64;

impl VerifiedRanges {
    pub fn contains(&self, start: u64, end: u64) -> bool {
        let i = self.ranges.partition_point(|&(_, e)| e < end);
        self.ranges
            .get(i)
            .is_some_and(|&(s, e)| s <= start && end <= e)
    }

    pub fn insert(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        let mut new = (start, end);
        self.ranges.retain(|&(s, e)| {
            let overlaps = s <= new.1 && new.0 <= e;
            if overlaps {
                new = (new.0.min(s), new.1.max(e));
            }
            !overlaps
        });
        let at = self.ranges.partition_point(|&(s, _)| s < new.0);
        self.ranges.insert(at, new);
        if self.ranges.len() > RANGES_MAX {
            // Forget the smallest range: it is the one least likely to be read again soon.
            if let Some(i) =
                (0..self.ranges.len()).min_by_key(|&i| self.ranges[i].1 - self.ranges[i].0)
            {
                self.ranges.remove(i);
            }
        }
    }

    /// Forgets everything at or after `position` (the segment was truncated there).
    pub fn truncate(&mut self, position: u64) {
        self.ranges.retain(|&(s, _)| s < position);
        if let Some(last) = self.ranges.last_mut() {
            last.1 = last.1.min(position);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_and_answer_containment() {
        let mut v = VerifiedRanges::default();
        v.insert(100, 200);
        v.insert(300, 400);
        assert!(v.contains(120, 180));
        assert!(!v.contains(150, 350));
        v.insert(200, 300);
        assert!(v.contains(150, 350), "adjacent ranges merge");
        v.truncate(250);
        assert!(v.contains(100, 250));
        assert!(!v.contains(100, 251));
        assert!(!v.contains(0, 10));
    }

    #[test]
    fn the_number_of_ranges_is_bounded() {
        let mut v = VerifiedRanges::default();
        for i in 0..1000u64 {
            v.insert(i * 10, i * 10 + 5);
        }
        assert!(v.ranges.len() <= RANGES_MAX);
    }
}
