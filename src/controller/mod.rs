//! The controller of a single broker: it alone changes the metadata.
//!
//! Runs on shard 0; other shards call it through the router. Each change is validated against
//! the current snapshot, written to `meta/` (durably) and then published to every shard, which
//! opens or removes its partitions before the change is acknowledged. Changes are serialised.
//! Producer ids for idempotent producers are handed out here too, reserved in blocks on disk so
//! an id is never given twice across restarts.

mod capacity;
mod mutation_quota;
mod single_node;
mod zookeeper;

pub use mutation_quota::Payer;

use crate::cluster::ZkHandle;
use crate::metadata::client_quotas::QuotaEntity;
use crate::metadata::{collides, topic_config, validate_topic_name, ClusterMetadata, TopicInfo};
use crate::protocol::errors::ErrorCode;
use crate::security::acl::{AccessEntry, ResourcePattern};
use crate::shard::Shard;
use glommio::sync::Semaphore;
use mutation_quota::MutationQuota;
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::Arc;

/// Why a topic change was refused; each is one Kafka error code, and the message (its
/// `Display`) is what the client is told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopicError {
    #[error("Topic already exists.")]
    AlreadyExists,
    #[error("This server does not host this topic.")]
    UnknownTopic,
    #[error("{0}")]
    InvalidName(String),
    #[error("{0}")]
    InvalidPartitions(String),
    #[error("{0}")]
    InvalidReplicationFactor(String),
    #[error("{0}")]
    InvalidConfig(String),
    #[error("{0}")]
    InvalidRequest(String),
    #[error("{0}")]
    Storage(String),
    #[error("The throttling quota has been exceeded.")]
    Throttled,
    /// The authorizer said no (the handler's check, not the controller's).
    #[error("{0}")]
    TopicUnauthorized(String),
}

impl TopicError {
    pub fn code(&self) -> ErrorCode {
        match self {
            TopicError::AlreadyExists => ErrorCode::TOPIC_ALREADY_EXISTS,
            TopicError::UnknownTopic => ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            TopicError::InvalidName(_) => ErrorCode::INVALID_TOPIC_EXCEPTION,
            TopicError::InvalidPartitions(_) => ErrorCode::INVALID_PARTITIONS,
            TopicError::InvalidReplicationFactor(_) => ErrorCode::INVALID_REPLICATION_FACTOR,
            TopicError::InvalidConfig(_) => ErrorCode::INVALID_CONFIG,
            TopicError::InvalidRequest(_) => ErrorCode::INVALID_REQUEST,
            TopicError::Storage(_) => ErrorCode::KAFKA_STORAGE_ERROR,
            TopicError::Throttled => ErrorCode::THROTTLING_QUOTA_EXCEEDED,
            TopicError::TopicUnauthorized(_) => ErrorCode::TOPIC_AUTHORIZATION_FAILED,
        }
    }
}

/// A topic to create, as asked (-1 means the broker default).
#[derive(Clone, Debug)]
pub struct NewTopic {
    pub name: String,
    pub partitions: i32,
    pub replication_factor: i16,
    pub configs: BTreeMap<String, String>,
}

pub struct Controller {
    lock: Semaphore,
    next_producer_id: Cell<i64>,
    producer_ids_reserved_below: Cell<i64>,
    quota: MutationQuota,
}

impl Controller {
    /// `mutations_per_second`: the controller mutation quota of each client (0: none).
    pub fn new(producer_ids_reserved_below: i64, mutations_per_second: u64) -> Controller {
        Controller {
            lock: Semaphore::new(1),
            quota: MutationQuota::new(mutations_per_second as f64),
            // Ids below the reservation may have been handed out before a restart.
            next_producer_id: Cell::new(producer_ids_reserved_below),
            producer_ids_reserved_below: Cell::new(producer_ids_reserved_below),
        }
    }
}

/// The controller's state: it lives on shard 0, where the router sends controller duties.
fn the_controller(shard: &Shard) -> Rc<Controller> {
    shard.service::<Controller>()
}

