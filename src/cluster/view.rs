//! Reading what ZooKeeper holds into a `ClusterMetadata` snapshot for the shards.
//!
//! The whole tree is read again on every change (debounced by the session loop): simple, and
//! cheap for clusters of a few hundred partitions. A topic whose assignment is there but whose
//! partition states are not yet (the controller creates them) shows leader -1.

use super::znodes::{self, BrokerRegistration, EntityConfig, PartitionState, TopicAssignment};
use crate::metadata::{
    BrokerInfo, ClusterMetadata, DynamicBrokerConfigs, PartitionInfo, Reassignment, TopicInfo,
};
use ferrite_shards::placement::ShardId;
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
async fn read_user_and_client_configs(
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

pub async fn read_tree(client: &Client) -> Result<ZkTree, Error> {
    let mut tree = ZkTree::default();
    if let Some((bytes, _)) = data_or_none(client, znodes::CLUSTER_ID).await? {
        if let Some(id) = decoded::<znodes::ClusterId>(znodes::CLUSTER_ID, &bytes) {
            tree.cluster_id = id.id;
        }
    }
    if let Some((bytes, _)) = data_or_none(client, znodes::CONTROLLER).await? {
        tree.controller = decoded::<znodes::ControllerRegistration>(znodes::CONTROLLER, &bytes)
            .map(|c| c.brokerid);
    }
    for id in children(client, znodes::BROKER_IDS).await? {
        let Ok(n) = id.parse::<i32>() else { continue };
        let path = znodes::broker_path(n);
        if let Some((bytes, _)) = data_or_none(client, &path).await? {
            if let Some(b) = decoded::<BrokerRegistration>(&path, &bytes) {
                tree.brokers.insert(n, b);
            }
        }
    }
    for name in children(client, znodes::TOPICS).await? {
        let path = znodes::topic_path(&name);
        let Some((bytes, assignment_version)) = data_or_none(client, &path).await? else {
            continue;
        };
        let Some(assignment) = decoded::<TopicAssignment>(&path, &bytes) else {
            continue;
        };
        let reassignments = assignment.reassignments();
        let configs = entity_config(client, &znodes::topic_config_path(&name)).await?;
        let mut partitions = BTreeMap::new();
        for (p, replicas) in assignment.replicas() {
            let state_path = znodes::partition_state_path(&name, p);
            let state = data_or_none(client, &state_path)
                .await?
                .and_then(|(bytes, version)| {
                    decoded::<PartitionState>(&state_path, &bytes).map(|s| (s, version))
                });
            partitions.insert(p, ZkPartition { replicas, state });
        }
        let id = assignment.topic_id.clone().unwrap_or_default();
        tree.topics.insert(
            name,
            ZkTopic {
                id,
                configs,
                partitions,
                reassignments,
                assignment: Some((assignment, assignment_version)),
            },
        );
    }
    for entity in children(client, znodes::BROKER_CONFIGS).await? {
        let broker = match entity.as_str() {
            znodes::DEFAULT_ENTITY => None,
            id => match id.parse::<i32>() {
                Ok(n) => Some(n),
                Err(_) => continue,
            },
        };
        let configs = entity_config(client, &znodes::broker_config_path(broker)).await?;
        tree.broker_configs.set(broker, configs);
    }
    (tree.client_quotas, tree.scram_users) = read_user_and_client_configs(client).await?;
    tree.acls = super::acls::read(client).await?;
    tree.pending_deletions = children(client, znodes::DELETE_TOPICS).await?;
    if let Some((bytes, _)) = data_or_none(client, znodes::REASSIGN_PARTITIONS).await? {
        if let Some(asked) = decoded::<znodes::ReassignRequest>(znodes::REASSIGN_PARTITIONS, &bytes)
        {
            tree.reassign_requests = asked.partitions;
        }
    }
    for (path, into) in [
        (znodes::PREFERRED_ELECTION, &mut tree.preferred_elections),
        (znodes::UNCLEAN_ELECTION, &mut tree.unclean_elections),
    ] {
        if let Some((bytes, _)) = data_or_none(client, path).await? {
            if let Some(asked) = decoded::<znodes::ElectionRequest>(path, &bytes) {
                *into = asked.partitions;
            }
        }
    }
    Ok(tree)
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
