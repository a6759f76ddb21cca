//! What shards ask of ZooKeeper, carried out on the control thread.
//!
//! Topic creation writes the config and the assignment, as Kafka's admin path does; the
//! controller then gives the new partitions their leaders. Deletion is asked for under
//! `/admin/delete_topics` and carried out by the controller. Producer ids come in blocks taken
//! from `/latest_producer_id_block` by conditional update, so no id is handed out twice in the
//! cluster.

use super::zk::persistent;
use super::znodes::{self, EntityConfig, ProducerIdBlock, TopicAssignment};
use ferrite_shards::foreign::Reply;
use std::collections::BTreeMap;
use zookeeper_client::{Client, Error};

/// Producer ids per block, as Kafka's `ProducerIdManager`.
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

/// A topic to write, already validated and placed by the shard.
#[derive(Clone, Debug)]
pub struct PlannedTopic {
    pub name: String,
    pub id: String,
    /// Replicas of each partition, by index.
    pub replicas: Vec<Vec<i32>>,
    pub configs: BTreeMap<String, String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CreateOutcome {
    Created,
    AlreadyExists,
    Failed(String),
}

pub enum Request {
    CreateTopics {
        topics: Vec<PlannedTopic>,
        reply: Reply<Vec<(String, CreateOutcome)>>,
    },
    /// Marks topics for deletion; answers whether each existed.
    DeleteTopics {
        names: Vec<String>,
        reply: Reply<Vec<(String, Result<bool, String>)>>,
    },
    /// A block of producer ids `[start, end]` no other broker will use.
    ProducerIds {
        reply: Reply<Result<(i64, i64), String>>,
    },
    /// Adds partitions (their replica lists, in index order after the existing ones).
    AddPartitions {
        topic: String,
        existing: usize,
        replicas: Vec<Vec<i32>>,
        reply: Reply<Result<(), String>>,
    },
    /// Replaces a topic's config overrides (AlterConfigs, IncrementalAlterConfigs).
    AlterTopicConfig {
        topic: String,
        configs: BTreeMap<String, String>,
        reply: Reply<Result<(), String>>,
    },
    /// Replaces a broker's dynamic settings, or the cluster default's (`None`).
    AlterBrokerConfig {
        broker: Option<i32>,
        configs: BTreeMap<String, String>,
        reply: Reply<Result<(), String>>,
    },
    /// Replaces one client quota entity's values.
    AlterClientQuota {
        entity: crate::metadata::client_quotas::QuotaEntity,
        quotas: BTreeMap<String, String>,
        reply: Reply<Result<(), String>>,
    },
    /// Replaces the ACLs of one resource pattern (empty: none left).
    WriteAcls {
        pattern: crate::security::acl::ResourcePattern,
        entries: std::collections::BTreeSet<crate::security::acl::AccessEntry>,
        reply: Reply<Result<(), String>>,
    },
    /// Replaces one user's SCRAM credentials (mechanism → Kafka's text; empty: none left).
    AlterScramUser {
        user: String,
        credentials: BTreeMap<String, String>,
        reply: Reply<Result<(), String>>,
    },
    /// Starts, replaces or cancels (`None`) reassignments of a topic's partitions; answers, per
    /// partition, whether there was something to do (false: a cancel with none in progress).
    Reassign {
        topic: String,
        partitions: ReassignTargets,
        reply: Reply<Result<Vec<(i32, bool)>, String>>,
    },
    /// Asks the elected controller for elections (ElectLeaders).
    ElectLeaders {
        partitions: Vec<znodes::ElectionPartition>,
        unclean: bool,
        reply: Reply<Result<(), String>>,
    },
    /// The leader changes a partition's ISR.
    UpdateIsr(IsrChange),
}

/// A leader's change of a partition's ISR, made only if it still leads it in `leader_epoch`;
/// answered with the partition epoch the change made.
pub struct IsrChange {
    pub topic: String,
    pub partition: i32,
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
    pub reply: Reply<Result<i32, String>>,
}

pub async fn create_topic(client: &Client, t: &PlannedTopic) -> CreateOutcome {
    if let Ok(Some(_)) = client.check_stat(&znodes::topic_path(&t.name)).await {
        return CreateOutcome::AlreadyExists;
    }
    let config = znodes::encode(&EntityConfig {
        version: 1,
        config: t.configs.clone(),
    });
    let config_path = znodes::topic_config_path(&t.name);
    let wrote_config = match client.create(&config_path, &config, &persistent()).await {
        Ok(_) => Ok(()),
        // Left by a topic of that name deleted half way: this topic's configs replace it.
        Err(Error::NodeExists) => client
            .set_data(&config_path, &config, None)
            .await
            .map(|_| ()),
        Err(e) => Err(e),
    };
    if let Err(e) = wrote_config {
        return CreateOutcome::Failed(e.to_string());
    }
    let assignment = znodes::encode(&TopicAssignment::new(t.id.clone(), &t.replicas));
    match client
        .create(&znodes::topic_path(&t.name), &assignment, &persistent())
        .await
    {
        Ok(_) => CreateOutcome::Created,
        Err(Error::NodeExists) => CreateOutcome::AlreadyExists,
        Err(e) => CreateOutcome::Failed(e.to_string()),
    }
}

/// Writes `/config/topics/<t>` and then, as Kafka's `AdminZkClient.changeTopicConfig`, a
/// `/config/changes` notification; every broker's watch brings the new configs into its view.
pub async fn alter_topic_config(
    client: &Client,
    topic: &str,
    configs: BTreeMap<String, String>,
) -> Result<(), String> {
    match client.check_stat(&znodes::topic_path(topic)).await {
        Ok(Some(_)) => {}
        Ok(None) => return Err(format!("topic {topic} does not exist")),
        Err(e) => return Err(e.to_string()),
    }
    let path = znodes::topic_config_path(topic);
    write_entity_config(client, &path, &format!("topics/{topic}"), configs).await
}

/// Writes a client quota entity's znode (`/config/users/...` or `/config/clients/...`) and its
/// notification, as Kafka's `AdminZkClient.changeConfigs` (parents created as needed).
pub async fn alter_client_quota(
    client: &Client,
    entity: &crate::metadata::client_quotas::QuotaEntity,
    quotas: BTreeMap<String, String>,
) -> Result<(), String> {
    let entity_path = znodes::quota_entity_path(entity).ok_or("an empty quota entity")?;
    let path = format!("/config/{entity_path}");
    // users/<u>/clients/<c> lives under users/<u>/clients, which may not exist yet. Kafka
    // creates the user's znode with no data; an empty config is written here instead, which
    // Kafka reads the same.
    if let Some((user_path, _)) = entity_path.split_once("/clients/") {
        let empty = znodes::encode(&EntityConfig {
            version: 1,
            config: BTreeMap::new(),
        });
        let user = format!("/config/{user_path}");
        super::zk::create_if_missing(client, &user, &empty)
            .await
            .map_err(|e| e.to_string())?;
        super::zk::create_if_missing(client, &format!("{user}/clients"), b"")
            .await
            .map_err(|e| e.to_string())?;
    }
    // The znode may hold other configs of the entity (a user's SCRAM credentials): only its
    // quotas are replaced, as Kafka's `alterClientQuotas` edits the entity's properties.
    let is_quota = crate::metadata::client_quotas::is_quota_key;
    replace_own_keys(client, &path, &entity_path, is_quota, quotas).await
}

/// An entity's configs as its znode holds them; none when there is no znode.
pub async fn read_entity_config(
    client: &Client,
    path: &str,
) -> Result<BTreeMap<String, String>, String> {
    match client.get_data(path).await {
        Ok((bytes, _)) => Ok(znodes::decode_nullable::<EntityConfig>(path, &bytes)?
            .map(|c| c.config)
            .unwrap_or_default()),
        Err(Error::NoNode) => Ok(BTreeMap::new()),
        Err(e) => Err(e.to_string()),
    }
}

/// Replaces the keys of an entity's configs that `own` claims with `new`, keeping the others
/// (what another tool keeps in the same znode: a user's quotas beside its credentials), and
/// notifies.
async fn replace_own_keys(
    client: &Client,
    path: &str,
    entity_path: &str,
    own: fn(&str) -> bool,
    new: BTreeMap<String, String>,
) -> Result<(), String> {
    let mut configs = read_entity_config(client, path).await?;
    configs.retain(|k, _| !own(k));
    configs.extend(new);
    write_entity_config(client, path, entity_path, configs).await
}

/// Writes a user's SCRAM credentials into `/config/users/<name>` (Kafka's
/// `adminZkClient.changeConfigs` for the user), keeping the user's other configs (quotas).
pub async fn alter_scram_user(
    client: &Client,
    user: &str,
    credentials: BTreeMap<String, String>,
) -> Result<(), String> {
    let (path, entity_path) = znodes::user_config_path(user);
    let is_scram = |k: &str| crate::security::scram::Mechanism::from_name(k).is_some();
    replace_own_keys(client, &path, &entity_path, is_scram, credentials).await
}

/// Writes `/config/brokers/<id>` (or `<default>` for `None`) and its notification, as Kafka's
/// `AdminZkClient.changeBrokerConfig`.
pub async fn alter_broker_config(
    client: &Client,
    broker: Option<i32>,
    configs: BTreeMap<String, String>,
) -> Result<(), String> {
    let path = znodes::broker_config_path(broker);
    let entity = path.trim_start_matches("/config/").to_string();
    write_entity_config(client, &path, &entity, configs).await
}

/// An entity's config znode, created or replaced, then the `/config/changes` notification
/// naming it (`entity_path`, e.g. `topics/orders` or `brokers/<default>`).
pub async fn write_entity_config(
    client: &Client,
    path: &str,
    entity_path: &str,
    configs: BTreeMap<String, String>,
) -> Result<(), String> {
    let config = znodes::encode(&EntityConfig {
        version: 1,
        config: configs,
    });
    match client.set_data(path, &config, None).await {
        Ok(_) => {}
        Err(Error::NoNode) => {
            client
                .create(path, &config, &persistent())
                .await
                .map_err(|e| e.to_string())?;
        }
        Err(e) => return Err(e.to_string()),
    }
    let change = znodes::encode(&znodes::ConfigChange {
        version: 2,
        entity_path: entity_path.to_string(),
    });
    let notification = format!("{}/config_change_", znodes::CONFIG_CHANGES);
    client
        .create(&notification, &change, &super::zk::persistent_sequential())
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Partitions of one topic with the replicas each moves to (`None`: cancel its move).
pub type ReassignTargets = Vec<(i32, Option<Vec<i32>>)>;

/// Rewrites `/brokers/topics/<t>` with the reassignments (Kafka 2.4+ keeps them there, as
/// `adding_replicas` and `removing_replicas`), conditionally on the version read; the elected
/// controller carries them out. Retried when another writer moved first.
pub async fn reassign(
    client: &Client,
    topic: &str,
    partitions: &[(i32, Option<Vec<i32>>)],
) -> Result<Vec<(i32, bool)>, String> {
    let path = znodes::topic_path(topic);
    for _ in 0..10 {
        let (bytes, stat) = client
            .get_data(&path)
            .await
            .map_err(|e| format!("reading {path}: {e}"))?;
        let mut assignment: TopicAssignment = znodes::decode(&path, &bytes)?;
        let outcomes: Vec<(i32, bool)> = partitions
            .iter()
            .map(|(p, target)| (*p, assignment.reassign(*p, target.as_deref())))
            .collect();
        match client
            .set_data(&path, &znodes::encode(&assignment), Some(stat.version))
            .await
        {
            Ok(_) => return Ok(outcomes),
            Err(Error::BadVersion) => continue,
            Err(e) => return Err(e.to_string()),
        }
    }
    Err(format!("{path} kept changing under the reassignment"))
}

/// Writes (or adds to) the election request znode the controller carries out on its next
/// pass, as Kafka's preferred-replica-election tool does.
pub async fn ask_elections(
    client: &Client,
    partitions: Vec<znodes::ElectionPartition>,
    unclean: bool,
) -> Result<(), String> {
    let path = if unclean {
        znodes::UNCLEAN_ELECTION
    } else {
        znodes::PREFERRED_ELECTION
    };
    loop {
        match client.get_data(path).await {
            Ok((bytes, stat)) => {
                let mut asked: znodes::ElectionRequest = znodes::decode(path, &bytes)?;
                asked.partitions.extend(partitions.iter().cloned());
                asked.partitions.sort();
                asked.partitions.dedup();
                match client
                    .set_data(path, &znodes::encode(&asked), Some(stat.version))
                    .await
                {
                    Ok(_) => return Ok(()),
                    // The controller took it meanwhile, or another broker added to it.
                    Err(Error::BadVersion) | Err(Error::NoNode) => continue,
                    Err(e) => return Err(e.to_string()),
                }
            }
            Err(Error::NoNode) => {
                let asked = znodes::ElectionRequest {
                    version: 1,
                    partitions: partitions.clone(),
                };
                match client
                    .create(path, &znodes::encode(&asked), &persistent())
                    .await
                {
                    Ok(_) => return Ok(()),
                    Err(Error::NodeExists) => continue,
                    Err(e) => return Err(e.to_string()),
                }
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

pub async fn mark_for_deletion(client: &Client, name: &str) -> Result<bool, String> {
    match client.check_stat(&znodes::topic_path(name)).await {
        Ok(None) => return Ok(false),
        Ok(Some(_)) => {}
        Err(e) => return Err(e.to_string()),
    }
    match client
        .create(&znodes::delete_topic_path(name), b"", &persistent())
        .await
    {
        Ok(_) | Err(Error::NodeExists) => Ok(true),
        Err(e) => Err(e.to_string()),
    }
}

/// Appends partitions to a topic's assignment, conditional on its version and on it still
/// having `existing` partitions; the controller then gives them leaders.
pub async fn add_partitions(
    client: &Client,
    topic: &str,
    existing: usize,
    replicas: Vec<Vec<i32>>,
) -> Result<(), String> {
    let path = znodes::topic_path(topic);
    let (bytes, stat) = client.get_data(&path).await.map_err(|e| e.to_string())?;
    let mut assignment: TopicAssignment = znodes::decode(&path, &bytes)?;
    if assignment.partitions.len() != existing {
        return Err(format!(
            "{topic} has {} partitions now, not {existing}",
            assignment.partitions.len()
        ));
    }
    for (i, r) in replicas.into_iter().enumerate() {
        assignment.partitions.insert((existing + i).to_string(), r);
    }
    client
        .set_data(&path, &znodes::encode(&assignment), Some(stat.version))
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Sets the ISR in the partition state by a conditional update, refused unless `leader` still
/// leads the partition in `leader_epoch`. Answers the state's version after the write (the
/// partition epoch).
pub async fn update_isr(
    client: &Client,
    leader: i32,
    topic: &str,
    partition: i32,
    leader_epoch: i32,
    isr: Vec<i32>,
) -> Result<i32, String> {
    let path = znodes::partition_state_path(topic, partition);
    let (bytes, stat) = client.get_data(&path).await.map_err(|e| e.to_string())?;
    let mut state: znodes::PartitionState = znodes::decode(&path, &bytes)?;
    if state.leader != leader || state.leader_epoch != leader_epoch {
        return Err(format!(
            "no longer the leader in epoch {leader_epoch} (state: leader {} epoch {})",
            state.leader, state.leader_epoch
        ));
    }
    state.isr = isr;
    match client
        .set_data(&path, &znodes::encode(&state), Some(stat.version))
        .await
    {
        Ok(written) => Ok(written.version),
        Err(e @ Error::BadVersion) => Err(e.to_string()),
        // A lost connection leaves it unknown whether the write landed; the leader must not
        // take it as refused if it did (the joining followers would stop holding the high
        // watermark while the controller may elect them), so the state is read again.
        Err(e) => match client.get_data(&path).await {
            Ok((bytes, now))
                if znodes::decode::<znodes::PartitionState>(&path, &bytes)? == state =>
            {
                Ok(now.version)
            }
            _ => Err(e.to_string()),
        },
    }
}

pub async fn take_producer_ids(client: &Client, broker: i32) -> Result<(i64, i64), String> {
    for _ in 0..20 {
        // The znode's version when it exists (set conditionally), and the last id taken.
        let (version, last_end) = match client.get_data(znodes::PRODUCER_ID_BLOCK).await {
            Ok((bytes, stat)) => {
                let block: Option<ProducerIdBlock> =
                    znodes::decode_nullable(znodes::PRODUCER_ID_BLOCK, &bytes)?;
                let end = block
                    .map(|b| b.block_end.parse::<i64>())
                    .transpose()
                    .map_err(|_| {
                        format!("{}: block_end is not a number", znodes::PRODUCER_ID_BLOCK)
                    })?;
                (Some(stat.version), end)
            }
            Err(Error::NoNode) => (None, None),
            Err(e) => return Err(e.to_string()),
        };
        let start = last_end.map_or(0, |end| end + 1);
        let end = start + PRODUCER_ID_BLOCK_SIZE - 1;
        let data = znodes::encode(&ProducerIdBlock {
            version: 1,
            broker,
            block_start: start.to_string(),
            block_end: end.to_string(),
        });
        let written = match version {
            Some(version) => client
                .set_data(znodes::PRODUCER_ID_BLOCK, &data, Some(version))
                .await
                .map(|_| ()),
            None => client
                .create(znodes::PRODUCER_ID_BLOCK, &data, &persistent())
                .await
                .map(|_| ()),
        };
        match written {
            Ok(()) => return Ok((start, end)),
            // Another broker took a block first: read again.
            Err(Error::BadVersion) | Err(Error::NodeExists) => continue,
            Err(e) => return Err(e.to_string()),
        }
    }
    Err("producer id block: too many concurrent takers".into())
}
