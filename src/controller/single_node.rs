//! The single-broker authority: changes are validated against the current snapshot, written
//! to `meta/` (durably), then published to every shard before they are acknowledged.

use super::capacity::ShardLoad;
use super::{check_new_topic, publish, the_controller, Controller, NewTopic, TopicError};
use crate::metadata::{random_id, store, ClusterMetadata, PartitionInfo, TopicInfo};
use crate::shard::Shard;
use std::sync::Arc;

/// Creates topics in `meta/` and on every shard.
pub(super) async fn create_topics(
    shard: &Shard,
    topics: Vec<NewTopic>,
    validate_only: bool,
) -> Vec<(String, Result<Arc<TopicInfo>, TopicError>)> {
    let controller = the_controller(shard);
    let _lock = controller.lock.acquire_permit(1).await;
    let current = shard.metadata();
    let mut next = (*current).clone();
    let mut load = ShardLoad::of(shard, &current);
    let node = current.controller_id;
    let mut results = Vec::with_capacity(topics.len());
    for t in topics {
        let checked = check_new_topic(shard, &next, &t).and_then(|t| {
            let shards = load.place(shard, t.partitions as usize)?;
            Ok((t, shards))
        });
        let result = match checked {
            Err(e) => Err(e),
            Ok((t, shards)) => {
                let info = Arc::new(TopicInfo {
                    name: t.name.clone(),
                    id: random_id(),
                    partitions: shards
                        .into_iter()
                        .enumerate()
                        .map(|(i, s)| PartitionInfo {
                            index: i as i32,
                            shard: s,
                            leader: node,
                            leader_epoch: 0,
                            partition_epoch: 0,
                            replicas: vec![node],
                            isr: vec![node],
                        })
                        .collect(),
                    configs: t.configs,
                });
                if validate_only {
                    Ok(info)
                } else {
                    match store::save_topic(&shard.config.data_dir, &info).await {
                        Ok(()) => {
                            next.topics.insert(info.name.clone(), info.clone());
                            Ok(info)
                        }
                        Err(e) => Err(TopicError::Storage(e.to_string())),
                    }
                }
            }
        };
        results.push((t.name, result));
    }
    if !validate_only && results.iter().any(|(_, r)| r.is_ok()) {
        if let Err(e) = publish(shard, next).await {
            let mut created = Vec::new();
            for (name, r) in results.iter_mut() {
                if let Ok(t) = r {
                    created.push(Undo::Created {
                        name: name.clone(),
                        partitions: t.partitions.len() as i32,
                    });
                    *r = Err(e.clone());
                }
            }
            roll_back(shard, current, created).await;
        } else {
            for (name, r) in &results {
                if let Ok(t) = r {
                    tracing::info!(topic = %name, partitions = t.partitions.len(), "topic created");
                }
            }
        }
    }
    results
}

/// Deletes topics from `meta/` and every shard, with their data.
pub(super) async fn delete_topics(
    shard: &Shard,
    names: Vec<String>,
) -> Vec<(String, Result<(), TopicError>)> {
    let controller = the_controller(shard);
    let _lock = controller.lock.acquire_permit(1).await;
    let mut next = (*shard.metadata()).clone();
    let mut results = Vec::with_capacity(names.len());
    for name in names {
        let result = if next.topics.remove(&name).is_none() {
            Err(TopicError::UnknownTopic)
        } else {
            store::remove_topic(&shard.config.data_dir, &name)
                .await
                .map_err(|e| TopicError::Storage(e.to_string()))
        };
        results.push((name, result));
    }
    if results.iter().any(|(_, r)| r.is_ok()) {
        let published = publish(shard, next).await;
        for (name, r) in results.iter_mut() {
            if r.is_ok() {
                match &published {
                    Ok(()) => tracing::info!(topic = %name, "topic deleted"),
                    Err(e) => *r = Err(e.clone()),
                }
            }
        }
    }
    results
}

/// Adds partitions up to `count` to the topic in `meta/` and on every shard, placed on the
/// least loaded shards. The caller holds the controller's lock and checked `count`.
pub(super) async fn create_partitions(
    shard: &Shard,
    current: &ClusterMetadata,
    name: &str,
    count: i32,
) -> Result<(), TopicError> {
    let topic = current.topic(name).ok_or(TopicError::UnknownTopic)?;
    let have = topic.partitions.len() as i32;
    let node = current.controller_id;
    let mut grown = (**topic).clone();
    let placed = ShardLoad::of(shard, current).place(shard, (count - have) as usize)?;
    for s in placed {
        let index = grown.partitions.len() as i32;
        grown.partitions.push(PartitionInfo {
            index,
            shard: s,
            leader: node,
            leader_epoch: 0,
            partition_epoch: 0,
            replicas: vec![node],
            isr: vec![node],
        });
    }
    store::save_topic(&shard.config.data_dir, &grown)
        .await
        .map_err(|e| TopicError::Storage(e.to_string()))?;
    let mut next = (*current).clone();
    next.topics.insert(name.to_string(), Arc::new(grown));
    if let Err(e) = publish(shard, next).await {
        let undo = Undo::Grown {
            topic: topic.clone(),
            partitions: count,
        };
        roll_back(shard, Arc::new(current.clone()), vec![undo]).await;
        return Err(e);
    }
    tracing::info!(topic = %name, partitions = count, "partitions added");
    Ok(())
}

