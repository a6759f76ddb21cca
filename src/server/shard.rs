//! One shard: a pinned executor's state — its partitions, its copy of the metadata, its router.
//!
//! Lives on: exactly one shard thread; other shards reach it through the router. The metadata
//! snapshot is shared (`Arc`) and replaced whole when the controller publishes a new one; the
//! shard then opens the partitions placed on it that it does not have and closes those that
//! are gone (`reconcile`).

use crate::cluster::ZkHandle;
use crate::config::BrokerConfig;
use crate::controller::Controller;
use crate::groups::{self, Coordinator};
use crate::metadata::{ClusterMetadata, PartitionInfo, CONSUMER_OFFSETS_TOPIC};
use crate::metrics::ShardMetrics;
use ferrite_shards::log::{BatchCache, LogOptions};
use ferrite_shards::partition::replication::Role;
use ferrite_shards::partition::Partition;
use ferrite_shards::placement::ShardId;
use ferrite_shards::router::Router;
use ferrite_shards::sync::{FifoGate, Notify};
use ferrite_shards::IoMode;
use std::cell::{Cell, OnceCell, RefCell};
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

/// Partitions opened at once when a shard starts or a topic is created.
const OPEN_CONCURRENCY: usize = 16;

/// Counters of one shard.
#[derive(Default)]
pub struct ShardStats {
    pub connections_accepted: Cell<u64>,
    pub connections_open: Cell<u64>,
    pub bytes_in: Cell<u64>,
    pub bytes_out: Cell<u64>,
}

pub struct Shard {
    pub id: ShardId,
    pub config: Arc<BrokerConfig>,
    router: OnceCell<Router<Shard>>,
    metadata: RefCell<Arc<ClusterMetadata>>,
    partitions: RefCell<HashMap<String, HashMap<i32, Rc<Partition>>>>,
    cache: Option<Rc<BatchCache>>,
    /// Request bytes read and not yet answered on this shard.
    pub request_budget: Rc<FifoGate>,
    /// The controller's duties run on shard 0 only.
    pub controller: Option<Controller>,
    /// The consumer groups whose `__consumer_offsets` partitions this shard owns.
    pub groups: Rc<Coordinator>,
    /// The control thread, in ZooKeeper mode.
    pub cluster: Option<ZkHandle>,
    reconcile_lock: glommio::sync::Semaphore,
    pub stats: ShardStats,
    /// Requests by API, errors, latencies: what the metrics endpoint reports.
    pub metrics: ShardMetrics,
    shutting_down: Cell<bool>,
    pub shutdown_started: Notify,
}

impl Shard {
    pub fn new(
        id: ShardId,
        config: Arc<BrokerConfig>,
        metadata: Arc<ClusterMetadata>,
        controller: Option<Controller>,
        cluster: Option<ZkHandle>,
    ) -> Shard {
        let settings = config.shard(id.0).clone();
        Shard {
            id,
            router: OnceCell::new(),
            metadata: RefCell::new(metadata),
            partitions: RefCell::new(HashMap::new()),
            cache: (settings.io_mode == IoMode::Direct)
                .then(|| BatchCache::new(settings.cache_bytes)),
            request_budget: Rc::new(FifoGate::new(settings.request_bytes_max as u64)),
            controller,
            cluster,
            groups: Rc::new(Coordinator::new(groups::config_of(&config))),
            reconcile_lock: glommio::sync::Semaphore::new(1),
            stats: ShardStats::default(),
            metrics: ShardMetrics::default(),
            shutting_down: Cell::new(false),
            shutdown_started: Notify::new(),
            config,
        }
    }

    pub fn set_router(&self, router: Router<Shard>) {
        if self.router.set(router).is_err() {
            panic!("the router is set once, at start-up");
        }
    }

    pub fn router(&self) -> &Router<Shard> {
        self.router.get().expect("router connected before serving")
    }

    /// The cache of recent batches (direct I/O only).
    pub fn batch_cache(&self) -> Option<&BatchCache> {
        self.cache.as_deref()
    }

    pub fn metadata(&self) -> Arc<ClusterMetadata> {
        self.metadata.borrow().clone()
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.get()
    }

    pub fn begin_shutdown(&self) {
        self.shutting_down.set(true);
        self.shutdown_started.notify_all();
    }

    /// The partition if this shard owns it.
    pub fn partition(&self, topic: &str, index: i32) -> Option<Rc<Partition>> {
        self.partitions.borrow().get(topic)?.get(&index).cloned()
    }

    pub fn partitions(&self) -> Vec<Rc<Partition>> {
        self.partitions
            .borrow()
            .values()
            .flat_map(|m| m.values().cloned())
            .collect()
    }

    /// Whether this shard keeps a replica of the partition: it is placed here and this broker
    /// is one of its replicas.
    fn hosts(&self, p: &PartitionInfo) -> bool {
        p.shard == self.id && p.replicas.contains(&self.config.node_id)
    }

    /// Whether this broker leads the partition now (it answers produce and fetch for it).
    pub fn leads(&self, p: &PartitionInfo) -> bool {
        p.leader == self.config.node_id
    }

    pub fn partition_dir(&self, topic: &str, index: i32) -> PathBuf {
        self.config.data_dir.join(format!("{topic}-{index}"))
    }

