//! Whether the brokers can hold the partitions a topic change adds (`shard::capacity` has the
//! bounds): checked for each topic of a request in turn, counting those accepted before it,
//! and before anything is written.

use super::TopicError;
use crate::metadata::ClusterMetadata;
use crate::shard::capacity::open_descriptors;
use crate::shard::Shard;
use ferrite_shards::placement::{assign_balanced, ShardId};
use std::collections::BTreeMap;

/// A single broker's partitions per shard, as a request places new ones.
pub(super) struct ShardLoad {
    per_shard: Vec<usize>,
    /// Partitions placed by this request so far (not yet open, so not in /proc/self/fd).
    added: usize,
    /// Descriptors open when the request began.
    open_now: u64,
}

impl ShardLoad {
    pub fn of(shard: &Shard, metadata: &ClusterMetadata) -> ShardLoad {
        ShardLoad {
            per_shard: metadata.partitions_per_shard(shard.router().shard_count()),
            added: 0,
            open_now: open_descriptors(),
        }
    }

    /// Places `count` new partitions on the least loaded shards, if the process can hold them;
    /// a refusal places nothing.
    pub fn place(&mut self, shard: &Shard, count: usize) -> Result<Vec<ShardId>, TopicError> {
        let mut after = self.per_shard.clone();
        let placed = assign_balanced(&mut after, count);
        shard
            .capacity
            .check_partitions(&after, self.added + count, self.open_now)
            .map_err(TopicError::InvalidPartitions)?;
        self.per_shard = after;
        self.added += count;
        Ok(placed)
    }
}

/// Every live broker's replicas per shard in a cluster, shards counted as on this broker (a
/// replica's shard is `cluster::shard_for`, and brokers are assumed to run as many shards).
pub(super) struct ClusterLoad {
    shards: usize,
    per_broker: BTreeMap<i32, Vec<usize>>,
    /// Replicas placed on this broker by this request so far.
    added_here: usize,
    /// This broker's descriptors open when the request began.
    open_now: u64,
}

impl ClusterLoad {
    pub fn of(shard: &Shard, metadata: &ClusterMetadata) -> ClusterLoad {
        let shards = shard.router().shard_count();
        let mut per_broker: BTreeMap<i32, Vec<usize>> = metadata
            .brokers
            .iter()
            .map(|b| (b.node_id, vec![0; shards]))
            .collect();
        for topic in metadata.topics.values() {
            for p in &topic.partitions {
                for r in &p.replicas {
                    if let Some(counts) = per_broker.get_mut(r) {
                        counts[p.shard.0 % shards] += 1;
                    }
                }
            }
        }
        ClusterLoad {
            shards,
            per_broker,
            added_here: 0,
            open_now: open_descriptors(),
        }
    }

    /// Counts the replicas of `topic`'s partitions `first_index..` (one list per partition) if
    /// every broker can hold them; a refusal counts nothing.
    pub fn place(
        &mut self,
        shard: &Shard,
        topic: &str,
        first_index: usize,
        replicas: &[Vec<i32>],
    ) -> Result<(), TopicError> {
        let mut after = self.per_broker.clone();
        let mut added: BTreeMap<i32, usize> = BTreeMap::new();
        for (i, partition) in replicas.iter().enumerate() {
            let s = crate::cluster::shard_for(topic, (first_index + i) as i32, self.shards);
            for r in partition {
                if let Some(counts) = after.get_mut(r) {
                    counts[s] += 1;
                    *added.entry(*r).or_default() += 1;
                }
            }
        }
        let here = shard.config.node_id;
        for (node, counts) in &after {
            let n = added.get(node).copied().unwrap_or(0);
            let checked = if *node == here {
                shard
                    .capacity
                    .check_partitions(counts, self.added_here + n, self.open_now)
            } else {
                shard.capacity.check_shards(counts, n)
            };
            checked.map_err(|e| TopicError::InvalidPartitions(format!("broker {node}: {e}")))?;
        }
        self.added_here += added.get(&here).copied().unwrap_or(0);
        self.per_broker = after;
        Ok(())
    }
}
