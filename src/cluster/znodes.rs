//! The znodes of a ZooKeeper-mode cluster, in Kafka's layout and JSON, one type per znode.
//!
//! Kafka's tools (and an operator's `zkCli.sh`) read these as they read a Kafka cluster's:
//! - `/brokers/ids/<id>` (ephemeral): a live broker and its endpoint;
//! - `/controller` (ephemeral): the elected controller; `/controller_epoch`: its generation;
//! - `/brokers/topics/<t>`: a topic's id and replica assignment;
//! - `/brokers/topics/<t>/partitions/<p>/state`: leader, leader epoch, ISR — changed only by a
//!   conditional set on the znode's version;
//! - `/config/topics/<t>`: the topic's config overrides; `/config/brokers/<default>` and
//!   `/config/brokers/<id>`: dynamic broker settings, cluster-wide and per broker; and
//!   `/config/changes/config_change_<n>` (sequential) telling Kafka brokers which entity changed;
//! - `/admin/delete_topics/<t>`: a deletion the controller carries out;
//! - `/admin/preferred_replica_election`: partitions whose leadership goes back to their
//!   preferred replica (Kafka's znode and JSON), and Ferrite's `/admin/unclean_leader_election`
//!   in the same format, for ElectLeaders UNCLEAN;
//! - `/cluster/id`, and `/latest_producer_id_block` for idempotent producer ids.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const BROKER_IDS: &str = "/brokers/ids";
pub const TOPICS: &str = "/brokers/topics";
pub const CONTROLLER: &str = "/controller";
pub const CONTROLLER_EPOCH: &str = "/controller_epoch";
pub const TOPIC_CONFIGS: &str = "/config/topics";
pub const BROKER_CONFIGS: &str = "/config/brokers";
/// The entity name Kafka uses for the cluster-wide default under `/config/brokers`.
pub const DEFAULT_ENTITY: &str = "<default>";
pub const CONFIG_CHANGES: &str = "/config/changes";
pub const DELETE_TOPICS: &str = "/admin/delete_topics";
pub const PREFERRED_ELECTION: &str = "/admin/preferred_replica_election";
pub const UNCLEAN_ELECTION: &str = "/admin/unclean_leader_election";
pub const CLUSTER_ID: &str = "/cluster/id";
pub const PRODUCER_ID_BLOCK: &str = "/latest_producer_id_block";

/// Persistent parents created at start-up when missing.
pub const PARENTS: &[&str] = &[
    "/brokers",
    BROKER_IDS,
    TOPICS,
    "/config",
    TOPIC_CONFIGS,
    BROKER_CONFIGS,
    CONFIG_CHANGES,
    "/admin",
    DELETE_TOPICS,
    "/cluster",
];

pub fn broker_path(id: i32) -> String {
    format!("{BROKER_IDS}/{id}")
}

pub fn topic_path(topic: &str) -> String {
    format!("{TOPICS}/{topic}")
}

pub fn partitions_path(topic: &str) -> String {
    format!("{TOPICS}/{topic}/partitions")
}

pub fn partition_path(topic: &str, partition: i32) -> String {
    format!("{TOPICS}/{topic}/partitions/{partition}")
}

pub fn partition_state_path(topic: &str, partition: i32) -> String {
    format!("{TOPICS}/{topic}/partitions/{partition}/state")
}

pub fn topic_config_path(topic: &str) -> String {
    format!("{TOPIC_CONFIGS}/{topic}")
}

/// `/config/brokers/<id>`, or `/config/brokers/<default>` for `None`.
pub fn broker_config_path(broker: Option<i32>) -> String {
    match broker {
        Some(id) => format!("{BROKER_CONFIGS}/{id}"),
        None => format!("{BROKER_CONFIGS}/{DEFAULT_ENTITY}"),
    }
}

pub fn delete_topic_path(topic: &str) -> String {
    format!("{DELETE_TOPICS}/{topic}")
}

fn now_ms_string() -> String {
    ferrite_shards::types::now_ms().to_string()
}

/// `/brokers/ids/<id>`, version 5 as Kafka 2.x–3.x write it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistration {
    pub version: i32,
    pub host: String,
    pub port: i32,
    pub endpoints: Vec<String>,
    pub listener_security_protocol_map: BTreeMap<String, String>,
    pub jmx_port: i32,
    pub timestamp: String,
    #[serde(default)]
    pub rack: Option<String>,
}

impl BrokerRegistration {
    pub fn new(host: &str, port: u16) -> BrokerRegistration {
        BrokerRegistration {
            version: 5,
            host: host.to_string(),
            port: port as i32,
            endpoints: vec![format!("PLAINTEXT://{host}:{port}")],
            listener_security_protocol_map: BTreeMap::from([(
                "PLAINTEXT".to_string(),
                "PLAINTEXT".to_string(),
            )]),
            jmx_port: -1,
            timestamp: now_ms_string(),
            rack: None,
        }
    }
}

/// `/controller`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerRegistration {
    pub version: i32,
    pub brokerid: i32,
    pub timestamp: String,
}

