//! Broker-wide settings under Kafka's names, each with its default, bounds and meaning.

use super::security::SecuritySettings;
use super::ConfigError;
use ferrite_shards::LogConfig;
use std::collections::BTreeMap;

/// One broker setting: Kafka name, meaning, default, bounds (integers) or choices.
pub struct BrokerKey {
    pub name: &'static str,
    pub doc: &'static str,
    pub default: &'static str,
    pub min: i64,
    pub max: i64,
}

const fn key(
    name: &'static str,
    doc: &'static str,
    default: &'static str,
    min: i64,
    max: i64,
) -> BrokerKey {
    BrokerKey {
        name,
        doc,
        default,
        min,
        max,
    }
}

const I32_MAX: i64 = i32::MAX as i64;

/// Every broker setting, in DescribeConfigs order. Booleans have bounds 0..1.
pub const BROKER_KEYS: &[BrokerKey] = &[
    key(
        "auto.create.topics.enable",
        "create a topic when a client asks for one that does not exist",
        "true",
        0,
        1,
    ),
    key(
        "auto.leader.rebalance.enable",
        "cluster mode: move leadership back to preferred replicas",
        "true",
        0,
        1,
    ),
    key(
        "compression.type",
        "default compression.type: only producer (batches are stored as producers compressed them)",
        "producer",
        0,
        0,
    ),
    key(
        "connection.failed.authentication.delay.ms",
        "how long a failed SASL authentication waits before its answer and the close",
        "100",
        0,
        I32_MAX,
    ),
    key(
        "connections.max.idle.ms",
        "close connections idle this long",
        "600000",
        1000,
        I32_MAX,
    ),
    key(
        "default.replication.factor",
        "replication factor of auto-created topics",
        "1",
        1,
        32767,
    ),
    key(
        "delete.topic.enable",
        "whether DeleteTopics may delete topics (TOPIC_DELETION_DISABLED when not)",
        "true",
        0,
        1,
    ),
    key(
        "fetch.zero.copy.enable",
        "Ferrite: splice fetched file ranges to the socket instead of copying",
        "true",
        0,
        1,
    ),
    key(
        "group.initial.rebalance.delay.ms",
        "a new group's first rebalance waits this long for more members to join",
        "3000",
        0,
        I32_MAX,
    ),
    key(
        "group.max.session.timeout.ms",
        "largest session timeout a group member may ask for",
        "1800000",
        1,
        I32_MAX,
    ),
    key(
        "group.min.session.timeout.ms",
        "smallest session timeout a group member may ask for",
        "6000",
        1,
        I32_MAX,
    ),
    key(
        "leader.imbalance.check.interval.seconds",
        "cluster mode: how often the controller restores preferred leaders",
        "300",
        1,
        I32_MAX,
    ),
    key(
        "log.cleaner.backoff.ms",
        "how long a shard's cleaner sleeps when no log needs cleaning",
        "15000",
        10,
        I32_MAX,
    ),
    key(
        "log.cleaner.dedupe.buffer.size",
        "memory each shard's cleaner may use for its key map; larger logs are cleaned in passes",
        "33554432",
        1 << 20,
        i64::MAX,
    ),
    key(
        "log.cleaner.io.max.bytes.per.second",
        "Ferrite: bytes per second each shard's cleaner may read and write while compacting",
        "104857600",
        1024,
        i64::MAX,
    ),
    key(
        "log.cleanup.policy",
        "default cleanup.policy",
        "delete",
        0,
        0,
    ),
    key(
        "log.flush.interval.messages",
        "default flush.messages",
        "9223372036854775807",
        1,
        i64::MAX,
    ),
    key(
        "log.flush.interval.ms",
        "default flush.ms",
        "9223372036854775807",
        0,
        i64::MAX,
    ),
    key(
        "log.index.interval.bytes",
        "default index.interval.bytes",
        "4096",
        0,
        I32_MAX,
    ),
    key(
        "log.recovery.checkpoint.interval.ms",
        "Ferrite: fdatasync and move the recovery point at least this often while data arrives",
        "1000",
        10,
        3_600_000,
    ),
    key(
        "log.retention.bytes",
        "default retention.bytes",
        "-1",
        -1,
        i64::MAX,
    ),
    key(
        "log.retention.check.interval.ms",
        "how often retention runs",
        "300000",
        100,
        I32_MAX,
    ),
    key(
        "log.retention.hours",
        "default retention.ms in hours, unless log.retention.minutes or log.retention.ms is set",
        "168",
        -1,
        I32_MAX,
    ),
    key(
        "log.retention.minutes",
        "default retention.ms in minutes, unless log.retention.ms is set",
        "",
        -1,
        I32_MAX,
    ),
    key(
        "log.retention.ms",
        "default retention.ms; takes precedence over log.retention.minutes and log.retention.hours",
        "",
        -1,
        i64::MAX,
    ),
    key(
        "log.roll.ms",
        "default segment.ms",
        "604800000",
        1,
        i64::MAX,
    ),
    key(
        "log.segment.bytes",
        "default segment.bytes",
        "1073741824",
        1024,
        I32_MAX,
    ),
    key(
        "log.message.downconversion.enable",
        "default message.downconversion.enable",
        "true",
        0,
        1,
    ),
    key(
        "log.message.timestamp.after.max.ms",
        "default message.timestamp.after.max.ms",
        "9223372036854775807",
        0,
        i64::MAX,
    ),
    key(
        "log.message.timestamp.before.max.ms",
        "default message.timestamp.before.max.ms",
        "9223372036854775807",
        0,
        i64::MAX,
    ),
    key(
        "log.message.timestamp.difference.max.ms",
        "default message.timestamp.difference.max.ms (deprecated)",
        "9223372036854775807",
        0,
        i64::MAX,
    ),
    key(
        "log.message.timestamp.type",
        "default message.timestamp.type: CreateTime or LogAppendTime",
        "CreateTime",
        0,
        0,
    ),
    key(
        "max.connections",
        "client connections the broker holds at once; past it, accepting waits for one to close \
         (lowered to a quarter of the file descriptor limit, 3 per connection)",
        "2147483647",
        1,
        I32_MAX,
    ),
    key(
        "max.connections.per.ip",
        "client connections one address may hold at once; a connection past it is closed at \
         once (Kafka's TooManyConnectionsException); 0 needs max.connections.per.ip.overrides",
        "2147483647",
        0,
        I32_MAX,
    ),
    key(
        "max.connections.per.ip.overrides",
        "per-address exceptions to max.connections.per.ip: comma-separated host:count, a host \
         an IP address or a name resolved at start-up",
        "",
        0,
        0,
    ),
    key(
        "max.incremental.fetch.session.cache.slots",
        "incremental fetch sessions (KIP-227) the broker keeps, shared out among the shards",
        "1000",
        0,
        I32_MAX,
    ),
    key(
        "message.max.bytes",
        "default max.message.bytes",
        "1048588",
        0,
        I32_MAX,
    ),
    key(
        "min.insync.replicas",
        "default min.insync.replicas",
        "1",
        1,
        32767,
    ),
    key(
        "num.partitions",
        "partitions of auto-created topics",
        "1",
        1,
        100_000,
    ),
    key(
        "offset.metadata.max.bytes",
        "longest metadata string a committed offset may carry",
        "4096",
        0,
        I32_MAX,
    ),
    key(
        "offsets.topic.num.partitions",
        "partitions of __consumer_offsets, fixed when it is first created",
        "50",
        1,
        1000,
    ),
    key(
        "offsets.topic.replication.factor",
        "replicas of __consumer_offsets (at most the brokers alive when it is created)",
        "3",
        1,
        32767,
    ),
    key(
        "offsets.topic.segment.bytes",
        "segment size of __consumer_offsets",
        "104857600",
        1024,
        I32_MAX,
    ),
    key(
        "quota.controller.mutation.rate",
        "Ferrite: each client's controller mutation quota (KIP-599), partitions created or \
         deleted per second; 0 is no quota (Kafka sets it per client as controller_mutation_rate)",
        "0",
        0,
        I32_MAX,
    ),
    key(
        "replica.lag.time.max.ms",
        "a follower that has not caught up for this long leaves the ISR",
        "30000",
        100,
        I32_MAX,
    ),
    key(
        "sasl.server.max.receive.size",
        "largest SASL token a client may send before it has authenticated",
        "524288",
        1,
        I32_MAX,
    ),
    key(
        "socket.request.max.bytes",
        "largest request frame; larger ones close the connection",
        "104857600",
        1024,
        I32_MAX,
    ),
    key(
        "topic.partitions.per.shard",
        "Ferrite: most partition replicas one shard (core) may hold; CreateTopics and \
         CreatePartitions past it are refused with INVALID_PARTITIONS",
        "1000",
        1,
        1_000_000,
    ),
    key(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "how often the transaction coordinator aborts transactions open past their timeout",
        "10000",
        1,
        I32_MAX,
    ),
    key(
        "transaction.max.timeout.ms",
        "longest transaction.timeout.ms a producer may ask for \
         (INVALID_TRANSACTION_TIMEOUT beyond)",
        "900000",
        1,
        I32_MAX,
    ),
    key(
        "transaction.partition.verification.enable",
        "KIP-890: a transactional batch is appended only once the coordinator confirms its \
         partition is in the producer's transaction",
        "true",
        0,
        1,
    ),
    key(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        "how often transactional ids unused for transactional.id.expiration.ms are removed",
        "3600000",
        1,
        I32_MAX,
    ),
    key(
        "transaction.state.log.min.isr",
        "min.insync.replicas of __transaction_state (at most its replication factor)",
        "2",
        1,
        32767,
    ),
    key(
        "transaction.state.log.num.partitions",
        "partitions of __transaction_state, fixed when it is first created",
        "50",
        1,
        1000,
    ),
    key(
        "transaction.state.log.replication.factor",
        "replicas of __transaction_state (at most the brokers alive when it is created)",
        "3",
        1,
        32767,
    ),
    key(
        "transaction.state.log.segment.bytes",
        "segment size of __transaction_state",
        "104857600",
        1024,
        I32_MAX,
    ),
    key(
        "transactional.id.expiration.ms",
        "a transactional id with no transaction for this long is forgotten",
        "604800000",
        1,
        I32_MAX,
    ),
    key(
        "zookeeper.session.timeout.ms",
        "ZooKeeper session timeout: a broker silent this long is dead to the cluster",
        "18000",
        1000,
        I32_MAX,
    ),
];

