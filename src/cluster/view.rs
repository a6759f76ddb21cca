//! Reading what ZooKeeper holds into a `ClusterMetadata` snapshot for the shards.
//!
//! The whole tree is read when a session starts or comes back from a disconnection; after that
//! only what the watch reports as changed is read again (`changes.rs`). A topic whose
//! assignment is there but whose partition states are not yet (the controller creates them)
//! shows leader -1.

use super::znodes::{self, BrokerRegistration, EntityConfig, PartitionState, TopicAssignment};
use crate::metadata::{
    BrokerInfo, ClusterMetadata, DynamicBrokerConfigs, PartitionInfo, Reassignment, TopicInfo,
};
use ferrite_shards::placement::ShardId;
use futures::StreamExt;
use std::collections::BTreeMap;
use std::sync::Arc;
use zookeeper_client::{Client, Error};

/// A partition as ZooKeeper has it, with the state's znode version for conditional updates.
#[derive(Clone, Debug)]
pub struct ZkPartition {
    pub replicas: Vec<i32>,
    pub state: Option<(PartitionState, i32)>,
}

/// A topic as ZooKeeper has it.
#[derive(Clone, Debug, Default)]
pub struct ZkTopic {
    /// Kafka's text form of the topic id.
    pub id: String,
    pub configs: BTreeMap<String, String>,
    pub partitions: BTreeMap<i32, ZkPartition>,
    /// Partitions being reassigned.
    pub reassignments: BTreeMap<i32, Reassignment>,
    /// The assignment znode as read, and its version, for conditional rewrites.
    pub assignment: Option<(TopicAssignment, i32)>,
}

/// Everything read in one pass.
#[derive(Clone, Debug, Default)]
pub struct ZkTree {
    pub cluster_id: String,
    pub controller: Option<i32>,
    pub brokers: BTreeMap<i32, BrokerRegistration>,
    pub topics: BTreeMap<String, ZkTopic>,
    pub pending_deletions: Vec<String>,
    pub broker_configs: DynamicBrokerConfigs,
    pub client_quotas: crate::metadata::client_quotas::ClientQuotaConfigs,
    pub scram_users: crate::metadata::store::ScramUsers,
    /// ACLs from `/kafka-acl` and `/kafka-acl-extended`.
    pub acls: crate::security::acl::AclTable,
    /// Elections asked for (ElectLeaders), preferred and unclean.
    pub preferred_elections: Vec<znodes::ElectionPartition>,
    /// Reassignments asked through `/admin/reassign_partitions`.
    pub reassign_requests: Vec<znodes::ReassignPartition>,
    pub unclean_elections: Vec<znodes::ElectionPartition>,
}

async fn data_or_none(client: &Client, path: &str) -> Result<Option<(Vec<u8>, i32)>, Error> {
    match client.get_data(path).await {
        Ok((data, stat)) => Ok(Some((data, stat.version))),
        Err(Error::NoNode) => Ok(None),
        Err(e) => Err(e),
    }
}

