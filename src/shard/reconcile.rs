//! Reconciling a shard with a metadata snapshot: open what is placed here, close what is gone,
//! and follow leadership changes. Observers of a topic (`services::PartitionObserver`) are told
//! of each partition opened and each leadership change, before the partition is served.

use super::Shard;
use crate::metadata::{ClusterMetadata, PartitionInfo, TopicInfo};
use ferrite_shards::log::LogOptions;
use ferrite_shards::partition::replication::Role;
use ferrite_shards::partition::Partition;
use std::rc::Rc;
use std::sync::Arc;

/// Partitions opened at once when a shard starts or a topic is created.
const OPEN_CONCURRENCY: usize = 16;

impl Shard {
    /// Takes a new metadata snapshot and opens or removes partitions to match it.
    pub async fn install_metadata(&self, metadata: Arc<ClusterMetadata>) -> Result<(), String> {
        self.replace_metadata(metadata);
        self.reconcile().await
    }

    /// Opens partitions placed here that are not open; closes and deletes those whose topic
    /// is gone. Returns the first failure, after trying everything.
    pub async fn reconcile(&self) -> Result<(), String> {
        let _lock = self.reconcile_lock.acquire_permit(1).await;
        let metadata = self.metadata();
        let settings = self.settings();
        let mut to_open = Vec::new();
        // Open partitions whose leadership moved to or from this broker.
        let mut leadership_moved = Vec::new();
        for t in metadata.topics.values() {
            for p in &t.partitions {
                if !self.hosts(p) {
                    continue;
                }
                match self.partition(&t.name, p.index) {
                    None => to_open.push((t.clone(), p.index, p.leader_epoch)),
                    Some(open) => {
                        // A topic's configs or the broker's defaults changed (AlterConfigs):
                        // in force at once.
                        let config = t.log_config(&settings.log);
                        if *open.log().config() != config {
                            open.log().set_config(config);
                        }
                        let was_leader = open.role().is_leader();
                        self.assign_role(&open, p);
                        if was_leader != self.leads(p) {
                            leadership_moved.push((open, self.leads(p), t.partitions.len()));
                        }
                    }
                }
            }
        }
        let mut first_error = self.close_gone(&metadata).await.err();
        for group in to_open.chunks(OPEN_CONCURRENCY) {
            if let Err(e) = self.open_placed(&metadata, group).await {
                first_error.get_or_insert(e);
            }
        }
        for (p, leads, partitions) in leadership_moved {
            for observer in self.services.observers_of(p.topic()) {
                if let Err(e) = observer.leadership_changed(&p, leads, partitions).await {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }

    /// Closes the open partitions no longer placed here, deleting those whose topic is gone.
    async fn close_gone(&self, metadata: &ClusterMetadata) -> Result<(), String> {
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
            // Its topic is gone, or this broker is no longer one of its replicas (a
            // reassignment moved it away): the copy is deleted, as Kafka's StopReplica with
            // delete. (A partition placed on another shard of this broker keeps its files.)
            let deleted = metadata
                .partition(&name, index)
                .is_none_or(|info| !info.replicas.contains(&self.config.node_id));
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
        first_error.map_or(Ok(()), Err)
    }

    /// Opens `placed` partitions at once; each is served (put in the table) once its topic's
    /// observers have seen it.
    async fn open_placed(
        &self,
        metadata: &ClusterMetadata,
        placed: &[(Arc<TopicInfo>, i32, i32)],
    ) -> Result<(), String> {
        let opens = placed.iter().map(|(topic, index, epoch)| async move {
            let options = LogOptions {
                config: topic.log_config(&self.settings().log),
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
            .await
            .map_err(|e| e.to_string());
            (topic, *index, opened)
        });
        let mut first_error = None;
        for (topic, index, opened) in futures::future::join_all(opens).await {
            let info = metadata.partition(&topic.name, index);
            let leads = info.is_some_and(|i| self.leads(i));
            let observed = match opened {
                Ok(p) => self.observe_opened(p, leads, topic.partitions.len()).await,
                Err(e) => Err(e),
            };
            match observed {
                Ok(p) => {
                    if let Some(info) = info {
                        self.assign_role(&p, info);
                    }
                    self.partitions
                        .borrow_mut()
                        .entry(topic.name.clone())
                        .or_default()
                        .insert(index, p);
                }
                Err(e) => {
                    tracing::error!(topic = %topic.name, partition = index, error = %e, "opening partition failed");
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Tells the observers of a just-opened partition's topic about it.
    async fn observe_opened(
        &self,
        p: Rc<Partition>,
        leads: bool,
        partitions: usize,
    ) -> Result<Rc<Partition>, String> {
        for observer in self.services.observers_of(p.topic()) {
            observer.opened(&p, leads, partitions).await?;
        }
        Ok(p)
    }

    /// What the metadata says this broker is for an open partition: leader or follower, the
    /// leader epoch, the replicas and the ISR.
    fn assign_role(&self, open: &Partition, info: &PartitionInfo) {
        open.set_leader_epoch(info.leader_epoch);
        open.set_role(Role {
            node_id: self.config.node_id,
            leader: info.leader,
            partition_epoch: info.partition_epoch,
            replicas: info.replicas.clone(),
            isr: info.isr.clone(),
        });
    }
}