/// Checks a new topic against the snapshot and fills in defaults.
pub(crate) fn check_new_topic(
    shard: &Shard,
    metadata: &ClusterMetadata,
    t: &NewTopic,
) -> Result<NewTopic, TopicError> {
    validate_topic_name(&t.name).map_err(TopicError::InvalidName)?;
    if metadata.topic(&t.name).is_some() {
        return Err(TopicError::AlreadyExists);
    }
    if let Some(other) = metadata.topics.keys().find(|n| collides(n, &t.name)) {
        return Err(TopicError::InvalidName(format!(
            "Topic '{}' collides with existing topic: {other}",
            t.name
        )));
    }
    let broker = &shard.config.broker;
    let partitions = match t.partitions {
        -1 => broker.num_partitions,
        n if (1..=100_000).contains(&n) => n,
        n => {
            return Err(TopicError::InvalidPartitions(format!(
                "Number of partitions must be larger than 0 (got {n})."
            )))
        }
    };
    let replication_factor = match t.replication_factor {
        -1 => broker.default_replication_factor,
        n => n,
    };
    let brokers = metadata.brokers.len() as i16;
    if replication_factor < 1 || replication_factor > brokers {
        return Err(TopicError::InvalidReplicationFactor(format!(
            "Replication factor: {replication_factor} larger than available brokers: {brokers}."
        )));
    }
    for (k, v) in &t.configs {
        topic_config::validate(k, v).map_err(TopicError::InvalidConfig)?;
    }
    Ok(NewTopic {
        name: t.name.clone(),
        partitions,
        replication_factor,
        configs: t.configs.clone(),
    })
}

/// Publishes `metadata` to every shard and waits until each has opened or removed partitions.
pub async fn publish(
    shard: &Shard,
    metadata: impl Into<Arc<ClusterMetadata>>,
) -> Result<(), TopicError> {
    let metadata: Arc<ClusterMetadata> = metadata.into();
    let results = shard
        .router()
        .broadcast(move |s: Rc<Shard>| {
            let metadata = metadata.clone();
            Box::pin(async move { s.install_metadata(metadata).await })
        })
        .await;
    for r in results {
        match r {
            Some(Ok(())) => {}
            Some(Err(e)) => return Err(TopicError::Storage(e)),
            None => return Err(TopicError::Storage("a shard has stopped".into())),
        }
    }
    Ok(())
}

/// Who decides changes to the metadata: this broker alone, keeping it in `meta/`, or ZooKeeper
/// through the control thread. Each duty below is the same question asked of either.
enum Authority<'a> {
    SingleNode,
    ZooKeeper(&'a ZkHandle),
}

impl Authority<'_> {
    fn of(shard: &Shard) -> Authority<'_> {
        match &shard.cluster {
            None => Authority::SingleNode,
            Some(zk) => Authority::ZooKeeper(zk),
        }
    }
}

/// Creates topics (CreateTopics, auto-creation). With `validate_only` nothing changes.
pub async fn create_topics(
    shard: &Shard,
    topics: Vec<NewTopic>,
    validate_only: bool,
    payer: &Payer,
) -> Vec<(String, Result<Arc<TopicInfo>, TopicError>)> {
    let controller = the_controller(shard);
    let quota = &controller.quota;
    if validate_only || !quota.charges(payer) {
        return create_topics_now(shard, topics, validate_only).await;
    }
    // As Kafka's admin manager: topic by topic, each charged once created, and each refused
    // once an earlier one (in this request or before) has emptied the bucket.
    let mut results = Vec::with_capacity(topics.len());
    for t in topics {
        if let Err(e) = quota.check(payer) {
            results.push((t.name, Err(e)));
            continue;
        }
        let created = create_topics_now(shard, vec![t], false).await;
        let partitions = created.iter().filter_map(|(_, r)| r.as_ref().ok());
        quota.record(payer, partitions.map(|t| t.partitions.len()).sum());
        results.extend(created);
    }
    results
}

async fn create_topics_now(
    shard: &Shard,
    topics: Vec<NewTopic>,
    validate_only: bool,
) -> Vec<(String, Result<Arc<TopicInfo>, TopicError>)> {
    match Authority::of(shard) {
        Authority::SingleNode => single_node::create_topics(shard, topics, validate_only).await,
        Authority::ZooKeeper(zk) => {
            zookeeper::create_topics(shard, zk, topics, validate_only).await
        }
    }
}

/// How long `payer` is asked to wait before its next topic change (`throttle_time_ms`).
pub fn mutation_throttle_ms(shard: &Shard, payer: &Payer) -> i32 {
    the_controller(shard).quota.throttle_ms(payer)
}

/// Deletes topics and their data.
pub async fn delete_topics(
    shard: &Shard,
    names: Vec<String>,
    payer: &Payer,
) -> Vec<(String, Result<(), TopicError>)> {
    let controller = the_controller(shard);
    let quota = &controller.quota;
    if !quota.charges(payer) {
        return delete_topics_now(shard, names).await;
    }
    let mut results = Vec::with_capacity(names.len());
    for name in names {
        if let Err(e) = quota.check(payer) {
            results.push((name, Err(e)));
            continue;
        }
        let partitions = shard
            .metadata()
            .topic(&name)
            .map_or(0, |t| t.partitions.len());
        let deleted = delete_topics_now(shard, vec![name]).await;
        if deleted.iter().all(|(_, r)| r.is_ok()) {
            quota.record(payer, partitions);
        }
        results.extend(deleted);
    }
    results
}

