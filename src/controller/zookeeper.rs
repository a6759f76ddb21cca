//! The ZooKeeper authority: validate and place as the single-broker controller does, then let
//! the control thread write ZooKeeper and wait until this shard's view shows the result (the
//! elected controller's duties, leaders and ISR, run on the control thread: `cluster/duties.rs`).

use super::capacity::ClusterLoad;
use super::{check_new_topic, Controller, NewTopic, TopicError};
use crate::cluster::requests::{CreateOutcome, PlannedTopic, Request};
use crate::cluster::{assign_replicas, ZkHandle};
use crate::metadata::client_quotas::QuotaEntity;
use crate::metadata::{cluster_id_string, random_id, ClusterMetadata, PartitionInfo, TopicInfo};
use crate::security::acl::{AccessEntry, ResourcePattern};
use crate::shard::Shard;
use ferrite_shards::foreign::Reply;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a shard waits for its view to show a change ZooKeeper already has.
const VIEW_TIMEOUT: Duration = Duration::from_secs(10);

fn unavailable() -> TopicError {
    TopicError::Storage("the ZooKeeper control thread has stopped".into())
}

pub(super) async fn create_topics(
    shard: &Shard,
    zk: &ZkHandle,
    topics: Vec<NewTopic>,
    validate_only: bool,
) -> Vec<(String, Result<Arc<TopicInfo>, TopicError>)> {
    let metadata = shard.metadata();
    let live: Vec<i32> = metadata.brokers.iter().map(|b| b.node_id).collect();
    let mut results = Vec::with_capacity(topics.len());
    let mut planned = Vec::new();
    let mut load = ClusterLoad::of(shard, &metadata);
    for t in topics {
        let checked = check_new_topic(shard, &metadata, &t).and_then(|t| {
            let start = random_id()[0] as usize;
            let replicas = assign_replicas(
                &live,
                t.partitions as usize,
                t.replication_factor as usize,
                start,
            );
            load.place(shard, &t.name, 0, &replicas)?;
            Ok((t, replicas))
        });
        match checked {
            Err(e) => results.push((t.name, Err(e))),
            Ok((t, replicas)) => {
                let plan = PlannedTopic {
                    name: t.name.clone(),
                    id: cluster_id_string(&random_id()),
                    replicas,
                    configs: t.configs,
                };
                if validate_only {
                    results.push((t.name, Ok(Arc::new(preview(&plan)))));
                } else {
                    planned.push(plan);
                }
            }
        }
    }
    if planned.is_empty() {
        return results;
    }
    let names: Vec<String> = planned.iter().map(|p| p.name.clone()).collect();
    let Some(created) = zk
        .call(|reply| Request::CreateTopics {
            topics: planned,
            reply,
        })
        .await
    else {
        results.extend(names.into_iter().map(|n| (n, Err(unavailable()))));
        return results;
    };
    for (name, outcome) in created {
        let result = match outcome {
            CreateOutcome::AlreadyExists => Err(TopicError::AlreadyExists),
            CreateOutcome::Failed(e) => Err(TopicError::Storage(e)),
            CreateOutcome::Created => match wait_for(shard, |m| m.topic(&name).cloned()).await {
                Some(info) => {
                    tracing::info!(topic = %name, partitions = info.partitions.len(), "topic created in ZooKeeper");
                    Ok(info)
                }
                None => Err(TopicError::Storage(format!(
                    "topic {name} was written to ZooKeeper but is not in this broker's view yet"
                ))),
            },
        };
        results.push((name, result));
    }
    results
}

/// What CreateTopics answers for `validate_only`: the topic as it would be (no leaders yet).
fn preview(plan: &PlannedTopic) -> TopicInfo {
    TopicInfo {
        name: plan.name.clone(),
        id: [0; 16],
        partitions: plan
            .replicas
            .iter()
            .enumerate()
            .map(|(i, r)| PartitionInfo {
                index: i as i32,
                shard: ferrite_shards::placement::ShardId(0),
                leader: r.first().copied().unwrap_or(-1),
                leader_epoch: 0,
                partition_epoch: 0,
                replicas: r.clone(),
                isr: r.clone(),
            })
            .collect(),
        configs: plan.configs.clone(),
    }
}

