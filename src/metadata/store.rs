//! Metadata on disk, for the single-broker (embedded) mode.
//!
//! `<data-dir>/meta/cluster.json` holds the cluster id and the producer-id reservation;
//! `<data-dir>/meta/topics/<topic>.json` one topic each (partitions with their owning shard, and
//! config overrides); `<data-dir>/meta/broker-configs.json` the broker settings changed at run
//! time (AlterConfigs on the broker); `<data-dir>/meta/client-quotas.json` the client quotas.
//! Every file is written atomically: temporary file, fsync, rename, fsync of
//! the directory. Loading runs once on the main thread before the shards start; writes run on
//! the controller shard through its io_uring ring.

use super::client_quotas::{ClientQuotaConfigs, EntityName, QuotaEntity};
use super::{
    cluster_id_string, random_id, BrokerInfo, ClusterMetadata, DynamicBrokerConfigs, PartitionInfo,
    TopicInfo,
};
use crate::security::acl::{self, AclBinding, AclTable};
use ferrite_shards::placement::{assign_balanced, ShardId};
use ferrite_shards::uring;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Producer ids are reserved in blocks, so the file is written once per block, not per id.
pub const PRODUCER_ID_BLOCK: i64 = 1000;

#[derive(Serialize, Deserialize)]
struct ClusterFile {
    cluster_id: String,
    /// Every producer id below this has been handed out or reserved.
    producer_ids_reserved_below: i64,
}

#[derive(Serialize, Deserialize)]
struct TopicFile {
    name: String,
    id: String,
    partitions: Vec<PartitionFile>,
    configs: BTreeMap<String, String>,
}

/// The dynamic broker settings: the cluster default and this broker's own (one broker, but
/// both levels are kept apart as Kafka keeps them, so DescribeConfigs reports each source).
#[derive(Serialize, Deserialize, Default)]
struct BrokerConfigsFile {
    cluster_default: BTreeMap<String, String>,
    broker: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize)]
struct PartitionFile {
    index: i32,
    shard: usize,
}

pub fn meta_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("meta")
}

fn topics_dir(data_dir: &Path) -> PathBuf {
    meta_dir(data_dir).join("topics")
}

fn hex(id: &[u8; 16]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<[u8; 16]> {
    if s.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[i * 2..i * 2 + 2], 16).ok()?;
    }
    Some(out)
}

/// What the broker starts from.
pub struct Loaded {
    pub metadata: ClusterMetadata,
    pub producer_ids_reserved_below: i64,
    /// Partitions moved to another shard because the shard count changed.
    pub moved_partitions: usize,
}

/// Reads the metadata at start-up (blocking; the shards are not running yet). Creates the
/// directories and a cluster id on first start. Partitions whose shard no longer exists (fewer
/// cores than before) are placed again, balanced, and written back.
pub fn load(data_dir: &Path, node: &BrokerInfo, shards: usize) -> std::io::Result<Loaded> {
    std::fs::create_dir_all(topics_dir(data_dir))?;
    let cluster_path = meta_dir(data_dir).join("cluster.json");
    let cluster: ClusterFile = match std::fs::read(&cluster_path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| bad_file(&cluster_path, e))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let fresh = ClusterFile {
                cluster_id: cluster_id_string(&random_id()),
                producer_ids_reserved_below: 0,
            };
            write_blocking(
                &cluster_path,
                &serde_json::to_vec_pretty(&fresh).expect("serialisable"),
            )?;
            fresh
        }
        Err(e) => return Err(e),
    };
    let mut topics = BTreeMap::new();
    for entry in std::fs::read_dir(topics_dir(data_dir))? {
        let path = entry?.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let file: TopicFile =
            serde_json::from_slice(&std::fs::read(&path)?).map_err(|e| bad_file(&path, e))?;
        let id = unhex(&file.id).ok_or_else(|| bad_file(&path, "topic id is not 32 hex digits"))?;
        let partitions = file
            .partitions
            .iter()
            .map(|p| PartitionInfo {
                index: p.index,
                shard: ShardId(p.shard),
                leader: node.node_id,
                leader_epoch: 0,
                partition_epoch: 0,
                replicas: vec![node.node_id],
                isr: vec![node.node_id],
            })
            .collect();
        topics.insert(
            file.name.clone(),
            Arc::new(TopicInfo {
                name: file.name,
                id,
                partitions,
                configs: file.configs,
            }),
        );
    }
    let broker_configs: BrokerConfigsFile = read_json_or_default(&broker_configs_path(data_dir))?;
    let mut dynamic = DynamicBrokerConfigs {
        cluster_default: broker_configs.cluster_default,
        ..DynamicBrokerConfigs::default()
    };
    dynamic.set(Some(node.node_id), broker_configs.broker);
    let mut metadata = ClusterMetadata {
        cluster_id: cluster.cluster_id,
        controller_id: node.node_id,
        brokers: vec![node.clone()],
        topics,
        broker_configs: dynamic,
        reassignments: BTreeMap::new(),
        client_quotas: load_client_quotas(data_dir)?,
        scram_users: load_users(data_dir)?,
        acls: load_acls(data_dir)?,
    };
    let moved = replace_missing_shards(&mut metadata, shards);
    if moved > 0 {
        for t in metadata.topics.values() {
            write_blocking(&topic_path(data_dir, &t.name), &encode_topic(t))?;
        }
    }
    Ok(Loaded {
        metadata,
        producer_ids_reserved_below: cluster.producer_ids_reserved_below,
        moved_partitions: moved,
    })
}

