//! What the cluster looks like: brokers, topics, partitions and where each partition lives.
//!
//! A snapshot is immutable and shared (`Arc`) by every shard; a change makes a new snapshot that
//! the controller pushes to all shards. On a single broker the controller is shard 0 and the
//! snapshot is persisted under `<data-dir>/meta/` (see `store.rs`).

pub mod client_quotas;
pub mod store;
pub mod topic_config;

use ferrite_shards::placement::ShardId;
use ferrite_shards::LogConfig;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Longest topic name Kafka accepts.
pub const TOPIC_NAME_MAX: usize = 249;
pub const CONSUMER_OFFSETS_TOPIC: &str = "__consumer_offsets";
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerInfo {
    pub node_id: i32,
    /// Where the broker is reached, one address per advertised listener.
    pub endpoints: Vec<BrokerEndpoint>,
    pub rack: Option<String>,
}

/// A broker's advertised address on one listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerEndpoint {
    /// The listener's name, upper case (`PLAINTEXT`, `SASL_SSL`, `INTERNAL`).
    pub listener: String,
    pub host: String,
    pub port: i32,
}

impl BrokerInfo {
    /// The broker's address on `listener`; a broker without that listener is not reachable
    /// through it, and Metadata on that listener leaves it out (as Kafka's metadata cache does).
    pub fn endpoint(&self, listener: &str) -> Option<&BrokerEndpoint> {
        self.endpoints.iter().find(|e| e.listener == listener)
    }

    /// The endpoints of a broker's advertised `listeners`.
    pub fn endpoints_of(listeners: &crate::config::Listeners) -> Vec<BrokerEndpoint> {
        listeners
            .advertised()
            .map(|(name, host, port)| BrokerEndpoint {
                listener: name.to_string(),
                host: host.to_string(),
                port: port as i32,
            })
            .collect()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionInfo {
    pub index: i32,
    /// The shard of this broker that owns the partition (the placement table entry).
    pub shard: ShardId,
    pub leader: i32,
    pub leader_epoch: i32,
    /// Kafka's partition epoch: in ZooKeeper mode the version of the partition's state znode,
    /// which every leader or ISR change bumps, so a leader can tell metadata older than its
    /// own ISR change from newer (0 without ZooKeeper, where nothing changes it).
    pub partition_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicInfo {
    pub name: String,
    pub id: [u8; 16],
    pub partitions: Vec<PartitionInfo>,
    /// Topic-level config overrides, by Kafka name.
    pub configs: BTreeMap<String, String>,
}

impl TopicInfo {
    pub fn is_internal(&self) -> bool {
        self.name == CONSUMER_OFFSETS_TOPIC || self.name == TRANSACTION_STATE_TOPIC
    }

    /// The topic's log settings: broker defaults, then its overrides.
    pub fn log_config(&self, defaults: &LogConfig) -> LogConfig {
        let mut c = defaults.clone();
        for (k, v) in &self.configs {
            // Overrides were validated when set; a name the log does not know (a broker-level
            // one such as min.insync.replicas) is simply not a log setting.
            let _ = c.set(k, v);
        }
        c
    }
}

/// Broker settings changed at run time (AlterConfigs on a broker resource), by Kafka name:
/// kept in `meta/broker-configs.json` on a single broker, and in ZooKeeper at
/// `/config/brokers/<default>` and `/config/brokers/<id>` in a cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DynamicBrokerConfigs {
    /// Every broker's (the resource name `""`).
    pub cluster_default: BTreeMap<String, String>,
    /// One broker's own, which win over the cluster default.
    pub per_broker: BTreeMap<i32, BTreeMap<String, String>>,
}

impl DynamicBrokerConfigs {
    /// The set of one entity: `None` is the cluster default.
    pub fn of(&self, broker: Option<i32>) -> &BTreeMap<String, String> {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        match broker {
            None => &self.cluster_default,
            Some(id) => self.per_broker.get(&id).unwrap_or(&EMPTY),
        }
    }

    pub fn set(&mut self, broker: Option<i32>, configs: BTreeMap<String, String>) {
        match broker {
            None => self.cluster_default = configs,
            Some(id) if configs.is_empty() => {
                self.per_broker.remove(&id);
            }
            Some(id) => {
                self.per_broker.insert(id, configs);
            }
        }
    }
}

/// A partition moving to other replicas (AlterPartitionReassignments): its replica list is,
/// meanwhile, the target's replicas followed by the original ones that are leaving.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reassignment {
    pub adding: Vec<i32>,
    pub removing: Vec<i32>,
}

/// One snapshot of the cluster's metadata.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterMetadata {
    pub cluster_id: String,
    pub controller_id: i32,
    pub brokers: Vec<BrokerInfo>,
    pub topics: BTreeMap<String, Arc<TopicInfo>>,
    pub broker_configs: DynamicBrokerConfigs,
    /// Partitions being reassigned (ZooKeeper mode), by topic and index.
    pub reassignments: BTreeMap<(String, i32), Reassignment>,
    /// Client quotas (AlterClientQuotas), kept in `meta/client-quotas.json` or under
    /// `/config/users` and `/config/clients`.
    pub client_quotas: client_quotas::ClientQuotaConfigs,
    /// SCRAM users: name → mechanism → Kafka's credential text (`security::scram`), kept in
    /// `meta/users.json` or in `/config/users/<name>`.
    pub scram_users: store::ScramUsers,
    /// ACLs (CreateAcls), kept in `meta/acls.json` or under `/kafka-acl`.
    pub acls: crate::security::acl::AclTable,
}

