//! Transactions (KIP-98, KIP-447, KIP-890 part 1): the transaction coordinator and the produce
//! path's verification.
//!
//! The coordinator of transactional id t is the shard owning `__transaction_state` partition
//! `coordinator_partition(t, 50)` (Kafka's `partitionFor`); every shard has a `TxnCoordinator`
//! for the ids placed on it. Handlers reach it through `on_txn_coordinator`, which creates the
//! topic the first time any transactional id is used.

pub mod coordinator;
pub mod host;
mod local_markers;
mod markers;
pub mod records;
pub mod state;

pub use coordinator::{
    fenced_code_for, is_state_name, InitArgs, ListedTxn, TxnConfig, TxnCoordinator,
    TXN_APIS_FENCED_FROM,
};

use crate::controller::{self, NewTopic, TopicError};
use crate::metadata::{ClusterMetadata, PartitionInfo, TRANSACTION_STATE_TOPIC};
use crate::protocol::errors::ErrorCode;
use crate::shard::routing::on_shard;
use crate::shard::services::PartitionObserver;
use crate::shard::Shard;
use ferrite_shards::partition::Partition;
use ferrite_shards::placement::ShardId;
use futures::future::LocalBoxFuture;
use host::{TopicPartition, TxnHost, TxnMarker};
pub use local_markers::write_markers_here;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

/// The coordinator's settings from the broker config.
pub fn config_of(config: &crate::config::BrokerConfig) -> TxnConfig {
    let t = &config.broker.transactions;
    TxnConfig {
        max_timeout_ms: t.max_timeout_ms,
        id_expiration_ms: t.id_expiration_ms,
        abort_interval: Duration::from_millis(t.abort_interval_ms),
        expiry_interval: Duration::from_millis(t.expiry_interval_ms),
    }
}

/// Creates `__transaction_state` if it does not exist yet, with Kafka's settings
/// (`TransactionStateManager.transactionTopicConfigs`): compacted, uncompressed records, no unclean
/// election, min.insync.replicas from `transaction.state.log.min.isr` — here at most the
/// replication factor, which is at most the brokers alive, as for `__consumer_offsets`.
pub async fn ensure_transaction_topic(shard: &Shard) -> Result<(), ErrorCode> {
    if shard.metadata().topic(TRANSACTION_STATE_TOPIC).is_some() {
        return Ok(());
    }
    let t = &shard.config.broker.transactions;
    let brokers = shard.metadata().brokers.len().max(1) as i16;
    let replication_factor = t.state_replication_factor.min(brokers);
    let min_isr = t.state_min_isr.min(replication_factor as i32);
    let topic = NewTopic {
        name: TRANSACTION_STATE_TOPIC.to_string(),
        partitions: t.state_partitions,
        replication_factor,
        configs: BTreeMap::from([
            ("cleanup.policy".to_string(), "compact".to_string()),
            // Kafka sets `uncompressed`; Ferrite stores batches as their writer compressed them
            // (only `producer` is taken), and the coordinator writes them uncompressed.
            ("compression.type".to_string(), "producer".to_string()),
            ("min.insync.replicas".to_string(), min_isr.to_string()),
            (
                "segment.bytes".to_string(),
                t.state_segment_bytes.to_string(),
            ),
            (
                "unclean.leader.election.enable".to_string(),
                "false".to_string(),
            ),
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
            tracing::error!(error = %e, "creating {TRANSACTION_STATE_TOPIC} failed");
            Err(ErrorCode::COORDINATOR_NOT_AVAILABLE)
        }
        None => Err(ErrorCode::COORDINATOR_NOT_AVAILABLE),
    }
}

/// `transactional_id`'s `__transaction_state` partition in `metadata`: its index and what the
/// metadata holds of it, if the topic exists.
fn state_partition<'m>(
    metadata: &'m ClusterMetadata,
    transactional_id: &str,
) -> Option<(i32, &'m PartitionInfo)> {
    let topic = metadata.topic(TRANSACTION_STATE_TOPIC)?;
    let partition = crate::groups::records::coordinator_partition(
        transactional_id,
        topic.partitions.len() as i32,
    );
    Some((partition, topic.partitions.get(partition as usize)?))
}

/// The `__transaction_state` partition of `transactional_id` and its leader, if the topic exists.
pub fn coordinator_of(shard: &Shard, transactional_id: &str) -> Option<(i32, i32)> {
    let metadata = shard.metadata();
    let (partition, info) = state_partition(&metadata, transactional_id)?;
    Some((partition, info.leader))
}