/// Gives every partition placed on a shard that no longer exists a shard that does.
fn replace_missing_shards(metadata: &mut ClusterMetadata, shards: usize) -> usize {
    let mut counts = metadata.partitions_per_shard(shards);
    let mut moved = 0;
    for topic in metadata.topics.values_mut() {
        if topic.partitions.iter().all(|p| p.shard.0 < shards) {
            continue;
        }
        let t = Arc::make_mut(topic);
        for p in t.partitions.iter_mut().filter(|p| p.shard.0 >= shards) {
            p.shard = assign_balanced(&mut counts, 1)[0];
            moved += 1;
        }
    }
    moved
}

fn bad_file(path: &Path, e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("{}: {e}", path.display()),
    )
}

fn topic_path(data_dir: &Path, name: &str) -> PathBuf {
    topics_dir(data_dir).join(format!("{name}.json"))
}

fn encode_topic(t: &TopicInfo) -> Vec<u8> {
    let file = TopicFile {
        name: t.name.clone(),
        id: hex(&t.id),
        partitions: t
            .partitions
            .iter()
            .map(|p| PartitionFile {
                index: p.index,
                shard: p.shard.0,
            })
            .collect(),
        configs: t.configs.clone(),
    };
    serde_json::to_vec_pretty(&file).expect("serialisable")
}