async fn children(client: &Client, path: &str) -> Result<Vec<String>, Error> {
    match client.list_children(path).await {
        Ok(c) => Ok(c),
        Err(Error::NoNode) => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

fn decoded<T: for<'de> serde::Deserialize<'de>>(path: &str, bytes: &[u8]) -> Option<T> {
    match znodes::decode(path, bytes) {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::warn!(error = %e, "ignoring an unreadable znode");
            None
        }
    }
}

/// An entity's configs (`/config/topics/<t>`, `/config/brokers/<entity>`); none if absent.
async fn entity_config(client: &Client, path: &str) -> Result<BTreeMap<String, String>, Error> {
    Ok(match data_or_none(client, path).await? {
        Some((bytes, _)) => decoded::<EntityConfig>(path, &bytes)
            .map(|c| c.config)
            .unwrap_or_default(),
        None => BTreeMap::new(),
    })
}

/// Every client quota entity with values (`/config/users/<u>`, `/config/users/<u>/clients/<c>`
/// and `/config/clients/<c>`), and every user's SCRAM credentials (`/config/users/<u>`). Names
/// that are not Kafka's sanitized form are skipped.
pub(super) async fn read_user_and_client_configs(
    client: &Client,
) -> Result<
    (
        crate::metadata::client_quotas::ClientQuotaConfigs,
        crate::metadata::store::ScramUsers,
    ),
    Error,
> {
    use crate::security::scram::Mechanism;
    let mut scram_users = crate::metadata::store::ScramUsers::new();
    use crate::metadata::client_quotas::{EntityName, QuotaEntity};
    let mut quotas = crate::metadata::client_quotas::ClientQuotaConfigs::new();
    let mut entities = Vec::new();
    for u in children(client, znodes::USER_CONFIGS).await? {
        let Some(user) = EntityName::from_stored(&u) else {
            continue;
        };
        entities.push(QuotaEntity {
            user: Some(user.clone()),
            client_id: None,
        });
        let clients = format!("{}/{u}/clients", znodes::USER_CONFIGS);
        for c in children(client, &clients).await? {
            let Some(client_id) = EntityName::from_stored(&c) else {
                continue;
            };
            entities.push(QuotaEntity {
                user: Some(user.clone()),
                client_id: Some(client_id),
            });
        }
    }
    for c in children(client, znodes::CLIENT_CONFIGS).await? {
        let Some(client_id) = EntityName::from_stored(&c) else {
            continue;
        };
        entities.push(QuotaEntity {
            user: None,
            client_id: Some(client_id),
        });
    }
    for entity in entities {
        let Some(path) = znodes::quota_entity_path(&entity) else {
            continue;
        };
        let mut values = entity_config(client, &format!("/config/{path}")).await?;
        if let (Some(EntityName::Named(user)), None) = (&entity.user, &entity.client_id) {
            let scram: BTreeMap<String, String> = values
                .iter()
                .filter(|(k, _)| Mechanism::from_name(k).is_some())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if !scram.is_empty() {
                scram_users.insert(user.clone(), scram);
            }
        }
        values.retain(|k, _| crate::metadata::client_quotas::is_quota_key(k));
        if !values.is_empty() {
            quotas.insert(entity, values);
        }
    }
    Ok((quotas, scram_users))
}

/// How many topics a whole read reads at once (each pipelines its partition states).
const TOPICS_IN_FLIGHT: usize = 32;

pub async fn read_tree(client: &Client) -> Result<ZkTree, Error> {
    let mut tree = ZkTree {
        cluster_id: read_cluster_id(client).await?,
        controller: read_controller(client).await?,
        ..Default::default()
    };
    for id in children(client, znodes::BROKER_IDS).await? {
        let Ok(n) = id.parse::<i32>() else { continue };
        if let Some(b) = read_broker(client, n).await? {
            tree.brokers.insert(n, b);
        }
    }
    let names = children(client, znodes::TOPICS).await?;
    let mut topics = futures::stream::iter(names)
        .map(|name| async move {
            let topic = read_topic(client, &name, None).await;
            (name, topic)
        })
        .buffered(TOPICS_IN_FLIGHT);
    while let Some((name, topic)) = topics.next().await {
        if let Some(topic) = topic? {
            tree.topics.insert(name, topic);
        }
    }
    drop(topics);
    tree.broker_configs = read_broker_configs(client).await?;
    (tree.client_quotas, tree.scram_users) = read_user_and_client_configs(client).await?;
    tree.acls = super::acls::read(client).await?;
    tree.pending_deletions = read_pending_deletions(client).await?;
    tree.reassign_requests = read_reassign_requests(client).await?;
    tree.preferred_elections = read_elections(client, znodes::PREFERRED_ELECTION).await?;
    tree.unclean_elections = read_elections(client, znodes::UNCLEAN_ELECTION).await?;
    Ok(tree)
}

pub(super) async fn read_cluster_id(client: &Client) -> Result<String, Error> {
    Ok(data_or_none(client, znodes::CLUSTER_ID)
        .await?
        .and_then(|(bytes, _)| decoded::<znodes::ClusterId>(znodes::CLUSTER_ID, &bytes))
        .map(|id| id.id)
        .unwrap_or_default())
}

pub(super) async fn read_controller(client: &Client) -> Result<Option<i32>, Error> {
    Ok(data_or_none(client, znodes::CONTROLLER)
        .await?
        .and_then(|(bytes, _)| {
            decoded::<znodes::ControllerRegistration>(znodes::CONTROLLER, &bytes)
        })
        .map(|c| c.brokerid))
}

/// `/brokers/ids/<n>`; none once the broker's session is gone.
pub(super) async fn read_broker(
    client: &Client,
    n: i32,
) -> Result<Option<BrokerRegistration>, Error> {
    let path = znodes::broker_path(n);
    Ok(data_or_none(client, &path)
        .await?
        .and_then(|(bytes, _)| decoded::<BrokerRegistration>(&path, &bytes)))
}

/// A topic's assignment, configs and partition states; none when its znode is gone.
///
/// With `known`, the topic as this broker already holds it, the states of the partitions it
/// already has are kept (each state's own change arrives as its own event) and only new
/// partitions' states are read; the configs are kept too (they have their own znode). A topic
/// whose id changed was deleted and created again: it is read whole.
pub(super) async fn read_topic(
    client: &Client,
    name: &str,
    known: Option<&ZkTopic>,
) -> Result<Option<ZkTopic>, Error> {
    let path = znodes::topic_path(name);
    let Some((bytes, assignment_version)) = data_or_none(client, &path).await? else {
        return Ok(None);
    };
    let Some(assignment) = decoded::<TopicAssignment>(&path, &bytes) else {
        return Ok(None);
    };
    let id = assignment.topic_id.clone().unwrap_or_default();
    let known = known.filter(|k| k.id == id);
    let configs = match known {
        Some(k) => k.configs.clone(),
        None => entity_config(client, &znodes::topic_config_path(name)).await?,
    };
    let replicas = assignment.replicas();
    let unknown: Vec<i32> = replicas
        .iter()
        .map(|(p, _)| *p)
        .filter(|p| known.is_none_or(|k| !k.partitions.contains_key(p)))
        .collect();
    let read =
        futures::future::try_join_all(unknown.iter().map(|&p| read_state(client, name, p))).await?;
    let mut read: BTreeMap<i32, _> = unknown.into_iter().zip(read).collect();
    let partitions = replicas
        .into_iter()
        .map(|(p, replicas)| {
            let state = match read.remove(&p) {
                Some(state) => state,
                None => known
                    .and_then(|k| k.partitions.get(&p))
                    .and_then(|zp| zp.state.clone()),
            };
            (p, ZkPartition { replicas, state })
        })
        .collect();
    Ok(Some(ZkTopic {
        id,
        configs,
        partitions,
        reassignments: assignment.reassignments(),
        assignment: Some((assignment, assignment_version)),
    }))
}

/// `/brokers/topics/<t>/partitions/<p>/state` and its version; none before the controller
/// writes it.
pub(super) async fn read_state(
    client: &Client,
    topic: &str,
    partition: i32,
) -> Result<Option<(PartitionState, i32)>, Error> {
    let path = znodes::partition_state_path(topic, partition);
    Ok(data_or_none(client, &path)
        .await?
        .and_then(|(bytes, version)| {
            decoded::<PartitionState>(&path, &bytes).map(|s| (s, version))
        }))
}

pub(super) async fn read_topic_configs(
    client: &Client,
    topic: &str,
) -> Result<BTreeMap<String, String>, Error> {
    entity_config(client, &znodes::topic_config_path(topic)).await
}

pub(super) async fn read_broker_configs(client: &Client) -> Result<DynamicBrokerConfigs, Error> {
    let mut configs = DynamicBrokerConfigs::default();
    for entity in children(client, znodes::BROKER_CONFIGS).await? {
        let broker = match entity.as_str() {
            znodes::DEFAULT_ENTITY => None,
            id => match id.parse::<i32>() {
                Ok(n) => Some(n),
                Err(_) => continue,
            },
        };
        configs.set(
            broker,
            entity_config(client, &znodes::broker_config_path(broker)).await?,
        );
    }
    Ok(configs)
}

pub(super) async fn read_pending_deletions(client: &Client) -> Result<Vec<String>, Error> {
    children(client, znodes::DELETE_TOPICS).await
}

pub(super) async fn read_reassign_requests(
    client: &Client,
) -> Result<Vec<znodes::ReassignPartition>, Error> {
    Ok(data_or_none(client, znodes::REASSIGN_PARTITIONS)
        .await?
        .and_then(|(bytes, _)| {
            decoded::<znodes::ReassignRequest>(znodes::REASSIGN_PARTITIONS, &bytes)
        })
        .map(|asked| asked.partitions)
        .unwrap_or_default())
}

/// The partitions of `/admin/preferred_replica_election` or `/admin/unclean_leader_election`.
pub(super) async fn read_elections(
    client: &Client,
    path: &str,
) -> Result<Vec<znodes::ElectionPartition>, Error> {
    Ok(data_or_none(client, path)
        .await?
        .and_then(|(bytes, _)| decoded::<znodes::ElectionRequest>(path, &bytes))
        .map(|asked| asked.partitions)
        .unwrap_or_default())
}

/// The shards' snapshot of `tree`. A `fenced` broker (its session expired) leads nothing.
pub fn metadata_of(tree: &ZkTree, node_id: i32, shards: usize, fenced: bool) -> ClusterMetadata {
    let brokers = tree
        .brokers
        .iter()
        .map(|(&id, b)| BrokerInfo {
            node_id: id,
            endpoints: b.broker_endpoints(),
            rack: b.rack.clone(),
        })
        .collect();
    let topics = tree
        .topics
        .iter()
        .filter(|(name, _)| !tree.pending_deletions.contains(name))
        .map(|(name, topic)| {
            let partitions = topic
                .partitions
                .iter()
                .map(|(&index, zp)| {
                    let (leader, leader_epoch, partition_epoch, isr) = match &zp.state {
                        Some((s, version)) => (s.leader, s.leader_epoch, *version, s.isr.clone()),
                        None => (-1, 0, 0, Vec::new()),
                    };
                    let leader = if fenced && leader == node_id {
                        -1
                    } else {
                        leader
                    };
                    PartitionInfo {
                        index,
                        shard: ShardId(super::shard_for(name, index, shards)),
                        leader,
                        leader_epoch,
                        partition_epoch,
                        replicas: zp.replicas.clone(),
                        isr,
                    }
                })
                .collect();
            let info = TopicInfo {
                name: name.clone(),
                id: decode_topic_id(&topic.id),
                partitions,
                configs: topic.configs.clone(),
            };
            (name.clone(), Arc::new(info))
        })
        .collect();
    let reassignments = tree
        .topics
        .iter()
        .flat_map(|(name, t)| {
            t.reassignments
                .iter()
                .map(move |(&p, r)| ((name.clone(), p), r.clone()))
        })
        .collect();
    ClusterMetadata {
        reassignments,
        cluster_id: tree.cluster_id.clone(),
        controller_id: tree.controller.unwrap_or(-1),
        brokers,
        topics,
        broker_configs: tree.broker_configs.clone(),
        client_quotas: tree.client_quotas.clone(),
        scram_users: tree.scram_users.clone(),
        acls: tree.acls.clone(),
    }
}

/// Kafka writes topic ids as URL-safe base64 of 16 bytes without padding.
pub fn decode_topic_id(text: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    let mut bits: u32 = 0;
    let mut nbits = 0;
    let mut at = 0;
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' | b'+' => 62,
            b'_' | b'/' => 63,
            _ => return [0; 16],
        };
        bits = (bits << 6) | v as u32;
        nbits += 6;
        if nbits >= 8 {
            nbits -= 8;
            if at < 16 {
                out[at] = (bits >> nbits) as u8;
                at += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{cluster_id_string, random_id};

    #[test]
    fn topic_ids_round_trip_kafkas_text_form() {
        let id = random_id();
        assert_eq!(decode_topic_id(&cluster_id_string(&id)), id);
    }

    #[test]
    fn a_fenced_broker_leads_nothing() {
        let mut tree = ZkTree::default();
        let mut partitions = BTreeMap::new();
        partitions.insert(
            0,
            ZkPartition {
                replicas: vec![1],
                state: Some((PartitionState::new(1, 1, 4, vec![1]), 0)),
            },
        );
        tree.topics.insert(
            "t".into(),
            ZkTopic {
                partitions,
                ..Default::default()
            },
        );
        assert_eq!(
            metadata_of(&tree, 1, 2, false)
                .partition("t", 0)
                .unwrap()
                .leader,
            1
        );
        assert_eq!(
            metadata_of(&tree, 1, 2, true)
                .partition("t", 0)
                .unwrap()
                .leader,
            -1
        );
        assert_eq!(
            metadata_of(&tree, 2, 2, true)
                .partition("t", 0)
                .unwrap()
                .leader,
            1
        );
    }
}