async fn delete_topics_now(
    shard: &Shard,
    names: Vec<String>,
) -> Vec<(String, Result<(), TopicError>)> {
    match Authority::of(shard) {
        Authority::SingleNode => single_node::delete_topics(shard, names).await,
        Authority::ZooKeeper(zk) => zookeeper::delete_topics(shard, zk, names).await,
    }
}

/// Grows a topic to `count` partitions (CreatePartitions).
pub async fn create_partitions(
    shard: &Shard,
    name: &str,
    count: i32,
    validate_only: bool,
    payer: &Payer,
) -> Result<(), TopicError> {
    let controller = the_controller(shard);
    let _lock = controller.lock.acquire_permit(1).await;
    let current = shard.metadata();
    let topic = current.topic(name).ok_or(TopicError::UnknownTopic)?;
    let have = topic.partitions.len() as i32;
    if count <= have {
        return Err(TopicError::InvalidPartitions(format!(
            "Topic currently has {have} partitions, which is higher than or equal to the requested {count}."
        )));
    }
    if count > 100_000 {
        return Err(TopicError::InvalidPartitions(format!(
            "{count} partitions is more than 100000."
        )));
    }
    if validate_only {
        return Ok(());
    }
    controller.quota.check(payer)?;
    match Authority::of(shard) {
        Authority::SingleNode => single_node::create_partitions(shard, &current, name, count).await,
        Authority::ZooKeeper(zk) => zookeeper::create_partitions(shard, zk, name, count).await,
    }?;
    controller.quota.record(payer, (count - have) as usize);
    Ok(())
}

/// Replaces a topic's config overrides with `configs` (each checked), on every broker that
/// holds it; with `validate_only` nothing changes. Both AlterConfigs (the whole set) and
/// IncrementalAlterConfigs (the set after its operations) end here.
pub async fn alter_topic_configs(
    shard: &Shard,
    name: &str,
    configs: BTreeMap<String, String>,
    validate_only: bool,
) -> Result<(), TopicError> {
    let controller = the_controller(shard);
    let _lock = controller.lock.acquire_permit(1).await;
    let current = shard.metadata();
    let topic = current.topic(name).ok_or(TopicError::UnknownTopic)?;
    for (k, v) in &configs {
        topic_config::validate(k, v).map_err(TopicError::InvalidConfig)?;
    }
    if validate_only || topic.configs == configs {
        return Ok(());
    }
    match Authority::of(shard) {
        Authority::SingleNode => {
            single_node::alter_topic_configs(shard, &current, topic, configs).await
        }
        Authority::ZooKeeper(zk) => zookeeper::alter_topic_configs(shard, zk, name, configs).await,
    }?;
    tracing::info!(topic = %name, "topic configs changed");
    Ok(())
}

/// Replaces the dynamic settings of one broker (`Some(id)`) or the cluster default (`None`)
/// with `configs`, checked first (INVALID_CONFIG): kept in `meta/` or in ZooKeeper, then in
/// force on every shard (and, in a cluster, on every broker the entity covers).
pub async fn alter_broker_configs(
    shard: &Shard,
    broker: Option<i32>,
    configs: BTreeMap<String, String>,
    validate_only: bool,
) -> Result<(), TopicError> {
    let controller = the_controller(shard);
    let _lock = controller.lock.acquire_permit(1).await;
    shard
        .config
        .broker
        .check_dynamic(&configs)
        .map_err(TopicError::InvalidConfig)?;
    let current = shard.metadata();
    if validate_only || *current.broker_configs.of(broker) == configs {
        return Ok(());
    }
    match Authority::of(shard) {
        Authority::SingleNode => {
            single_node::alter_broker_configs(shard, &current, broker, configs).await
        }
        Authority::ZooKeeper(zk) => {
            zookeeper::alter_broker_configs(shard, zk, broker, configs).await
        }
    }?;
    match broker {
        Some(id) => tracing::info!(broker = id, "dynamic broker configs changed"),
        None => tracing::info!("dynamic cluster-default broker configs changed"),
    }
    Ok(())
}

/// Replaces the SCRAM credentials of each user named (mechanism → Kafka's text; an empty set
/// removes the user), checked by the caller: kept in `meta/users.json` or in
/// `/config/users/<name>`, then in every shard's (every broker's) metadata.
pub async fn alter_scram_users(
    shard: &Shard,
    users: BTreeMap<String, BTreeMap<String, String>>,
) -> Result<(), TopicError> {
    let controller = the_controller(shard);
    let _lock = controller.lock.acquire_permit(1).await;
    match Authority::of(shard) {
        Authority::SingleNode => {
            let mut next = (*shard.metadata()).clone();
            for (user, credentials) in users {
                if credentials.is_empty() {
                    next.scram_users.remove(&user);
                } else {
                    next.scram_users.insert(user, credentials);
                }
            }
            crate::metadata::store::save_users(&shard.config.data_dir, &next.scram_users)
                .await
                .map_err(|e| TopicError::Storage(e.to_string()))?;
            publish(shard, next).await
        }
        Authority::ZooKeeper(zk) => {
            for (user, credentials) in users {
                zookeeper::alter_scram_user(shard, zk, user, credentials).await?;
            }
            Ok(())
        }
    }
}