/// The shard that holds `transactional_id`'s `__transaction_state` partition, when the topic
/// exists: where its coordinator requests are served.
pub fn coordinator_shard(shard: &Shard, transactional_id: &str) -> Option<ShardId> {
    let metadata = shard.metadata();
    state_partition(&metadata, transactional_id).map(|(_, info)| info.shard)
}

/// False while this broker leads the id's partition but has not opened or loaded it yet:
/// FindCoordinator then answers COORDINATOR_NOT_AVAILABLE, which clients retry.
pub async fn coordinator_ready(shard: &Shard, transactional_id: &str) -> bool {
    let metadata = shard.metadata();
    let Some((partition, info)) = state_partition(&metadata, transactional_id) else {
        return false;
    };
    if !shard.leads(info) {
        return true;
    }
    let owner = info.shard;
    on_shard(shard, owner, move |s| async move {
        s.partition(TRANSACTION_STATE_TOPIC, partition).is_some()
            && !s.service::<TxnCoordinator>().is_loading(partition)
    })
    .await
    .unwrap_or(false)
}

/// Runs `f` on the shard coordinating `transactional_id`, with that shard's coordinator.
/// Creates `__transaction_state` on first use. NOT_COORDINATOR when another broker leads the
/// id's partition, COORDINATOR_LOAD_IN_PROGRESS while it is being read.
pub async fn on_txn_coordinator<R, F>(
    shard: &Shard,
    transactional_id: &str,
    f: F,
) -> Result<R, ErrorCode>
where
    R: Send + 'static,
    F: FnOnce(Rc<TxnCoordinator>) -> LocalBoxFuture<'static, R> + Send + 'static,
{
    ensure_transaction_topic(shard).await?;
    let metadata = shard.metadata();
    let (partition, info) =
        state_partition(&metadata, transactional_id).ok_or(ErrorCode::COORDINATOR_NOT_AVAILABLE)?;
    if !shard.leads(info) {
        return Err(ErrorCode::NOT_COORDINATOR);
    }
    let owner = info.shard;
    on_shard(shard, owner, move |s| async move {
        let coordinator = s.service::<TxnCoordinator>();
        if s.partition(TRANSACTION_STATE_TOPIC, partition).is_none()
            || coordinator.is_loading(partition)
        {
            return Err(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS);
        }
        Ok(f(coordinator).await)
    })
    .await
    .unwrap_or(Err(ErrorCode::COORDINATOR_NOT_AVAILABLE))
}

/// `on_txn_coordinator` for a call answered by an error code alone (NONE on success).
pub async fn txn_coordinator_code<F>(shard: &Shard, transactional_id: &str, f: F) -> ErrorCode
where
    F: FnOnce(Rc<TxnCoordinator>) -> LocalBoxFuture<'static, Result<(), ErrorCode>>
        + Send
        + 'static,
{
    on_txn_coordinator(shard, transactional_id, f)
        .await
        .and_then(|r| r)
        .err()
        .unwrap_or(ErrorCode::NONE)
}

/// KIP-890 for the produce path: whether `topic`-`partition` is in the producer's ongoing
/// transaction, asked of the id's coordinator; the error as Produce answers it
/// (`AddPartitionsToTxnManager` and `ReplicaManager`'s post-verification mapping):
/// PRODUCER_FENCED is INVALID_PRODUCER_EPOCH at a partition, a partition not in the transaction
/// INVALID_TXN_STATE (TRANSACTION_ABORTABLE from Produce v11), and a coordinator that cannot
/// answer now NOT_ENOUGH_REPLICAS, which producers retry without a metadata refresh.
pub async fn verify_for_produce(
    shard: &Shard,
    transactional_id: &str,
    producer_id: i64,
    epoch: i16,
    topic: &str,
    partition: i32,
    produce_version: i16,
) -> Result<(), ErrorCode> {
    let tp = (topic.to_string(), partition);
    let id = transactional_id.to_string();
    let answer = match coordinator_of(shard, transactional_id) {
        Some((_, leader)) if leader >= 0 && leader != shard.config.node_id => {
            markers::verify_at(shard, leader, &id, producer_id, epoch, &tp).await
        }
        _ => on_txn_coordinator(shard, transactional_id, move |c| {
            Box::pin(async move { c.verify_partition(&id, producer_id, epoch, &tp) })
        })
        .await
        .and_then(|r| r),
    };
    answer.map_err(|code| match code {
        ErrorCode::PRODUCER_FENCED => ErrorCode::INVALID_PRODUCER_EPOCH,
        ErrorCode::TRANSACTION_ABORTABLE if produce_version >= 11 => code,
        ErrorCode::TRANSACTION_ABORTABLE => ErrorCode::INVALID_TXN_STATE,
        ErrorCode::CONCURRENT_TRANSACTIONS
        | ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
        | ErrorCode::COORDINATOR_NOT_AVAILABLE
        | ErrorCode::NOT_COORDINATOR => ErrorCode::NOT_ENOUGH_REPLICAS,
        other => other,
    })
}