/// Writes the topic with its new configs to `meta/` and publishes it; each shard applies them
/// to the partitions it holds. The caller holds the controller's lock and checked the configs.
pub(super) async fn alter_topic_configs(
    shard: &Shard,
    current: &ClusterMetadata,
    topic: &TopicInfo,
    configs: std::collections::BTreeMap<String, String>,
) -> Result<(), TopicError> {
    let changed = Arc::new(TopicInfo {
        configs,
        ..topic.clone()
    });
    store::save_topic(&shard.config.data_dir, &changed)
        .await
        .map_err(|e| TopicError::Storage(e.to_string()))?;
    let mut next = current.clone();
    next.topics.insert(changed.name.clone(), changed);
    publish(shard, next).await
}

/// Writes the broker's dynamic settings to `meta/` and publishes them; each shard lays them
/// over its static settings. The caller holds the controller's lock and checked the values.
pub(super) async fn alter_broker_configs(
    shard: &Shard,
    current: &ClusterMetadata,
    broker: Option<i32>,
    configs: std::collections::BTreeMap<String, String>,
) -> Result<(), TopicError> {
    let mut next = current.clone();
    next.broker_configs.set(broker, configs);
    store::save_broker_configs(
        &shard.config.data_dir,
        &next.broker_configs,
        shard.config.node_id,
    )
    .await
    .map_err(|e| TopicError::Storage(e.to_string()))?;
    publish(shard, next).await
}

/// A producer id from this broker's reservation in `meta/`, reserving a new block when it
/// runs out. The caller holds the controller's lock.
pub(super) async fn allocate_producer_id(
    shard: &Shard,
    controller: &Controller,
) -> Result<i64, String> {
    let id = controller.next_producer_id.get();
    if id >= controller.producer_ids_reserved_below.get() {
        let reserve = id + store::PRODUCER_ID_BLOCK;
        store::save_producer_reservation(
            &shard.config.data_dir,
            &shard.metadata().cluster_id,
            reserve,
        )
        .await
        .map_err(|e| e.to_string())?;
        controller.producer_ids_reserved_below.set(reserve);
    }
    controller.next_producer_id.set(id + 1);
    Ok(id)
}

/// A change `roll_back` undoes.
enum Undo {
    /// A topic created with this many partitions.
    Created { name: String, partitions: i32 },
    /// A topic (as it was) grown to this many partitions.
    Grown {
        topic: Arc<TopicInfo>,
        partitions: i32,
    },
}

/// A creation that a shard could not open (publish failed) leaves nothing behind, so the
/// client's retry starts clean and a restart does not meet half a topic: the topic's file goes
/// back to what it was, every shard is given the metadata from before (closing, and for a new
/// topic deleting, what it opened), and the directories of partitions that failed half-way
/// are removed. Failures here are logged: the client is already told the creation failed.
async fn roll_back(shard: &Shard, previous: Arc<ClusterMetadata>, undo: Vec<Undo>) {
    let data_dir = &shard.config.data_dir;
    let mut directories = Vec::new();
    for u in &undo {
        let (name, new_indexes, restored) = match u {
            Undo::Created { name, partitions } => (name.as_str(), 0..*partitions, None),
            Undo::Grown { topic, partitions } => (
                topic.name.as_str(),
                topic.partitions.len() as i32..*partitions,
                Some(topic),
            ),
        };
        let written = match restored {
            None => store::remove_topic(data_dir, name).await,
            Some(topic) => store::save_topic(data_dir, topic).await,
        };
        if let Err(e) = written {
            tracing::error!(topic = %name, error = %e, "undoing a failed creation in meta/ failed");
        }
        directories.extend(new_indexes.map(|i| shard.partition_dir(name, i)));
    }
    if let Err(e) = publish(shard, previous).await {
        tracing::error!(error = %e, "undoing a failed creation on the shards failed");
    }
    for dir in directories {
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "removing a partition directory of a failed creation")
            }
        }
    }
    tracing::warn!(changes = undo.len(), "a failed topic creation was undone");
}