pub(super) async fn delete_topics(
    shard: &Shard,
    zk: &ZkHandle,
    names: Vec<String>,
) -> Vec<(String, Result<(), TopicError>)> {
    let Some(marked) = zk
        .call(|reply| Request::DeleteTopics {
            names: names.clone(),
            reply,
        })
        .await
    else {
        return names.into_iter().map(|n| (n, Err(unavailable()))).collect();
    };
    let mut results = Vec::with_capacity(marked.len());
    for (name, r) in marked {
        let result = match r {
            Ok(false) => Err(TopicError::UnknownTopic),
            Err(e) => Err(TopicError::Storage(e)),
            Ok(true) => match wait_for(shard, |m| m.topic(&name).is_none().then_some(())).await {
                Some(()) => Ok(()),
                None => Err(TopicError::Storage(format!(
                    "topic {name} is marked for deletion; the controller has not finished"
                ))),
            },
        };
        results.push((name, result));
    }
    results
}

/// Grows a topic to `count` partitions; the new ones get the replication factor of the first.
pub(super) async fn create_partitions(
    shard: &Shard,
    zk: &ZkHandle,
    name: &str,
    count: i32,
) -> Result<(), TopicError> {
    let metadata = shard.metadata();
    let topic = metadata.topic(name).ok_or(TopicError::UnknownTopic)?;
    let existing = topic.partitions.len();
    let rf = topic
        .partitions
        .first()
        .map(|p| p.replicas.len())
        .unwrap_or(1);
    let live: Vec<i32> = metadata.brokers.iter().map(|b| b.node_id).collect();
    if rf > live.len() {
        return Err(TopicError::InvalidReplicationFactor(format!(
            "Replication factor: {rf} larger than available brokers: {}.",
            live.len()
        )));
    }
    // Continue the rotation of the existing partitions so leaders stay spread.
    let replicas = assign_replicas(&live, count as usize - existing, rf, existing);
    ClusterLoad::of(shard, &metadata).place(shard, name, existing, &replicas)?;
    let topic_name = name.to_string();
    let r = zk
        .call(|reply| Request::AddPartitions {
            topic: topic_name,
            existing,
            replicas,
            reply,
        })
        .await
        .ok_or_else(unavailable)?;
    r.map_err(TopicError::Storage)?;
    let grown = |m: &ClusterMetadata| {
        m.topic(name)
            .filter(|t| t.partitions.len() == count as usize)
            .map(|_| ())
    };
    wait_for(shard, grown).await.ok_or_else(|| {
        TopicError::Storage(format!(
            "{name}: new partitions are not in this broker's view yet"
        ))
    })
}

/// A producer id from this broker's block, taking a new block `[start, end]` for this broker
/// alone from ZooKeeper when it runs out. The caller holds the controller's lock.
pub(super) async fn allocate_producer_id(
    zk: &ZkHandle,
    controller: &Controller,
) -> Result<i64, String> {
    let mut id = controller.next_producer_id.get();
    if id >= controller.producer_ids_reserved_below.get() {
        let (start, end) = zk
            .call(|reply| Request::ProducerIds { reply })
            .await
            .unwrap_or_else(|| Err("the ZooKeeper control thread has stopped".into()))?;
        id = start;
        controller.producer_ids_reserved_below.set(end + 1);
    }
    controller.next_producer_id.set(id + 1);
    Ok(id)
}

/// Sends a write to the control thread, then waits until this broker's view shows it
/// (`seen`); every other broker's watch brings it too. `what` names it in the error when the
/// view does not catch up within `VIEW_TIMEOUT`.
async fn write_then_see<T: Send + 'static>(
    shard: &Shard,
    zk: &ZkHandle,
    write: impl FnOnce(Reply<Result<T, String>>) -> Request,
    seen: impl Fn(&ClusterMetadata) -> bool,
    what: &str,
) -> Result<T, TopicError> {
    let written = zk
        .call(write)
        .await
        .ok_or_else(unavailable)?
        .map_err(TopicError::Storage)?;
    wait_for(shard, |m| seen(m).then_some(()))
        .await
        .ok_or_else(|| {
            TopicError::Storage(format!(
                "{what} are in ZooKeeper but not in this broker's view yet"
            ))
        })?;
    Ok(written)
}

/// Writes the topic's configs to `/config/topics/<t>`.
pub(super) async fn alter_topic_configs(
    shard: &Shard,
    zk: &ZkHandle,
    name: &str,
    configs: BTreeMap<String, String>,
) -> Result<(), TopicError> {
    let wanted = configs.clone();
    let topic = name.to_string();
    let write = |reply| Request::AlterTopicConfig {
        topic,
        configs,
        reply,
    };
    let seen = |m: &ClusterMetadata| m.topic(name).is_some_and(|t| t.configs == wanted);
    write_then_see(shard, zk, write, seen, &format!("the configs of {name}")).await
}