/// The settings a running broker takes from AlterConfigs without a restart, at the cluster
/// default (`""`) or for one broker: Kafka's `DynamicBrokerConfig` lists the topic defaults
/// (`DynamicLogConfig`), the log cleaner's settings and connection limits. Ferrite takes the
/// first two; the rest of its settings are read once at start-up, and a change to them is
/// refused as Kafka refuses its static ones ("Cannot update these configs dynamically").
pub const DYNAMIC_BROKER_KEYS: &[&str] = &[
    "compression.type",
    "log.cleaner.backoff.ms",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.max.bytes.per.second",
    "log.cleanup.policy",
    "log.flush.interval.messages",
    "log.flush.interval.ms",
    "log.index.interval.bytes",
    "log.message.downconversion.enable",
    "log.message.timestamp.after.max.ms",
    "log.message.timestamp.before.max.ms",
    "log.message.timestamp.difference.max.ms",
    "log.message.timestamp.type",
    "log.retention.bytes",
    "log.retention.hours",
    "log.retention.minutes",
    "log.retention.ms",
    "log.roll.ms",
    "log.segment.bytes",
    "message.max.bytes",
    "min.insync.replicas",
];

pub fn is_dynamic(name: &str) -> bool {
    DYNAMIC_BROKER_KEYS.contains(&name)
}

