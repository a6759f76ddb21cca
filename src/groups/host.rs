//! What the group coordinator needs from the shard it runs on, and nothing more: its
//! `__consumer_offsets` partitions and a few questions about the metadata. The shard is one
//! `GroupHost`; the coordinator's tests have another, on a temporary directory.

use ferrite_shards::partition::Partition;
use std::rc::Rc;

pub trait GroupHost {
    /// This shard's `__consumer_offsets` partition `index`, if it is open here.
    fn offsets_partition(&self, index: i32) -> Option<Rc<Partition>>;
    /// How many partitions `__consumer_offsets` has (a group lives in hash(group) % this).
    fn offsets_partition_count(&self) -> i32;
    /// Whether `topic`-`partition` exists: commits to anything else are refused.
    fn has_partition(&self, topic: &str, partition: i32) -> bool;
    /// The shard is stopping: timers and sweeps end.
    fn is_shutting_down(&self) -> bool;
}