fn write_blocking(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("json.tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(path.parent().unwrap_or(Path::new(".")))?.sync_all()
}

/// Writes a topic's file (creation, new partitions).
pub async fn save_topic(data_dir: &Path, topic: &TopicInfo) -> std::io::Result<()> {
    uring::write_atomically(&topic_path(data_dir, &topic.name), encode_topic(topic)).await
}

/// Removes a topic's file (deletion), durably.
pub async fn remove_topic(data_dir: &Path, name: &str) -> std::io::Result<()> {
    match uring::unlink(&topic_path(data_dir, name)).await {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    uring::sync_dir(&topics_dir(data_dir)).await
}

/// One entity's quotas in `meta/client-quotas.json`, names as ZooKeeper stores them
/// (`<default>`, or percent-encoded).
#[derive(Serialize, Deserialize)]
struct QuotaFileEntry {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_id: Option<String>,
    quotas: BTreeMap<String, String>,
}

fn client_quotas_path(data_dir: &Path) -> PathBuf {
    meta_dir(data_dir).join("client-quotas.json")
}

fn load_client_quotas(data_dir: &Path) -> std::io::Result<ClientQuotaConfigs> {
    let path = client_quotas_path(data_dir);
    let entries: Vec<QuotaFileEntry> = read_json_or_default(&path)?;
    let part = |p: Option<String>| -> std::io::Result<Option<EntityName>> {
        p.map(|n| {
            EntityName::from_stored(&n).ok_or_else(|| bad_file(&path, format!("bad name {n:?}")))
        })
        .transpose()
    };
    entries
        .into_iter()
        .map(|e| {
            let entity = QuotaEntity {
                user: part(e.user)?,
                client_id: part(e.client_id)?,
            };
            Ok((entity, e.quotas))
        })
        .collect()
}

/// Writes every entity's client quotas.
pub async fn save_client_quotas(
    data_dir: &Path,
    quotas: &ClientQuotaConfigs,
) -> std::io::Result<()> {
    let entries: Vec<QuotaFileEntry> = quotas
        .iter()
        .map(|(entity, q)| QuotaFileEntry {
            user: entity.user.as_ref().map(EntityName::stored),
            client_id: entity.client_id.as_ref().map(EntityName::stored),
            quotas: q.clone(),
        })
        .collect();
    write_json(&client_quotas_path(data_dir), &entries).await
}

/// SCRAM users by name: mechanism name → Kafka's credential text (salted keys, never the
/// password).
pub type ScramUsers = BTreeMap<String, BTreeMap<String, String>>;

fn users_path(data_dir: &Path) -> PathBuf {
    meta_dir(data_dir).join("users.json")
}

/// The SCRAM users in `meta/users.json` (none when it is missing).
pub fn load_users(data_dir: &Path) -> std::io::Result<ScramUsers> {
    read_json_or_default(&users_path(data_dir))
}

/// Writes `meta/users.json` atomically (blocking: `ferrite user`, while no broker runs).
pub fn save_users_blocking(data_dir: &Path, users: &ScramUsers) -> std::io::Result<()> {
    std::fs::create_dir_all(meta_dir(data_dir))?;
    write_blocking(
        &users_path(data_dir),
        &serde_json::to_vec_pretty(users).expect("serialisable"),
    )
}

/// Writes `meta/users.json` (the broker, for AlterUserScramCredentials).
pub async fn save_users(data_dir: &Path, users: &ScramUsers) -> std::io::Result<()> {
    write_json(&users_path(data_dir), users).await
}

fn acls_path(data_dir: &Path) -> PathBuf {
    meta_dir(data_dir).join("acls.json")
}

/// The ACLs in `meta/acls.json`, a list of bindings (none when it is missing).
pub fn load_acls(data_dir: &Path) -> std::io::Result<AclTable> {
    let list: Vec<AclBinding> = read_json_or_default(&acls_path(data_dir))?;
    Ok(acl::table_of(list))
}

/// Writes `meta/acls.json` atomically (blocking: `ferrite acl`, while no broker runs).
pub fn save_acls_blocking(data_dir: &Path, acls: &AclTable) -> std::io::Result<()> {
    let list: Vec<AclBinding> = acl::bindings(acls).collect();
    std::fs::create_dir_all(meta_dir(data_dir))?;
    write_blocking(
        &acls_path(data_dir),
        &serde_json::to_vec_pretty(&list).expect("serialisable"),
    )
}

pub async fn save_acls(data_dir: &Path, acls: &AclTable) -> std::io::Result<()> {
    let list: Vec<AclBinding> = acl::bindings(acls).collect();
    write_json(&acls_path(data_dir), &list).await
}

fn broker_configs_path(data_dir: &Path) -> PathBuf {
    meta_dir(data_dir).join("broker-configs.json")
}

/// Writes the dynamic broker settings (the cluster default and `node`'s own).
pub async fn save_broker_configs(
    data_dir: &Path,
    configs: &DynamicBrokerConfigs,
    node: i32,
) -> std::io::Result<()> {
    let file = BrokerConfigsFile {
        cluster_default: configs.cluster_default.clone(),
        broker: configs.of(Some(node)).clone(),
    };
    write_json(&broker_configs_path(data_dir), &file).await
}

/// Records that producer ids below `reserved_below` may have been handed out.
pub async fn save_producer_reservation(
    data_dir: &Path,
    cluster_id: &str,
    reserved_below: i64,
) -> std::io::Result<()> {
    let file = ClusterFile {
        cluster_id: cluster_id.to_string(),
        producer_ids_reserved_below: reserved_below,
    };
    write_json(&meta_dir(data_dir).join("cluster.json"), &file).await
}

/// A `meta/` file's contents; the type's default when the file does not exist (nothing was
/// ever written there).
fn read_json_or_default<T: for<'de> Deserialize<'de> + Default>(path: &Path) -> std::io::Result<T> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| bad_file(path, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
        Err(e) => Err(e),
    }
}

/// Writes a `meta/` file atomically, through the controller shard's ring.
async fn write_json<T: Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    uring::write_atomically(
        path,
        serde_json::to_vec_pretty(value).expect("serialisable"),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> BrokerInfo {
        BrokerInfo {
            node_id: 0,
            endpoints: vec![crate::metadata::BrokerEndpoint {
                listener: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9092,
            }],
            rack: None,
        }
    }

    #[test]
    fn first_start_creates_a_cluster_id_that_stays() {
        let dir = tempfile::tempdir().unwrap();
        let a = load(dir.path(), &node(), 2).unwrap();
        let b = load(dir.path(), &node(), 2).unwrap();
        assert_eq!(a.metadata.cluster_id, b.metadata.cluster_id);
        assert!(a.metadata.topics.is_empty());
    }

    #[test]
    fn fewer_shards_move_partitions_and_persist_the_move() {
        let dir = tempfile::tempdir().unwrap();
        load(dir.path(), &node(), 4).unwrap();
        let topic = TopicInfo {
            name: "t".into(),
            id: random_id(),
            partitions: (0..4)
                .map(|i| PartitionInfo {
                    index: i,
                    shard: ShardId(i as usize),
                    leader: 0,
                    leader_epoch: 0,
                    partition_epoch: 0,
                    replicas: vec![0],
                    isr: vec![0],
                })
                .collect(),
            configs: BTreeMap::from([("retention.ms".to_string(), "1000".to_string())]),
        };
        write_blocking(&topic_path(dir.path(), "t"), &encode_topic(&topic)).unwrap();
        let loaded = load(dir.path(), &node(), 2).unwrap();
        assert_eq!(loaded.moved_partitions, 2);
        let t = loaded.metadata.topic("t").unwrap();
        assert!(t.partitions.iter().all(|p| p.shard.0 < 2));
        assert_eq!(
            t.configs.get("retention.ms").map(String::as_str),
            Some("1000")
        );
        assert_eq!(
            load(dir.path(), &node(), 2).unwrap().moved_partitions,
            0,
            "persisted"
        );
    }
}
