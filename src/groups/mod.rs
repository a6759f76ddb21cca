//! Consumer groups: the classic group protocol and committed offsets.
//!
//! The coordinator of group g is the shard owning `__consumer_offsets` partition
//! `coordinator_partition(g, 50)`; every shard has a `Coordinator` for the groups placed on it.
//! Handlers reach a group's coordinator through `on_coordinator`, which also creates the
//! offsets topic the first time any group is used.

pub mod coordinator;
mod group;
pub mod host;
pub mod records;

pub use coordinator::{
    CommitArgs, CommitOffset, Coordinator, GroupConfig, JoinArgs, ListedGroup, SyncArgs,
    TxnCommitArgs,
};
pub use group::{JoinReply, SyncReply};

use crate::controller::{self, NewTopic, TopicError};
use crate::metadata::CONSUMER_OFFSETS_TOPIC;
use crate::protocol::errors::ErrorCode;
use crate::shard::routing::on_shard;
use crate::shard::services::PartitionObserver;
use crate::shard::Shard;
use ferrite_shards::partition::Partition;
use futures::future::LocalBoxFuture;
use host::GroupHost;
use std::collections::BTreeMap;
use std::rc::Rc;

/// Kafka's broker settings for groups, from the broker config.
pub fn config_of(shard_config: &crate::config::BrokerConfig) -> GroupConfig {
    let b = &shard_config.broker;
    GroupConfig {
        initial_rebalance_delay: std::time::Duration::from_millis(
            b.group_initial_rebalance_delay_ms,
        ),
        min_session_timeout: std::time::Duration::from_millis(b.group_min_session_timeout_ms),
        max_session_timeout: std::time::Duration::from_millis(b.group_max_session_timeout_ms),
        offset_metadata_max_bytes: b.offset_metadata_max_bytes,
    }
}

/// Creates `__consumer_offsets` if it does not exist yet (compacted, as Kafka's).
pub async fn ensure_offsets_topic(shard: &Shard) -> Result<(), ErrorCode> {
    if shard.metadata().topic(CONSUMER_OFFSETS_TOPIC).is_some() {
        return Ok(());
    }
    let b = &shard.config.broker;
    // Replicated like any topic in a cluster, on as many brokers as are alive up to the setting.
    let brokers = shard.metadata().brokers.len().max(1) as i16;
    let topic = NewTopic {
        name: CONSUMER_OFFSETS_TOPIC.to_string(),
        partitions: b.offsets_topic_partitions,
        replication_factor: b.offsets_topic_replication_factor.min(brokers),
        configs: BTreeMap::from([
            ("cleanup.policy".to_string(), "compact".to_string()),
            (
                "segment.bytes".to_string(),
                b.offsets_topic_segment_bytes.to_string(),
            ),
            ("compression.type".to_string(), "producer".to_string()),
        ]),
    };
    let created = crate::shard::routing::on_controller(shard, move |s| async move {
        controller::create_topics(&s, vec![topic], false, &controller::Payer::Broker).await
    })
    .await
    .ok_or(ErrorCode::COORDINATOR_NOT_AVAILABLE)?;
    match created.into_iter().next().map(|(_, r)| r) {
        Some(Ok(_)) | Some(Err(TopicError::AlreadyExists)) => Ok(()),
        Some(Err(e)) => {
            tracing::error!(error = %e, "creating {CONSUMER_OFFSETS_TOPIC} failed");
            Err(ErrorCode::COORDINATOR_NOT_AVAILABLE)
        }
        None => Err(ErrorCode::COORDINATOR_NOT_AVAILABLE),
    }
}

