//! One shard: a pinned executor's state — its partitions, its copy of the metadata, its router,
//! and the services it carries (`services.rs`).
//!
//! Lives on: exactly one shard thread; other shards reach it through the router. The metadata
//! snapshot is shared (`Arc`) and replaced whole when the controller publishes a new one; the
//! shard then opens the partitions placed on it that it does not have and closes those that
//! are gone (`reconcile.rs`). Routing calls to a partition's owner is `routing.rs`; the
//! periodic duties (flush, retention, compaction) are `maintenance.rs` and `cleaner.rs`.
//!
//! Layering: the shard uses `metadata`, `config`, `protocol`, `cluster` (its handle to the
//! control thread) and `ferrite_shards`; the services, handlers and server use it.

pub mod capacity;
mod cleaner;
pub mod client_quotas;
pub mod connections_per_ip;
pub mod counters;
pub mod fetch_sessions;
pub mod maintenance;
mod reconcile;
pub mod routing;
pub mod services;

use crate::cluster::ZkHandle;
use crate::config::{BrokerConfig, BrokerSettings};
use crate::metadata::{ClusterMetadata, PartitionInfo};
use capacity::Capacity;
use client_quotas::ClientQuotaSensors;
use counters::{ShardMetrics, ShardStats};
use ferrite_shards::log::BatchCache;
use ferrite_shards::partition::Partition;
use ferrite_shards::placement::ShardId;
use ferrite_shards::router::Router;
use ferrite_shards::sync::{FifoGate, Notify};
use ferrite_shards::uring::pipes::PipePool;
use ferrite_shards::IoMode;
use services::Services;
use std::any::Any;
use std::cell::{Cell, OnceCell, RefCell};
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

pub struct Shard {
    pub id: ShardId,
    pub config: Arc<BrokerConfig>,
    router: OnceCell<Router<Shard>>,
    metadata: RefCell<Arc<ClusterMetadata>>,
    /// The broker settings in force: the static ones (`config.broker`) with the dynamic ones
    /// of the metadata over them, made again when those change.
    settings: RefCell<Arc<BrokerSettings>>,
    partitions: RefCell<HashMap<String, HashMap<i32, Rc<Partition>>>>,
    cache: Option<Rc<BatchCache>>,
    /// Request bytes read and not yet answered on this shard.
    pub request_budget: Rc<FifoGate>,
    /// The pipes this shard's connections splice fetched file ranges through.
    pub pipes: Rc<PipePool>,
    /// The services above the shard, by type (the group coordinator; the controller on
    /// shard 0).
    pub services: Services,
    /// The control thread, in ZooKeeper mode.
    pub cluster: Option<ZkHandle>,
    /// What the process can hold, shared by every shard.
    pub capacity: Arc<Capacity>,
    /// The client quotas' rates, shared by every shard (quotas are broker-wide).
    pub client_quotas: Arc<ClientQuotaSensors>,
    reconcile_lock: glommio::sync::Semaphore,
    pub stats: ShardStats,
    /// Requests by API, errors, latencies: what the metrics endpoint reports.
    pub metrics: ShardMetrics,
    /// The incremental fetch sessions (KIP-227) of the fetches this shard serves.
    pub fetch_sessions: RefCell<fetch_sessions::FetchSessions>,
    shutting_down: Cell<bool>,
    pub shutdown_started: Notify,
}

impl Shard {
    pub fn new(
        id: ShardId,
        config: Arc<BrokerConfig>,
        metadata: Arc<ClusterMetadata>,
        cluster: Option<ZkHandle>,
        capacity: Arc<Capacity>,
        client_quotas: Arc<ClientQuotaSensors>,
    ) -> Shard {
        let settings = config.shard(id.0).clone();
        let in_force = Arc::new(settings_in_force(&config, &metadata));
        Shard {
            id,
            router: OnceCell::new(),
            metadata: RefCell::new(metadata),
            settings: RefCell::new(in_force),
            partitions: RefCell::new(HashMap::new()),
            cache: (settings.io_mode == IoMode::Direct)
                .then(|| BatchCache::new(settings.cache_bytes)),
            request_budget: Rc::new(FifoGate::new(settings.request_bytes_max as u64)),
            pipes: PipePool::new(capacity::SPLICE_PIPES_PER_SHARD as usize),
            services: Services::default(),
            cluster,
            capacity,
            client_quotas,
            reconcile_lock: glommio::sync::Semaphore::new(1),
            stats: ShardStats::default(),
            metrics: ShardMetrics::default(),
            fetch_sessions: RefCell::new(fetch_sessions::FetchSessions::new(
                id.0,
                config.cores.len(),
            )),
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

    /// The service of type `T`; services are installed before the shard serves, so a missing
    /// one is a start-up bug.
    pub fn service<T: Any>(&self) -> Rc<T> {
        self.services.get::<T>().unwrap_or_else(|| {
            panic!(
                "shard {}: no {} service installed",
                self.id,
                std::any::type_name::<T>()
            )
        })
    }

    /// The cache of recent batches (direct I/O only).
    pub fn batch_cache(&self) -> Option<&BatchCache> {
        self.cache.as_deref()
    }

    pub fn metadata(&self) -> Arc<ClusterMetadata> {
        self.metadata.borrow().clone()
    }

    /// The broker settings in force now, dynamic changes included. Settings that cannot
    /// change at run time are read from `config.broker` directly.
    pub fn settings(&self) -> Arc<BrokerSettings> {
        self.settings.borrow().clone()
    }

    /// Takes a new metadata snapshot (see `install_metadata` for what follows from it).
    fn replace_metadata(&self, metadata: Arc<ClusterMetadata>) {
        let previous = std::mem::replace(&mut *self.metadata.borrow_mut(), metadata.clone());
        if previous.broker_configs != metadata.broker_configs {
            *self.settings.borrow_mut() = Arc::new(settings_in_force(&self.config, &metadata));
        }
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
    pub(super) fn hosts(&self, p: &PartitionInfo) -> bool {
        p.shard == self.id && p.replicas.contains(&self.config.node_id)
    }

    /// Whether this broker leads the partition now (it answers produce and fetch for it).
    pub fn leads(&self, p: &PartitionInfo) -> bool {
        p.leader == self.config.node_id
    }

    pub fn partition_dir(&self, topic: &str, index: i32) -> PathBuf {
        self.config.data_dir.join(format!("{topic}-{index}"))
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

/// The static settings with the cluster's dynamic default and this broker's own over them.
fn settings_in_force(config: &BrokerConfig, metadata: &ClusterMetadata) -> BrokerSettings {
    let dynamic = &metadata.broker_configs;
    config
        .broker
        .with_dynamic([dynamic.of(None), dynamic.of(Some(config.node_id))])
}
