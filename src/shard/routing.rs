//! Reaching a partition: find its owner shard in the metadata, run the work there.

use crate::protocol::errors::ErrorCode;
use crate::shard::Shard;
use ferrite_shards::partition::Partition;
use ferrite_shards::placement::ShardId;
use futures::future::LocalBoxFuture;
use std::future::Future;
use std::rc::Rc;

/// Runs `f` on the shard that owns `topic`/`index`, with the partition. A partition that does
/// not exist (or is not open yet) is UNKNOWN_TOPIC_OR_PARTITION; one this broker does not lead
/// is NOT_LEADER_OR_FOLLOWER.
pub async fn on_partition<R, F>(
    shard: &Shard,
    topic: &str,
    index: i32,
    f: F,
) -> Result<R, ErrorCode>
where
    R: Send + 'static,
    F: FnOnce(Rc<Partition>) -> LocalBoxFuture<'static, R> + Send + 'static,
{
    let metadata = shard.metadata();
    let Some(info) = metadata.partition(topic, index) else {
        return Err(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION);
    };
    // Only the leader answers for a partition; a client elsewhere refreshes its metadata.
    if !shard.leads(info) {
        return Err(ErrorCode::NOT_LEADER_OR_FOLLOWER);
    }
    let owner = info.shard;
    let topic = topic.to_string();
    on_shard(shard, owner, move |s| async move {
        match s.partition(&topic, index) {
            Some(p) => Ok(f(p).await),
            None => Err(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION),
        }
    })
    .await
    .unwrap_or(Err(ErrorCode::NOT_LEADER_OR_FOLLOWER))
}

/// Runs `f` on the controller shard (shard 0).
pub async fn on_controller<R, F, Fut>(shard: &Shard, f: F) -> Option<R>
where
    R: Send + 'static,
    F: FnOnce(Rc<Shard>) -> Fut + Send + 'static,
    Fut: Future<Output = R> + 'static,
{
    on_shard(shard, ShardId(0), f).await
}

/// Runs `f` on shard `owner` with that shard's context; `None` if that shard has stopped.
pub async fn on_shard<R, F, Fut>(shard: &Shard, owner: ShardId, f: F) -> Option<R>
where
    R: Send + 'static,
    F: FnOnce(Rc<Shard>) -> Fut + Send + 'static,
    Fut: Future<Output = R> + 'static,
{
    shard
        .router()
        .call(owner, move |s| -> LocalBoxFuture<'static, R> {
            Box::pin(f(s))
        })
        .await
}