/// The transaction coordinator's settings (Kafka's `TransactionLogConfigs` and
/// `TransactionStateManagerConfigs`), with Kafka's defaults.
#[derive(Clone, Debug)]
pub struct TransactionSettings {
    pub state_partitions: i32,
    pub state_replication_factor: i16,
    pub state_min_isr: i32,
    pub state_segment_bytes: i64,
    pub max_timeout_ms: i32,
    pub id_expiration_ms: i64,
    pub abort_interval_ms: u64,
    pub expiry_interval_ms: u64,
    pub verification: bool,
}

impl Default for TransactionSettings {
    fn default() -> Self {
        TransactionSettings {
            state_partitions: 50,
            state_replication_factor: 3,
            state_min_isr: 2,
            state_segment_bytes: 104_857_600,
            max_timeout_ms: 900_000,
            id_expiration_ms: 604_800_000,
            abort_interval_ms: 10_000,
            expiry_interval_ms: 3_600_000,
            verification: true,
        }
    }
}

/// Values of the broker settings, parsed.
#[derive(Clone, Debug)]
pub struct BrokerSettings {
    pub auto_create_topics: bool,
    pub auto_leader_rebalance: bool,
    pub leader_imbalance_check_interval_seconds: u64,
    pub connections_max_idle_ms: i64,
    pub failed_authentication_delay_ms: u64,
    pub sasl_max_receive_bytes: usize,
    pub default_replication_factor: i16,
    pub delete_topic_enable: bool,
    pub fetch_zero_copy: bool,
    pub group_initial_rebalance_delay_ms: u64,
    pub group_max_session_timeout_ms: u64,
    pub group_min_session_timeout_ms: u64,
    pub cleaner_io_bytes_per_second: u64,
    pub cleaner_backoff_ms: u64,
    pub cleaner_dedupe_buffer_bytes: usize,
    pub offset_metadata_max_bytes: usize,
    pub offsets_topic_partitions: i32,
    pub offsets_topic_replication_factor: i16,
    pub offsets_topic_segment_bytes: i64,
    pub min_insync_replicas: i32,
    pub num_partitions: i32,
    pub recovery_checkpoint_interval_ms: i64,
    pub retention_check_interval_ms: i64,
    pub socket_request_max_bytes: usize,
    pub max_connections: usize,
    /// `max.connections.per.ip` and its overrides.
    pub connections_per_ip: crate::config::connections_per_ip::PerIpLimits,
    /// `max.incremental.fetch.session.cache.slots`.
    pub fetch_session_slots: usize,
    pub partitions_per_shard: usize,
    pub controller_mutation_rate: u64,
    pub replica_lag_time_max_ms: i64,
    pub zookeeper_session_timeout_ms: u64,
    pub transactions: TransactionSettings,
    /// Defaults for topic-level log settings.
    pub log: LogConfig,
    /// Listeners, TLS and SASL, read when the broker starts.
    pub security: SecuritySettings,
    /// log.retention.{ms, minutes, hours} as set (`None`: unset); the most precise one wins.
    retention_by_unit: [Option<i64>; 3],
    /// Names set explicitly (tuning file), reported as STATIC_BROKER_CONFIG.
    pub explicit: Vec<String>,
    values: Vec<(&'static str, String)>,
}

impl Default for BrokerSettings {
    fn default() -> Self {
        let mut s = BrokerSettings {
            auto_create_topics: true,
            auto_leader_rebalance: true,
            leader_imbalance_check_interval_seconds: 300,
            connections_max_idle_ms: 600_000,
            failed_authentication_delay_ms: 100,
            sasl_max_receive_bytes: 524_288,
            default_replication_factor: 1,
            delete_topic_enable: true,
            fetch_zero_copy: true,
            group_initial_rebalance_delay_ms: 3000,
            group_max_session_timeout_ms: 1_800_000,
            group_min_session_timeout_ms: 6000,
            cleaner_io_bytes_per_second: 100 << 20,
            cleaner_backoff_ms: 15_000,
            cleaner_dedupe_buffer_bytes: 32 << 20,
            offset_metadata_max_bytes: 4096,
            offsets_topic_partitions: 50,
            offsets_topic_replication_factor: 3,
            offsets_topic_segment_bytes: 104_857_600,
            min_insync_replicas: 1,
            num_partitions: 1,
            recovery_checkpoint_interval_ms: 1000,
            retention_check_interval_ms: 300_000,
            socket_request_max_bytes: 104_857_600,
            max_connections: i32::MAX as usize,
            connections_per_ip: Default::default(),
            fetch_session_slots: 1000,
            partitions_per_shard: 0,
            controller_mutation_rate: 0,
            replica_lag_time_max_ms: 30_000,
            zookeeper_session_timeout_ms: 18_000,
            transactions: TransactionSettings::default(),
            log: LogConfig::default(),
            security: SecuritySettings::default(),
            retention_by_unit: [None; 3],
            explicit: Vec::new(),
            values: BROKER_KEYS
                .iter()
                .map(|k| (k.name, k.default.to_string()))
                .collect(),
        };
        for k in BROKER_KEYS.iter().filter(|k| !k.default.is_empty()) {
            s.apply(k.name, k.default).expect("defaults are valid");
        }
        s
    }
}

fn parse_bool(name: &str, value: &str) -> Result<bool, ConfigError> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ConfigError::Field {
            field: name.to_string(),
            message: format!("{value:?} is not true or false"),
        }),
    }
}