impl ControllerRegistration {
    pub fn new(broker: i32) -> ControllerRegistration {
        ControllerRegistration {
            version: 1,
            brokerid: broker,
            timestamp: now_ms_string(),
        }
    }
}

/// `/brokers/topics/<t>`: partition → replica list, and the topic id (Kafka 2.8+).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicAssignment {
    pub version: i32,
    #[serde(default)]
    pub topic_id: Option<String>,
    pub partitions: BTreeMap<String, Vec<i32>>,
    #[serde(default)]
    pub adding_replicas: BTreeMap<String, Vec<i32>>,
    #[serde(default)]
    pub removing_replicas: BTreeMap<String, Vec<i32>>,
}

impl TopicAssignment {
    pub fn new(topic_id: String, replicas: &[Vec<i32>]) -> TopicAssignment {
        TopicAssignment {
            version: 3,
            topic_id: Some(topic_id),
            partitions: replicas
                .iter()
                .enumerate()
                .map(|(p, r)| (p.to_string(), r.clone()))
                .collect(),
            adding_replicas: BTreeMap::new(),
            removing_replicas: BTreeMap::new(),
        }
    }

    /// Replica lists by partition index, ascending; entries that are not numbers are skipped.
    pub fn replicas(&self) -> Vec<(i32, Vec<i32>)> {
        let mut out: Vec<(i32, Vec<i32>)> = self
            .partitions
            .iter()
            .filter_map(|(p, r)| Some((p.parse().ok()?, r.clone())))
            .collect();
        out.sort_by_key(|(p, _)| *p);
        out
    }
}

/// `/brokers/topics/<t>/partitions/<p>/state`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionState {
    pub controller_epoch: i32,
    pub leader: i32,
    pub version: i32,
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
}

impl PartitionState {
    pub fn new(controller_epoch: i32, leader: i32, leader_epoch: i32, isr: Vec<i32>) -> Self {
        PartitionState {
            controller_epoch,
            leader,
            version: 1,
            leader_epoch,
            isr,
        }
    }
}

/// `/config/topics/<t>` and `/config/brokers/<entity>`: an entity's configs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntityConfig {
    pub version: i32,
    pub config: BTreeMap<String, String>,
}

/// `/config/changes/config_change_<n>`: which entity's configs changed (Kafka's
/// `ZkAdminManager` notification, version 2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigChange {
    pub version: i32,
    pub entity_path: String,
}

/// `/admin/preferred_replica_election` (and `/admin/unclean_leader_election`): the partitions
/// an election was asked for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ElectionRequest {
    pub version: i32,
    pub partitions: Vec<ElectionPartition>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ElectionPartition {
    pub topic: String,
    pub partition: i32,
}

/// `/cluster/id`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterId {
    pub version: String,
    pub id: String,
}

/// `/latest_producer_id_block`: the last block of producer ids a broker took.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerIdBlock {
    pub version: i32,
    pub broker: i32,
    pub block_start: String,
    pub block_end: String,
}

pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("znode types serialise")
}

pub fn decode<T: for<'de> Deserialize<'de>>(path: &str, bytes: &[u8]) -> Result<T, String> {
    serde_json::from_slice(bytes).map_err(|e| format!("znode {path}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Znode contents as a Kafka 3.x cluster writes them.
    #[test]
    fn kafkas_own_znodes_decode() {
        let broker: BrokerRegistration = decode("b", br#"{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://kafka1:9092"],"jmx_port":-1,"port":9092,"host":"kafka1","version":5,"timestamp":"1700000000000"}"#).unwrap();
        assert_eq!((broker.host.as_str(), broker.port), ("kafka1", 9092));
        let topic: TopicAssignment = decode("t", br#"{"partitions":{"1":[2,3,1],"0":[1,2,3]},"topic_id":"q2Oq0JwKQxqb2ESZCUU_zA","adding_replicas":{},"removing_replicas":{},"version":3}"#).unwrap();
        assert_eq!(
            topic.replicas(),
            vec![(0, vec![1, 2, 3]), (1, vec![2, 3, 1])]
        );
        let state: PartitionState = decode(
            "s",
            br#"{"controller_epoch":3,"leader":2,"version":1,"leader_epoch":7,"isr":[2,3]}"#,
        )
        .unwrap();
        assert_eq!(state, PartitionState::new(3, 2, 7, vec![2, 3]));
        let controller: ControllerRegistration = decode(
            "c",
            br#"{"version":1,"brokerid":2,"timestamp":"1700000000000"}"#,
        )
        .unwrap();
        assert_eq!(controller.brokerid, 2);
    }

    #[test]
    fn what_ferrite_writes_reads_back() {
        let b = BrokerRegistration::new("127.0.0.1", 19092);
        assert_eq!(decode::<BrokerRegistration>("b", &encode(&b)).unwrap(), b);
        let t = TopicAssignment::new("id".into(), &[vec![1, 2], vec![2, 3]]);
        assert_eq!(decode::<TopicAssignment>("t", &encode(&t)).unwrap(), t);
        assert!(decode::<PartitionState>("s", b"{").is_err());
    }
}