/// Replaces the ACLs of each pattern given (an empty set: the pattern's ACLs go), checked by
/// the caller: kept in `meta/acls.json` or under `/kafka-acl`, then in force on every shard
/// (every broker).
pub async fn alter_acls(
    shard: &Shard,
    changes: Vec<(ResourcePattern, BTreeSet<AccessEntry>)>,
) -> Result<(), TopicError> {
    let controller = the_controller(shard);
    let _lock = controller.lock.acquire_permit(1).await;
    match Authority::of(shard) {
        Authority::SingleNode => {
            let mut next = (*shard.metadata()).clone();
            for (pattern, entries) in changes {
                if entries.is_empty() {
                    next.acls.remove(&pattern);
                } else {
                    next.acls.insert(pattern, entries);
                }
            }
            crate::metadata::store::save_acls(&shard.config.data_dir, &next.acls)
                .await
                .map_err(|e| TopicError::Storage(e.to_string()))?;
            publish(shard, next).await
        }
        Authority::ZooKeeper(zk) => {
            for (pattern, entries) in changes {
                zookeeper::write_acls(shard, zk, pattern, entries).await?;
            }
            Ok(())
        }
    }
}

/// Replaces one client quota entity's values (empty: the entity goes), checked by the caller:
/// kept in `meta/` or in ZooKeeper, then in force on every shard (every broker).
pub async fn alter_client_quotas(
    shard: &Shard,
    entity: QuotaEntity,
    quotas: BTreeMap<String, String>,
) -> Result<(), TopicError> {
    let controller = the_controller(shard);
    let _lock = controller.lock.acquire_permit(1).await;
    let current = shard.metadata();
    let empty = BTreeMap::new();
    if *current.client_quotas.get(&entity).unwrap_or(&empty) == quotas {
        return Ok(());
    }
    match Authority::of(shard) {
        Authority::SingleNode => {
            let mut next = (*current).clone();
            if quotas.is_empty() {
                next.client_quotas.remove(&entity);
            } else {
                next.client_quotas.insert(entity, quotas);
            }
            crate::metadata::store::save_client_quotas(&shard.config.data_dir, &next.client_quotas)
                .await
                .map_err(|e| TopicError::Storage(e.to_string()))?;
            publish(shard, next).await
        }
        Authority::ZooKeeper(zk) => zookeeper::alter_client_quotas(shard, zk, entity, quotas).await,
    }
}

/// Starts, replaces or cancels (`None`) reassignments of `topic`'s partitions, already checked
/// against the live brokers; answers per partition whether there was something to do (false:
/// a cancel with none in progress). In ZooKeeper mode the topic znode is rewritten and the
/// elected controller carries the moves out; a single broker's only valid target is itself,
/// where nothing moves.
pub async fn reassign_partitions(
    shard: &Shard,
    topic: &str,
    partitions: Vec<(i32, Option<Vec<i32>>)>,
) -> Result<Vec<(i32, bool)>, TopicError> {
    match Authority::of(shard) {
        Authority::SingleNode => Ok(partitions
            .into_iter()
            .map(|(p, target)| (p, target.is_some()))
            .collect()),
        Authority::ZooKeeper(zk) => {
            zookeeper::reassign_partitions(shard, zk, topic, partitions).await
        }
    }
}

/// Asks for elections of the partitions named (ElectLeaders): in ZooKeeper mode the elected
/// controller carries them out on its next pass; a single broker leads every partition it has,
/// so there is never one to do (the handler answers ELECTION_NOT_NEEDED before asking).
pub async fn elect_leaders(
    shard: &Shard,
    partitions: Vec<(String, i32)>,
    unclean: bool,
) -> Result<(), TopicError> {
    match Authority::of(shard) {
        Authority::SingleNode => Ok(()),
        Authority::ZooKeeper(zk) => zookeeper::elect_leaders(zk, partitions, unclean).await,
    }
}

/// A producer id never handed out before, even across restarts.
pub async fn allocate_producer_id(shard: &Shard) -> Result<i64, String> {
    let controller = the_controller(shard);
    let _lock = controller.lock.acquire_permit(1).await;
    match Authority::of(shard) {
        Authority::SingleNode => single_node::allocate_producer_id(shard, &controller).await,
        Authority::ZooKeeper(zk) => zookeeper::allocate_producer_id(zk, &controller).await,
    }
}