/// Writes `/config/brokers/<id|<default>>`.
pub(super) async fn alter_broker_configs(
    shard: &Shard,
    zk: &ZkHandle,
    broker: Option<i32>,
    configs: BTreeMap<String, String>,
) -> Result<(), TopicError> {
    let wanted = configs.clone();
    let write = |reply| Request::AlterBrokerConfig {
        broker,
        configs,
        reply,
    };
    let seen = |m: &ClusterMetadata| *m.broker_configs.of(broker) == wanted;
    write_then_see(shard, zk, write, seen, "the broker configs").await
}

/// Writes a client quota entity's znode (`/config/users/...`, `/config/clients/...`).
pub(super) async fn alter_client_quotas(
    shard: &Shard,
    zk: &ZkHandle,
    entity: QuotaEntity,
    quotas: BTreeMap<String, String>,
) -> Result<(), TopicError> {
    let wanted = quotas.clone();
    let key = entity.clone();
    let write = |reply| Request::AlterClientQuota {
        entity,
        quotas,
        reply,
    };
    let seen = |m: &ClusterMetadata| {
        m.client_quotas
            .get(&key)
            .map_or(wanted.is_empty(), |q| *q == wanted)
    };
    write_then_see(shard, zk, write, seen, "the client quotas").await
}

/// Writes one pattern's ACLs under `/kafka-acl` (or `/kafka-acl-extended`).
pub(super) async fn write_acls(
    shard: &Shard,
    zk: &ZkHandle,
    pattern: ResourcePattern,
    entries: BTreeSet<AccessEntry>,
) -> Result<(), TopicError> {
    let (key, wanted) = (pattern.clone(), entries.clone());
    let write = |reply| Request::WriteAcls {
        pattern,
        entries,
        reply,
    };
    let seen = |m: &ClusterMetadata| m.acls.get(&key).map_or(wanted.is_empty(), |e| *e == wanted);
    write_then_see(shard, zk, write, seen, "the ACLs").await
}

/// Writes a user's SCRAM credentials to `/config/users/<name>`.
pub(super) async fn alter_scram_user(
    shard: &Shard,
    zk: &ZkHandle,
    user: String,
    credentials: BTreeMap<String, String>,
) -> Result<(), TopicError> {
    let (name, wanted) = (user.clone(), credentials.clone());
    let write = |reply| Request::AlterScramUser {
        user,
        credentials,
        reply,
    };
    let seen = |m: &ClusterMetadata| {
        m.scram_users
            .get(&name)
            .map_or(wanted.is_empty(), |c| *c == wanted)
    };
    write_then_see(shard, zk, write, seen, "the SCRAM credentials").await
}

/// Writes the reassignments to the topic znode; the view shows a started one with the target
/// first, and a cancelled one gone.
pub(super) async fn reassign_partitions(
    shard: &Shard,
    zk: &ZkHandle,
    topic: &str,
    partitions: Vec<(i32, Option<Vec<i32>>)>,
) -> Result<Vec<(i32, bool)>, TopicError> {
    let asked = partitions.clone();
    let name = topic.to_string();
    let write = |reply| Request::Reassign {
        topic: name,
        partitions,
        reply,
    };
    let seen = |m: &ClusterMetadata| {
        asked.iter().all(|(p, target)| match target {
            Some(target) => m
                .partition(topic, *p)
                .is_some_and(|info| info.replicas.starts_with(target)),
            None => !m.reassignments.contains_key(&(topic.to_string(), *p)),
        })
    };
    let what = format!("the reassignments of {topic}");
    write_then_see(shard, zk, write, seen, &what).await
}

/// Writes the election request znode for the elected controller.
pub(super) async fn elect_leaders(
    zk: &ZkHandle,
    partitions: Vec<(String, i32)>,
    unclean: bool,
) -> Result<(), TopicError> {
    let partitions = partitions
        .into_iter()
        .map(|(topic, partition)| crate::cluster::znodes::ElectionPartition { topic, partition })
        .collect();
    zk.call(|reply| Request::ElectLeaders {
        partitions,
        unclean,
        reply,
    })
    .await
    .ok_or_else(unavailable)?
    .map_err(TopicError::Storage)
}

/// Polls this shard's view until `f` finds what it looks for (bounded by `VIEW_TIMEOUT`).
async fn wait_for<T>(shard: &Shard, f: impl Fn(&ClusterMetadata) -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + VIEW_TIMEOUT;
    loop {
        if let Some(found) = f(&shard.metadata()) {
            return Some(found);
        }
        if Instant::now() >= deadline {
            return None;
        }
        glommio::timer::sleep(Duration::from_millis(10)).await;
    }
}