impl ClusterMetadata {
    /// The brokers reachable on `listener`, each with its address there; a client of one
    /// listener is never sent to another's address (Kafka's metadata cache per listener).
    pub fn brokers_on<'a>(
        &'a self,
        listener: &'a str,
    ) -> impl Iterator<Item = (&'a BrokerInfo, &'a BrokerEndpoint)> + 'a {
        self.brokers
            .iter()
            .filter_map(move |b| b.endpoint(listener).map(|e| (b, e)))
    }

    pub fn topic(&self, name: &str) -> Option<&Arc<TopicInfo>> {
        self.topics.get(name)
    }

    /// The topic with this id (requests from v13 of Fetch on name topics by id). A linear
    /// scan: requests name few topics, and the zero id is nobody's.
    pub fn topic_by_id(&self, id: &[u8; 16]) -> Option<&Arc<TopicInfo>> {
        if *id == [0; 16] {
            return None;
        }
        self.topics.values().find(|t| t.id == *id)
    }

    pub fn partition(&self, topic: &str, index: i32) -> Option<&PartitionInfo> {
        let t = self.topics.get(topic)?;
        usize::try_from(index)
            .ok()
            .and_then(|i| t.partitions.get(i))
    }

    /// Partitions owned by each shard, for balancing new ones.
    pub fn partitions_per_shard(&self, shards: usize) -> Vec<usize> {
        let mut counts = vec![0usize; shards];
        for t in self.topics.values() {
            for p in &t.partitions {
                if let Some(c) = counts.get_mut(p.shard.0) {
                    *c += 1;
                }
            }
        }
        counts
    }
}

/// Why a topic name is refused (INVALID_TOPIC_EXCEPTION).
pub fn validate_topic_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("topic name is empty".into());
    }
    if name == "." || name == ".." {
        return Err(format!("topic name {name:?} is not allowed"));
    }
    if name.len() > TOPIC_NAME_MAX {
        return Err(format!(
            "topic name is longer than {TOPIC_NAME_MAX} characters"
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '.' || *c == '_' || *c == '-'))
    {
        return Err(format!("topic name {name:?} holds {c:?}: only ASCII letters, digits, '.', '_' and '-' are allowed"));
    }
    Ok(())
}

/// Kafka refuses two topics whose names differ only by '.' versus '_' (metric names collide).
pub fn collides(a: &str, b: &str) -> bool {
    a != b && a.replace('.', "_") == b.replace('.', "_")
}

/// 16 random bytes (topic ids, the cluster id), as Kafka's `Uuid.randomUuid` hands them out:
/// never the reserved all-zero and `ONE` ids, and never one whose text starts with '-' (a
/// command-line tool would take it for an option).
pub fn random_id() -> [u8; 16] {
    const ONE: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    loop {
        let id = random_bytes();
        if id != [0; 16] && id != ONE && !cluster_id_string(&id).starts_with('-') {
            return id;
        }
    }
}

fn random_bytes() -> [u8; 16] {
    let mut id = [0u8; 16];
    // SAFETY: getrandom writes at most 16 bytes into `id`.
    let n = unsafe { libc::getrandom(id.as_mut_ptr().cast(), id.len(), 0) };
    if n != 16 {
        // No entropy source: time and pid still make ids unique enough for topic ids.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        id.copy_from_slice(&(t ^ ((std::process::id() as u128) << 64)).to_le_bytes());
    }
    id
}

/// Kafka prints cluster ids as URL-safe base64 of 16 bytes without padding (22 characters).
pub fn cluster_id_string(id: &[u8; 16]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut bits: u32 = 0;
    let mut nbits = 0;
    let mut out = String::with_capacity(22);
    for &b in id {
        bits = (bits << 8) | b as u32;
        nbits += 8;
        while nbits >= 6 {
            nbits -= 6;
            out.push(ALPHABET[((bits >> nbits) & 63) as usize] as char);
        }
    }
    if nbits > 0 {
        out.push(ALPHABET[((bits << (6 - nbits)) & 63) as usize] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_ids_never_start_with_a_dash() {
        // One id in 64 would without the rule; 2,000 make missing it unlikely (1 in 10^13).
        for _ in 0..2000 {
            assert!(!cluster_id_string(&random_id()).starts_with('-'));
        }
    }

    #[test]
    fn topic_names_follow_kafkas_rules() {
        assert!(validate_topic_name("orders.v1_eu-west").is_ok());
        assert!(validate_topic_name("").is_err());
        assert!(validate_topic_name("..").is_err());
        assert!(validate_topic_name("a b").is_err());
        assert!(validate_topic_name(&"x".repeat(250)).is_err());
        assert!(collides("a.b", "a_b"));
        assert!(!collides("a.b", "a.b"));
    }

    #[test]
    fn cluster_ids_look_like_kafkas() {
        let s = cluster_id_string(&[0xff; 16]);
        assert_eq!(s.len(), 22);
        assert!(s
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
    }
}