/// False while this broker leads `group_id`'s `__consumer_offsets` partition but its owner
/// shard has not opened it or loaded its groups yet: FindCoordinator then answers
/// COORDINATOR_NOT_AVAILABLE, which every client retries, rather than naming a coordinator
/// that would answer COORDINATOR_LOAD_IN_PROGRESS (which some, Sarama 1.22 among them, do
/// not). Partitions other brokers lead are theirs to answer for.
pub async fn coordinator_ready(shard: &Shard, group_id: &str) -> bool {
    let metadata = shard.metadata();
    let Some(topic) = metadata.topic(CONSUMER_OFFSETS_TOPIC) else {
        return false;
    };
    let partition = records::coordinator_partition(group_id, topic.partitions.len() as i32);
    let Some(info) = topic.partitions.get(partition as usize) else {
        return false;
    };
    if !shard.leads(info) {
        return true;
    }
    let owner = info.shard;
    on_shard(shard, owner, move |s| async move {
        s.partition(CONSUMER_OFFSETS_TOPIC, partition).is_some()
            && !s.service::<Coordinator>().is_loading(partition)
    })
    .await
    .unwrap_or(false)
}

/// Runs `f` on the shard coordinating `group_id`, with that shard's coordinator and the
/// group's `__consumer_offsets` partition. Creates the offsets topic on first use.
pub async fn on_coordinator<R, F>(shard: &Shard, group_id: &str, f: F) -> Result<R, ErrorCode>
where
    R: Send + 'static,
    F: FnOnce(Rc<Coordinator>, i32) -> LocalBoxFuture<'static, R> + Send + 'static,
{
    ensure_offsets_topic(shard).await?;
    let metadata = shard.metadata();
    let topic = metadata
        .topic(CONSUMER_OFFSETS_TOPIC)
        .ok_or(ErrorCode::COORDINATOR_NOT_AVAILABLE)?;
    let partition = records::coordinator_partition(group_id, topic.partitions.len() as i32);
    let info = &topic.partitions[partition as usize];
    // The coordinator is the leader of the group's partition (it moves with leadership).
    if !shard.leads(info) {
        return Err(ErrorCode::NOT_COORDINATOR);
    }
    let owner = info.shard;
    on_shard(shard, owner, move |s| async move {
        // A partition is in the shard's table only once its groups are loaded.
        let groups = s.service::<Coordinator>();
        if s.partition(CONSUMER_OFFSETS_TOPIC, partition).is_none() || groups.is_loading(partition)
        {
            return Err(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS);
        }
        Ok(f(groups, partition).await)
    })
    .await
    .unwrap_or(Err(ErrorCode::COORDINATOR_NOT_AVAILABLE))
}

/// The coordinator keeps the groups of the `__consumer_offsets` partitions this broker leads:
/// read before the partition is served, read again when leadership arrives (what was
/// replicated as a follower is the truth now), forgotten when it leaves.
impl PartitionObserver for Coordinator {
    fn topic(&self) -> &str {
        CONSUMER_OFFSETS_TOPIC
    }

    fn opened<'a>(
        &'a self,
        partition: &'a Rc<Partition>,
        leads: bool,
        _partitions: usize,
    ) -> LocalBoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            if !leads {
                return Ok(());
            }
            let (groups, offsets) = self.load(partition).await?;
            if groups + offsets > 0 {
                tracing::info!(
                    partition = partition.index(),
                    groups,
                    offsets,
                    "groups loaded"
                );
            }
            Ok(())
        })
    }

    fn leadership_changed<'a>(
        &'a self,
        partition: &'a Rc<Partition>,
        leads: bool,
        partitions: usize,
    ) -> LocalBoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            if !leads {
                self.forget_partition(partition.index(), partitions as i32);
                return Ok(());
            }
            let (groups, offsets) = self.reload(partition, partitions as i32).await?;
            tracing::info!(
                partition = partition.index(),
                groups,
                offsets,
                "coordinating the groups of a partition this broker now leads"
            );
            Ok(())
        })
    }
}

/// The shard, as the coordinator sees it.
impl GroupHost for Shard {
    fn offsets_partition(&self, index: i32) -> Option<Rc<Partition>> {
        self.partition(CONSUMER_OFFSETS_TOPIC, index)
    }

    fn offsets_partition_count(&self) -> i32 {
        self.metadata()
            .topic(CONSUMER_OFFSETS_TOPIC)
            .map_or(0, |t| t.partitions.len() as i32)
    }

    fn has_partition(&self, topic: &str, partition: i32) -> bool {
        self.metadata().partition(topic, partition).is_some()
    }

    fn is_shutting_down(&self) -> bool {
        Shard::is_shutting_down(self)
    }
}
