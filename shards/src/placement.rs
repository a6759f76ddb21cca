//! Which shard owns which partition: balanced by partition count.
//!
//! The table itself lives with the topic metadata (persisted, a copy on every shard); this is
//! how entries are chosen.

use std::fmt;

/// A shard: one pinned executor, numbered from 0.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ShardId(pub usize);

impl fmt::Display for ShardId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Picks a shard for each of `count` new partitions, each time the one owning fewest so far
/// (lowest id on ties), and counts them in `owned`.
pub fn assign_balanced(owned: &mut [usize], count: usize) -> Vec<ShardId> {
    assert!(!owned.is_empty(), "at least one shard");
    (0..count)
        .map(|_| {
            let (i, _) = owned
                .iter()
                .enumerate()
                .min_by_key(|&(i, n)| (*n, i))
                .expect("non-empty");
            owned[i] += 1;
            ShardId(i)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_partitions_go_to_the_least_loaded_shards() {
        let mut owned = vec![0, 0];
        let first = assign_balanced(&mut owned, 8);
        assert_eq!(owned, vec![4, 4]);
        assert_eq!(first[0], ShardId(0));
        assert_eq!(first[1], ShardId(1));
        let mut uneven = vec![5, 1, 3];
        let next = assign_balanced(&mut uneven, 3);
        assert_eq!(next, vec![ShardId(1); 3]);
        assert_eq!(uneven, vec![5, 4, 3]);
    }
}