    /// Takes a new metadata snapshot and opens or removes partitions to match it.
    pub async fn install_metadata(&self, metadata: Arc<ClusterMetadata>) -> Result<(), String> {
        *self.metadata.borrow_mut() = metadata;
        self.reconcile().await
    }

    /// Opens partitions placed here that are not open; closes and deletes those whose topic
    /// is gone. Returns the first failure, after trying everything.
    pub async fn reconcile(&self) -> Result<(), String> {
        let _lock = self.reconcile_lock.acquire_permit(1).await;
        let metadata = self.metadata();
        let mut to_open = Vec::new();
        // `__consumer_offsets` partitions this broker started or stopped leading.
        let mut leadership_moved = Vec::new();
        for t in metadata.topics.values() {
            for p in &t.partitions {
                if !self.hosts(p) {
                    continue;
                }
                match self.partition(&t.name, p.index) {
                    None => to_open.push((t.clone(), p.index, p.leader_epoch)),
                    Some(open) => {
                        let was_leader = open.role().is_leader();
                        self.assign_role(&open, p);
                        if t.name == CONSUMER_OFFSETS_TOPIC && was_leader != self.leads(p) {
                            leadership_moved.push((open, self.leads(p), t.partitions.len()));
                        }
                    }
                }
            }
        }
        let gone: Vec<(String, i32, Rc<Partition>)> = {
            let open = self.partitions.borrow();
            open.iter()
                .flat_map(|(name, ps)| ps.iter().map(move |(i, p)| (name.clone(), *i, p.clone())))
                .filter(|(name, i, _)| {
                    metadata
                        .partition(name, *i)
                        .is_none_or(|info| !self.hosts(info))
                })
                .collect()
        };
        let mut first_error = None;
        for (name, index, partition) in gone {
            if let Some(m) = self.partitions.borrow_mut().get_mut(&name) {
                m.remove(&index);
            }
            let deleted = metadata.topic(&name).is_none();
            let result = if deleted {
                partition.log().delete().await
            } else {
                partition.close().await
            };
            if let Err(e) = result {
                tracing::error!(topic = %name, partition = index, error = %e, "closing partition failed");
                first_error.get_or_insert(e.to_string());
            } else {
                tracing::info!(shard = %self.id, topic = %name, partition = index, deleted, "partition closed");
            }
        }
        for group in to_open.chunks(OPEN_CONCURRENCY) {
            let opens = group.iter().map(|(topic, index, epoch)| async move {
                let options = LogOptions {
                    config: topic.log_config(&self.config.broker.log),
                    io_mode: self.config.io_mode(self.id.0),
                    writer: self.config.shard(self.id.0).writer,
                    cache: self.cache.clone(),
                };
                let dir = self.partition_dir(&topic.name, *index);
                let opened = Partition::open(
                    &dir,
                    Arc::from(topic.name.as_str()),
                    *index,
                    *epoch,
                    options,
                )
                .await;
                (topic.name.clone(), *index, opened)
            });
            for (name, index, opened) in futures::future::join_all(opens).await {
                let leads = metadata
                    .partition(&name, index)
                    .is_some_and(|i| self.leads(i));
                let opened = match opened {
                    // Only the leader coordinates the partition's groups.
                    Ok(p) if name == CONSUMER_OFFSETS_TOPIC && leads => self.load_groups(p).await,
                    other => other.map_err(|e| e.to_string()),
                };
                match opened {
                    Ok(p) => {
                        if let Some(info) = metadata.partition(&name, index) {
                            self.assign_role(&p, info);
                        }
                        self.partitions
                            .borrow_mut()
                            .entry(name)
                            .or_default()
                            .insert(index, p);
                    }
                    Err(e) => {
                        tracing::error!(topic = %name, partition = index, error = %e, "opening partition failed");
                        first_error.get_or_insert(e);
                    }
                }
            }
        }
        for (p, leads, partitions) in leadership_moved {
            if leads {
                match self.groups.reload(&p, partitions as i32).await {
                    Ok((groups, offsets)) => {
                        tracing::info!(shard = %self.id, partition = p.index(),
                        groups, offsets, "coordinating the groups of a partition this broker now leads")
                    }
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            } else {
                self.groups.forget_partition(p.index(), partitions as i32);
            }
        }
        match first_error {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }

    /// What the metadata says this broker is for an open partition: leader or follower, the
    /// leader epoch, the replicas and the ISR.
    fn assign_role(&self, open: &Partition, info: &PartitionInfo) {
        open.set_leader_epoch(info.leader_epoch);
        open.set_role(Role {
            node_id: self.config.node_id,
            leader: info.leader,
            replicas: info.replicas.clone(),
            isr: info.isr.clone(),
        });
    }

    /// Rebuilds the groups stored in a `__consumer_offsets` partition before it is served.
    async fn load_groups(&self, p: Rc<Partition>) -> Result<Rc<Partition>, String> {
        let (groups, offsets) = self.groups.load(&p).await?;
        if groups + offsets > 0 {
            tracing::info!(shard = %self.id, partition = p.index(), groups, offsets, "groups loaded");
        }
        Ok(p)
    }

    /// Flushes and closes every partition (graceful shutdown).
    pub async fn close_partitions(&self) {
        let all: Vec<Rc<Partition>> = self.partitions();
        for p in all {
            if let Err(e) = p.close().await {
                tracing::error!(topic = %p.topic(), partition = p.index(), error = %e, "closing partition failed");
            }
        }
        self.partitions.borrow_mut().clear();
    }
}