impl BrokerSettings {
    /// Sets `name` (Kafka's name) to `value`, checking its bounds.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        if SecuritySettings::takes(name) {
            self.security.set(name, value)?;
        } else {
            self.apply(name, value)?;
        }
        if !self.explicit.iter().any(|n| n == name) {
            self.explicit.push(name.to_string());
        }
        Ok(())
    }

    fn apply(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        let key =
            BROKER_KEYS
                .iter()
                .find(|k| k.name == name)
                .ok_or_else(|| ConfigError::Field {
                    field: name.to_string(),
                    message: "unknown broker setting".to_string(),
                })?;
        let bad = |message: String| ConfigError::Field {
            field: name.to_string(),
            message,
        };
        let int = || -> Result<i64, ConfigError> {
            let v: i64 = value
                .trim()
                .parse()
                .map_err(|_| bad(format!("{value:?} is not an integer")))?;
            if v < key.min || v > key.max {
                return Err(bad(format!("{v} is outside [{}, {}]", key.min, key.max)));
            }
            Ok(v)
        };
        let log_key = |log: &mut LogConfig, topic_name: &str| {
            log.set(topic_name, value).map_err(|e| bad(e.to_string()))
        };
        match name {
            "auto.create.topics.enable" => self.auto_create_topics = parse_bool(name, value)?,
            "auto.leader.rebalance.enable" => self.auto_leader_rebalance = parse_bool(name, value)?,
            "leader.imbalance.check.interval.seconds" => {
                self.leader_imbalance_check_interval_seconds = int()? as u64
            }
            "connections.max.idle.ms" => self.connections_max_idle_ms = int()?,
            "connection.failed.authentication.delay.ms" => {
                self.failed_authentication_delay_ms = int()? as u64
            }
            "sasl.server.max.receive.size" => self.sasl_max_receive_bytes = int()? as usize,
            "default.replication.factor" => self.default_replication_factor = int()? as i16,
            "delete.topic.enable" => self.delete_topic_enable = parse_bool(name, value)?,
            "compression.type" if value.trim() == "producer" => {}
            "compression.type" => {
                return Err(bad(format!(
                    "{value:?}: Ferrite stores batches as producers compressed them (producer)"
                )))
            }
            "fetch.zero.copy.enable" => self.fetch_zero_copy = parse_bool(name, value)?,
            "group.initial.rebalance.delay.ms" => {
                self.group_initial_rebalance_delay_ms = int()? as u64
            }
            "group.max.session.timeout.ms" => self.group_max_session_timeout_ms = int()? as u64,
            "group.min.session.timeout.ms" => self.group_min_session_timeout_ms = int()? as u64,
            "log.cleaner.io.max.bytes.per.second" => {
                self.cleaner_io_bytes_per_second = int()? as u64
            }
            "log.cleaner.backoff.ms" => self.cleaner_backoff_ms = int()? as u64,
            "log.cleaner.dedupe.buffer.size" => self.cleaner_dedupe_buffer_bytes = int()? as usize,
            "log.cleanup.policy" => log_key(&mut self.log, "cleanup.policy")?,
            "log.flush.interval.messages" => log_key(&mut self.log, "flush.messages")?,
            "log.flush.interval.ms" => log_key(&mut self.log, "flush.ms")?,
            "log.index.interval.bytes" => log_key(&mut self.log, "index.interval.bytes")?,
            "log.recovery.checkpoint.interval.ms" => self.recovery_checkpoint_interval_ms = int()?,
            "log.retention.bytes" => log_key(&mut self.log, "retention.bytes")?,
            "log.retention.check.interval.ms" => self.retention_check_interval_ms = int()?,
            "log.retention.ms" | "log.retention.minutes" | "log.retention.hours" => {
                self.set_retention(name, int()?)?
            }
            "log.roll.ms" => log_key(&mut self.log, "segment.ms")?,
            "log.segment.bytes" => log_key(&mut self.log, "segment.bytes")?,
            "log.message.downconversion.enable" => {
                log_key(&mut self.log, "message.downconversion.enable")?
            }
            "log.message.timestamp.after.max.ms" => {
                log_key(&mut self.log, "message.timestamp.after.max.ms")?
            }
            "log.message.timestamp.before.max.ms" => {
                log_key(&mut self.log, "message.timestamp.before.max.ms")?
            }
            "log.message.timestamp.difference.max.ms" => {
                log_key(&mut self.log, "message.timestamp.difference.max.ms")?
            }
            "log.message.timestamp.type" => log_key(&mut self.log, "message.timestamp.type")?,
            "message.max.bytes" => log_key(&mut self.log, "max.message.bytes")?,
            "max.connections" => self.max_connections = int()? as usize,
            "max.connections.per.ip" => self.connections_per_ip.default = int()? as usize,
            "max.connections.per.ip.overrides" => {
                self.connections_per_ip.overrides =
                    crate::config::connections_per_ip::parse_overrides(value).map_err(bad)?
            }
            "max.incremental.fetch.session.cache.slots" => {
                self.fetch_session_slots = int()? as usize
            }
            "min.insync.replicas" => self.min_insync_replicas = int()? as i32,
            "num.partitions" => self.num_partitions = int()? as i32,
            "offset.metadata.max.bytes" => self.offset_metadata_max_bytes = int()? as usize,
            "offsets.topic.num.partitions" => self.offsets_topic_partitions = int()? as i32,
            "offsets.topic.replication.factor" => {
                self.offsets_topic_replication_factor = int()? as i16
            }
            "offsets.topic.segment.bytes" => self.offsets_topic_segment_bytes = int()?,
            "socket.request.max.bytes" => self.socket_request_max_bytes = int()? as usize,
            "quota.controller.mutation.rate" => self.controller_mutation_rate = int()? as u64,
            "replica.lag.time.max.ms" => self.replica_lag_time_max_ms = int()?,
            "topic.partitions.per.shard" => self.partitions_per_shard = int()? as usize,
            "zookeeper.session.timeout.ms" => self.zookeeper_session_timeout_ms = int()? as u64,
            "transaction.abort.timed.out.transaction.cleanup.interval.ms" => {
                self.transactions.abort_interval_ms = int()? as u64
            }
            "transaction.max.timeout.ms" => self.transactions.max_timeout_ms = int()? as i32,
            "transaction.partition.verification.enable" => {
                self.transactions.verification = parse_bool(name, value)?
            }
            "transaction.remove.expired.transaction.cleanup.interval.ms" => {
                self.transactions.expiry_interval_ms = int()? as u64
            }
            "transaction.state.log.min.isr" => self.transactions.state_min_isr = int()? as i32,
            "transaction.state.log.num.partitions" => {
                self.transactions.state_partitions = int()? as i32
            }
            "transaction.state.log.replication.factor" => {
                self.transactions.state_replication_factor = int()? as i16
            }
            "transaction.state.log.segment.bytes" => self.transactions.state_segment_bytes = int()?,
            "transactional.id.expiration.ms" => self.transactions.id_expiration_ms = int()?,
            other => unreachable!("{other} is in BROKER_KEYS but not handled"),
        }
        if let Some(slot) = self.values.iter_mut().find(|(n, _)| *n == name) {
            slot.1 = value.trim().to_string();
        }
        Ok(())
    }

    /// Kafka's retention precedence (`KafkaConfig.logRetentionTimeMillis`): log.retention.ms,
    /// else log.retention.minutes, else log.retention.hours; -1 keeps forever in any unit.
    fn set_retention(&mut self, name: &str, v: i64) -> Result<(), ConfigError> {
        let unit = match name {
            "log.retention.ms" => 0,
            "log.retention.minutes" => 1,
            _ => 2,
        };
        self.retention_by_unit[unit] = Some(v);
        let [ms, minutes, hours] = self.retention_by_unit;
        let effective = ms
            .or(minutes.map(|m| if m < 0 { -1 } else { m * 60_000 }))
            .or(hours.map(|h| if h < 0 { -1 } else { h * 3_600_000 }))
            .unwrap_or(7 * 24 * 3_600_000);
        self.log
            .set("retention.ms", &effective.to_string())
            .map_err(|e| ConfigError::Field {
                field: name.to_string(),
                message: e.to_string(),
            })
    }

    /// These settings with dynamic ones laid over them, in order (the cluster default, then
    /// this broker's own). A value that cannot be taken (written to ZooKeeper by another tool,
    /// or a name that is not dynamic) is left out with a warning, as Kafka skips invalid
    /// dynamic configs, so the broker keeps running on the rest.
    pub fn with_dynamic<'a>(
        &self,
        layers: impl IntoIterator<Item = &'a BTreeMap<String, String>>,
    ) -> BrokerSettings {
        let mut settings = self.clone();
        for layer in layers {
            for (name, value) in layer {
                let taken = if is_dynamic(name) {
                    settings.apply(name, value).map_err(|e| e.to_string())
                } else {
                    Err("not a dynamic setting".to_string())
                };
                if let Err(e) = taken {
                    tracing::warn!(config = %name, %value, error = %e, "ignoring a dynamic broker config");
                }
            }
        }
        settings
    }

    /// Checks a set of dynamic values as AlterConfigs on a broker checks them: every name
    /// dynamic, every value in bounds. The message is Kafka's.
    pub fn check_dynamic(&self, configs: &BTreeMap<String, String>) -> Result<(), String> {
        let fixed: Vec<&str> = configs
            .keys()
            .map(String::as_str)
            .filter(|n| !is_dynamic(n))
            .collect();
        if !fixed.is_empty() {
            return Err(format!(
                "Cannot update these configs dynamically: Set({})",
                fixed.join(", ")
            ));
        }
        let mut trial = self.clone();
        for (name, value) in configs {
            trial.apply(name, value).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// Every setting with its current value, for DescribeConfigs on the broker.
    pub fn entries(&self) -> &[(&'static str, String)] {
        &self.values
    }

    /// The broker settings a topic config falls back to, most precise first.
    pub fn synonyms_of(topic_config: &str) -> &'static [&'static str] {
        match topic_config {
            "cleanup.policy" => &["log.cleanup.policy"],
            "compression.type" => &["compression.type"],
            "flush.messages" => &["log.flush.interval.messages"],
            "flush.ms" => &["log.flush.interval.ms"],
            "index.interval.bytes" => &["log.index.interval.bytes"],
            "max.message.bytes" => &["message.max.bytes"],
            "message.downconversion.enable" => &["log.message.downconversion.enable"],
            "message.timestamp.after.max.ms" => &["log.message.timestamp.after.max.ms"],
            "message.timestamp.before.max.ms" => &["log.message.timestamp.before.max.ms"],
            "message.timestamp.difference.max.ms" => &["log.message.timestamp.difference.max.ms"],
            "message.timestamp.type" => &["log.message.timestamp.type"],
            "min.insync.replicas" => &["min.insync.replicas"],
            "retention.bytes" => &["log.retention.bytes"],
            "retention.ms" => &[
                "log.retention.ms",
                "log.retention.minutes",
                "log.retention.hours",
            ],
            "segment.bytes" => &["log.segment.bytes"],
            "segment.ms" => &["log.roll.ms"],
            _ => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamic_layers_apply_in_order_and_only_dynamic_names_are_taken() {
        let mut fixed = BrokerSettings::default();
        fixed.set("log.retention.hours", "1").unwrap();
        let cluster = BTreeMap::from([
            ("log.retention.ms".to_string(), "5000".to_string()),
            ("message.max.bytes".to_string(), "3000000".to_string()),
            ("num.partitions".to_string(), "9".to_string()),
        ]);
        let own = BTreeMap::from([("message.max.bytes".to_string(), "2000000".to_string())]);
        let s = fixed.with_dynamic([&cluster, &own]);
        assert_eq!(
            s.log.retention_ms, 5000,
            "log.retention.ms wins over the hours"
        );
        assert_eq!(s.log.max_message_bytes, 2_000_000, "the broker's own wins");
        assert_eq!(s.num_partitions, 1, "a static setting is not taken");
        assert!(fixed.check_dynamic(&own).is_ok());
        let err = fixed.check_dynamic(&cluster).unwrap_err();
        assert_eq!(
            err,
            "Cannot update these configs dynamically: Set(num.partitions)"
        );
        let bad = BTreeMap::from([("message.max.bytes".to_string(), "-5".to_string())]);
        assert!(fixed.check_dynamic(&bad).is_err());
    }

    #[test]
    fn defaults_parse_and_bounds_are_checked() {
        let mut s = BrokerSettings::default();
        assert_eq!(s.num_partitions, 1);
        assert_eq!(s.log.retention_ms, 604_800_000);
        s.set("num.partitions", "8").unwrap();
        s.set("log.retention.ms", "1000").unwrap();
        assert_eq!((s.num_partitions, s.log.retention_ms), (8, 1000));
        assert!(s.set("num.partitions", "0").is_err());
        assert!(s.set("auto.create.topics.enable", "yes").is_err());
        assert!(s.set("no.such.thing", "1").is_err());
        assert_eq!(s.explicit, vec!["num.partitions", "log.retention.ms"]);
        assert!(s
            .entries()
            .iter()
            .any(|(n, v)| *n == "num.partitions" && v == "8"));
    }
}