/// The coordinator keeps the ids of the `__transaction_state` partitions this broker leads,
/// read when the partition opens or leadership arrives, forgotten when leadership leaves.
impl PartitionObserver for TxnCoordinator {
    fn topic(&self) -> &str {
        TRANSACTION_STATE_TOPIC
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
            let ids = self.load(partition).await?;
            if ids > 0 {
                tracing::info!(
                    partition = partition.index(),
                    ids,
                    "transactional ids loaded"
                );
            }
            Ok(())
        })
    }

    fn leadership_changed<'a>(
        &'a self,
        partition: &'a Rc<Partition>,
        leads: bool,
        _partitions: usize,
    ) -> LocalBoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            if !leads {
                self.forget_partition(partition.index());
                return Ok(());
            }
            let ids = self.load(partition).await?;
            tracing::info!(
                partition = partition.index(),
                ids,
                "coordinating the transactional ids of a partition this broker now leads"
            );
            Ok(())
        })
    }
}

/// The shard, as the transaction coordinator sees it.
impl TxnHost for Shard {
    fn state_partition(&self, index: i32) -> Option<Rc<Partition>> {
        self.partition(TRANSACTION_STATE_TOPIC, index)
    }

    fn state_partition_count(&self) -> i32 {
        self.metadata()
            .topic(TRANSACTION_STATE_TOPIC)
            .map_or(0, |t| t.partitions.len() as i32)
    }

    fn allocate_producer_id(&self) -> LocalBoxFuture<'_, Result<i64, ErrorCode>> {
        Box::pin(async move {
            match crate::shard::routing::on_controller(self, |s| async move {
                controller::allocate_producer_id(&s).await
            })
            .await
            {
                Some(Ok(id)) => Ok(id),
                Some(Err(e)) => {
                    tracing::error!(error = %e, "reserving producer ids failed");
                    Err(ErrorCode::COORDINATOR_NOT_AVAILABLE)
                }
                None => Err(ErrorCode::COORDINATOR_NOT_AVAILABLE),
            }
        })
    }

    fn has_partition(&self, topic: &str, partition: i32) -> bool {
        self.metadata().partition(topic, partition).is_some()
    }

    fn write_markers(
        &self,
        marker: TxnMarker,
        partitions: Vec<TopicPartition>,
    ) -> LocalBoxFuture<'_, Vec<Result<(), ErrorCode>>> {
        Box::pin(async move {
            let mut answers = vec![Err(ErrorCode::NOT_LEADER_OR_FOLLOWER); partitions.len()];
            // Per leading broker: the positions in `partitions` it leads.
            let mut by_leader: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
            {
                let metadata = self.metadata();
                for (at, (topic, partition)) in partitions.iter().enumerate() {
                    match metadata
                        .partition(topic, *partition)
                        .map(|info| info.leader)
                    {
                        None => answers[at] = Err(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION),
                        Some(leader) if leader >= 0 => {
                            by_leader.entry(leader).or_default().push(at)
                        }
                        Some(_) => {}
                    }
                }
            }
            let calls = by_leader.into_iter().map(|(leader, positions)| {
                let mine: Vec<TopicPartition> =
                    positions.iter().map(|&at| partitions[at].clone()).collect();
                async move {
                    let outcomes = if leader == self.config.node_id {
                        write_markers_here(self, marker, mine).await
                    } else {
                        markers::send(self, leader, marker, &mine).await
                    };
                    (positions, outcomes)
                }
            });
            for (positions, outcomes) in futures::future::join_all(calls).await {
                for (at, outcome) in positions.into_iter().zip(outcomes) {
                    answers[at] = outcome;
                }
            }
            answers
        })
    }

    fn is_shutting_down(&self) -> bool {
        Shard::is_shutting_down(self)
    }
}
