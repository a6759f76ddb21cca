//! What the transaction coordinator needs from the shard it runs on: its `__transaction_state`
//! partitions, producer ids, and a way to write markers. The shard is one `TxnHost`.

use crate::protocol::errors::ErrorCode;
use ferrite_shards::batch::control::MarkerRecord;
use ferrite_shards::partition::Partition;
use futures::future::LocalBoxFuture;
use std::rc::Rc;

/// The marker that ends one producer's transaction: its producer, epoch, outcome, and the
/// coordinator's epoch. The same marker goes to every partition of the transaction.
#[derive(Clone, Copy, Debug)]
pub struct TxnMarker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub marker: MarkerRecord,
}

/// A topic's partition, as markers address them.
pub type TopicPartition = (String, i32);

pub trait TxnHost {
    /// This shard's `__transaction_state` partition `index`, if it is open here.
    fn state_partition(&self, index: i32) -> Option<Rc<Partition>>;
    /// How many partitions `__transaction_state` has (an id lives in hash(id) % this).
    fn state_partition_count(&self) -> i32;
    /// A producer id no one else has (the controller's block).
    fn allocate_producer_id(&self) -> LocalBoxFuture<'_, Result<i64, ErrorCode>>;
    /// Whether `topic`-`partition` exists: a marker for a deleted partition is dropped.
    fn has_partition(&self, topic: &str, partition: i32) -> bool;
    /// Writes `marker` on each partition's leader and waits until it is committed; for a
    /// `__consumer_offsets` partition the group coordinator then applies (or drops) the
    /// transaction's offsets. One answer per partition, in order. The partitions sharing a
    /// leader (a shard here, a broker elsewhere) go to it in one call.
    fn write_markers(
        &self,
        marker: TxnMarker,
        partitions: Vec<TopicPartition>,
    ) -> LocalBoxFuture<'_, Vec<Result<(), ErrorCode>>>;
    /// The shard is stopping: timers and retries end.
    fn is_shutting_down(&self) -> bool;
}
