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
//!   `/config/users/<u>`, `/config/users/<u>/clients/<c>` and `/config/clients/<c>`: client
//!   quotas (names percent-encoded, `<default>` for the default);
//!   `/config/changes/config_change_<n>` (sequential) telling Kafka brokers which entity changed;
//! - `/admin/delete_topics/<t>`: a deletion the controller carries out;
//! - `/admin/preferred_replica_election`: partitions whose leadership goes back to their
//!   preferred replica (Kafka's znode and JSON), and Ferrite's `/admin/unclean_leader_election`
//!   in the same format, for ElectLeaders UNCLEAN;
//! - `/admin/reassign_partitions`: reassignments asked the old way (Kafka's tools before
//!   KIP-455); the controller moves them into the topic znodes and removes it;
//! - `/cluster/id`, and `/latest_producer_id_block` for idempotent producer ids.

use crate::config::{Listener, Listeners, SecurityProtocol};
use crate::metadata::BrokerEndpoint;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const BROKER_IDS: &str = "/brokers/ids";
pub const TOPICS: &str = "/brokers/topics";
pub const CONTROLLER: &str = "/controller";
pub const CONTROLLER_EPOCH: &str = "/controller_epoch";
pub const TOPIC_CONFIGS: &str = "/config/topics";
pub const BROKER_CONFIGS: &str = "/config/brokers";
pub const USER_CONFIGS: &str = "/config/users";
pub const CLIENT_CONFIGS: &str = "/config/clients";
/// The entity name Kafka uses for the cluster-wide default under `/config/brokers`.
pub const DEFAULT_ENTITY: &str = "<default>";
pub const CONFIG_CHANGES: &str = "/config/changes";
pub const DELETE_TOPICS: &str = "/admin/delete_topics";
pub const PREFERRED_ELECTION: &str = "/admin/preferred_replica_election";
pub const UNCLEAN_ELECTION: &str = "/admin/unclean_leader_election";
pub const REASSIGN_PARTITIONS: &str = "/admin/reassign_partitions";
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
    USER_CONFIGS,
    CLIENT_CONFIGS,
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

/// The config znode of a client quota entity, below `/config`: `users/<u>`,
/// `users/<u>/clients/<c>` or `clients/<c>` (Kafka's entity path); `None` for an empty one.
pub fn quota_entity_path(entity: &crate::metadata::client_quotas::QuotaEntity) -> Option<String> {
    match (&entity.user, &entity.client_id) {
        (Some(u), Some(c)) => Some(format!("users/{}/clients/{}", u.stored(), c.stored())),
        (Some(u), None) => Some(format!("users/{}", u.stored())),
        (None, Some(c)) => Some(format!("clients/{}", c.stored())),
        (None, None) => None,
    }
}

/// A user's config znode, `/config/users/<name>` (the name percent-encoded), and its entity
/// path for `/config/changes`.
pub fn user_config_path(user: &str) -> (String, String) {
    let stored = crate::metadata::client_quotas::EntityName::Named(user.to_string()).stored();
    (
        format!("{USER_CONFIGS}/{stored}"),
        format!("users/{stored}"),
    )
}

pub fn delete_topic_path(topic: &str) -> String {
    format!("{DELETE_TOPICS}/{topic}")
}

fn now_ms_string() -> String {
    ferrite_shards::types::now_ms().to_string()
}

/// `/brokers/ids/<id>`, version 5 as Kafka 2.x–3.x write it: every advertised listener in
/// `endpoints` (`NAME://host:port`) with its protocol in `listener_security_protocol_map`, and
/// `host`/`port` those of the first PLAINTEXT listener (null and -1 without one), for old readers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistration {
    pub version: i32,
    pub host: Option<String>,
    pub port: i32,
    pub endpoints: Vec<String>,
    pub listener_security_protocol_map: BTreeMap<String, String>,
    pub jmx_port: i32,
    pub timestamp: String,
    #[serde(default)]
    pub rack: Option<String>,
}

impl BrokerRegistration {
    pub fn new(listeners: &Listeners) -> BrokerRegistration {
        let advertised: Vec<(&Listener, &str, u16)> = listeners
            .list
            .iter()
            .filter_map(|l| l.advertised.as_ref().map(|(h, p)| (l, h.as_str(), *p)))
            .collect();
        let plaintext = advertised
            .iter()
            .find(|(l, _, _)| l.protocol == SecurityProtocol::Plaintext);
        BrokerRegistration {
            version: 5,
            host: plaintext.map(|(_, host, _)| host.to_string()),
            port: plaintext.map_or(-1, |(_, _, port)| *port as i32),
            endpoints: advertised
                .iter()
                .map(|(l, host, port)| format_endpoint(&l.name, host, *port))
                .collect(),
            listener_security_protocol_map: advertised
                .iter()
                .map(|(l, _, _)| (l.name.clone(), l.protocol.name().to_string()))
                .collect(),
            jmx_port: -1,
            timestamp: now_ms_string(),
            rack: None,
        }
    }

    /// The registered endpoints; entries that do not parse are left out.
    pub fn broker_endpoints(&self) -> Vec<BrokerEndpoint> {
        self.endpoints
            .iter()
            .filter_map(|e| {
                let (listener, address) = e.split_once("://")?;
                let (host, port) = address.rsplit_once(':')?;
                Some(BrokerEndpoint {
                    listener: listener.to_string(),
                    host: host
                        .trim_start_matches('[')
                        .trim_end_matches(']')
                        .to_string(),
                    port: port.parse().ok()?,
                })
            })
            .collect()
    }
}

/// `NAME://host:port`, an IPv6 host in brackets (Kafka's `EndPoint.connectionString`).
fn format_endpoint(listener: &str, host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("{listener}://[{host}]:{port}")
    } else {
        format!("{listener}://{host}:{port}")
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
    /// Left out when there is none, as Kafka writes it: Kafka's decoder fails on a null id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
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

    /// The partitions being reassigned, with the replicas they add and remove.
    pub fn reassignments(&self) -> BTreeMap<i32, crate::metadata::Reassignment> {
        let mut out: BTreeMap<i32, crate::metadata::Reassignment> = BTreeMap::new();
        for (p, adding) in &self.adding_replicas {
            if let Ok(p) = p.parse() {
                out.entry(p).or_default().adding = adding.clone();
            }
        }
        for (p, removing) in &self.removing_replicas {
            if let Ok(p) = p.parse() {
                out.entry(p).or_default().removing = removing.clone();
            }
        }
        out.retain(|_, r| !r.adding.is_empty() || !r.removing.is_empty());
        out
    }

    /// Starts, replaces or cancels (`None`) the reassignment of partition `p`, as Kafka's
    /// `ReplicaAssignment.reassignTo` / `revertReassignment`: the replica list becomes the
    /// target followed by the original replicas that leave; adding = new ones, removing = the
    /// leaving ones. Returns false for a cancel with no reassignment in progress.
    pub fn reassign(&mut self, p: i32, target: Option<&[i32]>) -> bool {
        let key = p.to_string();
        let current = self.partitions.get(&key).cloned().unwrap_or_default();
        let adding = self.adding_replicas.remove(&key).unwrap_or_default();
        let removing = self.removing_replicas.remove(&key).unwrap_or_default();
        let original: Vec<i32> = current
            .iter()
            .copied()
            .filter(|r| !adding.contains(r))
            .collect();
        let Some(target) = target else {
            self.partitions.insert(key, original);
            return !adding.is_empty() || !removing.is_empty();
        };
        let mut replicas: Vec<i32> = target.to_vec();
        replicas.extend(original.iter().copied().filter(|r| !target.contains(r)));
        let adding: Vec<i32> = replicas
            .iter()
            .copied()
            .filter(|r| !original.contains(r))
            .collect();
        let removing: Vec<i32> = replicas
            .iter()
            .copied()
            .filter(|r| !target.contains(r))
            .collect();
        if !adding.is_empty() {
            self.adding_replicas.insert(key.clone(), adding);
        }
        if !removing.is_empty() {
            self.removing_replicas.insert(key.clone(), removing);
        }
        self.partitions.insert(key, replicas);
        true
    }

    /// Ends the reassignment of partition `p`: its replicas are the target's alone.
    pub fn complete_reassignment(&mut self, p: i32) {
        let key = p.to_string();
        let removing = self.removing_replicas.remove(&key).unwrap_or_default();
        self.adding_replicas.remove(&key);
        if let Some(replicas) = self.partitions.get_mut(&key) {
            replicas.retain(|r| !removing.contains(r));
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

/// `/admin/reassign_partitions` (version 1).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReassignRequest {
    pub version: i32,
    pub partitions: Vec<ReassignPartition>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReassignPartition {
    pub topic: String,
    pub partition: i32,
    pub replicas: Vec<i32>,
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

/// As `decode`, for a znode Kafka may create with no data: `None` then. Kafka's brokers create
/// `/latest_producer_id_block` empty at start-up (`KafkaZkClient.createTopLevelPaths`), and a
/// user + client-id quota creates `/config/users/<u>` empty as its parent; Kafka reads both as
/// "nothing yet" (`ProducerIdManager`, `ConfigEntityZNode.decode`'s `bytes != null`).
pub fn decode_nullable<T: for<'de> Deserialize<'de>>(
    path: &str,
    bytes: &[u8],
) -> Result<Option<T>, String> {
    if bytes.is_empty() {
        return Ok(None);
    }
    decode(path, bytes).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kafka's `ReplicaAssignment` transitions for [1,2,3] reassigned to [3,4,2], then
    /// replaced by [4,5], then cancelled (the original set comes back, in target-first order).
    #[test]
    fn reassignments_start_replace_complete_and_cancel_as_kafkas() {
        let mut a = TopicAssignment::new("id".into(), &[vec![1, 2, 3]]);
        assert!(a.reassign(0, Some(&[3, 4, 2])));
        assert_eq!(a.replicas(), vec![(0, vec![3, 4, 2, 1])]);
        let r = &a.reassignments()[&0];
        assert_eq!((r.adding.clone(), r.removing.clone()), (vec![4], vec![1]));
        assert!(a.reassign(0, Some(&[4, 5])));
        assert_eq!(a.replicas(), vec![(0, vec![4, 5, 3, 2, 1])]);
        let r = &a.reassignments()[&0];
        assert_eq!(
            (r.adding.clone(), r.removing.clone()),
            (vec![4, 5], vec![3, 2, 1])
        );
        assert!(a.reassign(0, None), "a cancel of one in progress");
        assert_eq!(a.replicas(), vec![(0, vec![3, 2, 1])]);
        assert!(a.reassignments().is_empty());
        assert!(!a.reassign(0, None), "nothing left to cancel");
        assert!(a.reassign(0, Some(&[2, 4])));
        a.complete_reassignment(0);
        assert_eq!(a.replicas(), vec![(0, vec![2, 4])]);
        assert!(a.reassignments().is_empty());
    }

    /// Znode contents as a Kafka 3.x cluster writes them.
    #[test]
    fn kafkas_own_znodes_decode() {
        let broker: BrokerRegistration = decode("b", br#"{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://kafka1:9092"],"jmx_port":-1,"port":9092,"host":"kafka1","version":5,"timestamp":"1700000000000"}"#).unwrap();
        assert_eq!(
            (broker.host.as_deref(), broker.port),
            (Some("kafka1"), 9092)
        );
        assert_eq!(
            broker.broker_endpoints(),
            vec![BrokerEndpoint {
                listener: "PLAINTEXT".into(),
                host: "kafka1".into(),
                port: 9092
            }]
        );
        let topic: TopicAssignment = decode("t", br#"{"partitions":{"1":[2,3,1],"0":[1,2,3]},"topic_id":"q2Oq0JwKQxqb2ESZCUU_zA","adding_replicas":{},"removing_replicas":{},"version":3}"#).unwrap();
        assert_eq!(
            topic.replicas(),
            vec![(0, vec![1, 2, 3]), (1, vec![2, 3, 1])]
        );
        // A topic from before Kafka 2.8 has no id, and keeps none when rewritten.
        let old: TopicAssignment = decode("t", br#"{"version":1,"partitions":{"0":[1]}}"#).unwrap();
        assert_eq!(old.topic_id, None);
        let rewritten = String::from_utf8(encode(&old)).unwrap();
        assert!(!rewritten.contains("topic_id"), "{rewritten}");
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
        let b = BrokerRegistration::new(&Listeners::plaintext(
            "127.0.0.1:19092".parse().unwrap(),
            "127.0.0.1".into(),
            19092,
        ));
        assert_eq!(decode::<BrokerRegistration>("b", &encode(&b)).unwrap(), b);
        assert_eq!((b.host.as_deref(), b.port), (Some("127.0.0.1"), 19092));
        let settings = crate::config::ListenerSettings {
            listeners: Some("INTERNAL://127.0.0.1:19093,EXTERNAL://[::1]:19094"),
            protocol_map: Some("INTERNAL:SASL_SSL,EXTERNAL:SSL"),
            inter_broker_listener_name: Some("INTERNAL"),
            ..Default::default()
        };
        let secure = BrokerRegistration::new(&Listeners::from_settings(&settings).unwrap());
        assert_eq!((secure.host.as_deref(), secure.port), (None, -1));
        assert_eq!(
            secure.endpoints,
            vec!["INTERNAL://127.0.0.1:19093", "EXTERNAL://[::1]:19094"]
        );
        assert_eq!(secure.listener_security_protocol_map["EXTERNAL"], "SSL");
        let endpoints = secure.broker_endpoints();
        assert_eq!(
            (endpoints[1].host.as_str(), endpoints[1].port),
            ("::1", 19094)
        );
        let t = TopicAssignment::new("id".into(), &[vec![1, 2], vec![2, 3]]);
        assert_eq!(decode::<TopicAssignment>("t", &encode(&t)).unwrap(), t);
        assert!(decode::<PartitionState>("s", b"{").is_err());
    }
}
