//! Per-topic log settings under Kafka's names, each with its default, bounds and meaning.

use crate::batch::TimestampType;
use std::fmt;

/// How a shard writes its segment files.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum IoMode {
    /// O_DIRECT appends through the shard's ring; recent batches served from the shard's cache.
    Direct,
    /// Writes into the page cache through io_uring; readers splice from the page cache.
    Buffered,
}

impl IoMode {
    pub fn parse(s: &str) -> Option<IoMode> {
        match s {
            "direct" => Some(IoMode::Direct),
            "buffered" => Some(IoMode::Buffered),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            IoMode::Direct => "direct",
            IoMode::Buffered => "buffered",
        }
    }
}

/// What happens to closed segments: Kafka's `cleanup.policy`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CleanupPolicy {
    Delete,
    Compact,
    CompactAndDelete,
}

impl CleanupPolicy {
    pub fn deletes(self) -> bool {
        matches!(
            self,
            CleanupPolicy::Delete | CleanupPolicy::CompactAndDelete
        )
    }

    pub fn compacts(self) -> bool {
        matches!(
            self,
            CleanupPolicy::Compact | CleanupPolicy::CompactAndDelete
        )
    }

    fn parse(s: &str) -> Option<CleanupPolicy> {
        let mut parts: Vec<&str> = s.split(',').map(str::trim).collect();
        parts.sort_unstable();
        parts.dedup();
        match parts.as_slice() {
            ["delete"] => Some(CleanupPolicy::Delete),
            ["compact"] => Some(CleanupPolicy::Compact),
            ["compact", "delete"] => Some(CleanupPolicy::CompactAndDelete),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            CleanupPolicy::Delete => "delete",
            CleanupPolicy::Compact => "compact",
            CleanupPolicy::CompactAndDelete => "compact,delete",
        }
    }
}

/// Settings of one partition log. Kafka's topic-level names; the broker's `log.*` defaults fill
/// in what a topic does not set.
#[derive(Clone, Debug, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes`: roll to a new segment once the active one would exceed this.
    pub segment_bytes: u64,
    /// `segment.ms`: roll once the active segment's first batch is this old.
    pub segment_ms: i64,
    /// `retention.ms`: delete closed segments whose newest record is older; -1 keeps forever.
    pub retention_ms: i64,
    /// `retention.bytes`: delete oldest closed segments while the log is larger; -1: no limit.
    pub retention_bytes: i64,
    /// `flush.messages`: fdatasync after this many records; 1 makes every ack durable.
    pub flush_messages: i64,
    /// `flush.ms`: fdatasync data older than this.
    pub flush_ms: i64,
    /// `max.message.bytes`: the largest batch accepted, overhead included.
    pub max_message_bytes: usize,
    /// `index.interval.bytes`: bytes of log between two sparse index entries.
    pub index_interval_bytes: u32,
    /// `cleanup.policy`: delete, compact, or both.
    pub cleanup_policy: CleanupPolicy,
    /// `delete.retention.ms`: how long a compacted topic keeps tombstones.
    pub delete_retention_ms: i64,
    /// `min.cleanable.dirty.ratio`: share of a compacted log that must be uncleaned before a pass.
    pub min_cleanable_dirty_ratio: f64,
    /// `message.timestamp.type`: keep the producer's timestamps, or stamp the broker's clock.
    pub message_timestamp_type: TimestampType,
    /// `message.timestamp.before.max.ms`: how far behind the broker's clock a CreateTime may be.
    pub message_timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms`: how far ahead of the broker's clock it may be.
    pub message_timestamp_after_max_ms: i64,
    /// `message.timestamp.difference.max.ms` (deprecated by KIP-937): both bounds at once,
    /// for whichever of the two above is left at its default.
    pub message_timestamp_difference_max_ms: i64,
    /// `message.downconversion.enable`: whether Fetch v0–3 readers get converted message sets
    /// (off: UNSUPPORTED_VERSION). Followers never need conversion.
    pub message_downconversion_enable: bool,
}

impl LogConfig {
    /// The CreateTime window in force: KIP-937's before/after bounds, each falling back to the
    /// deprecated difference bound while left at its default (Kafka's
    /// `LogConfig.getMessageTimestampBeforeMaxMs`).
    pub fn timestamp_window_ms(&self) -> (i64, i64) {
        let pick = |bound: i64| {
            if bound == i64::MAX {
                self.message_timestamp_difference_max_ms
            } else {
                bound
            }
        };
        (
            pick(self.message_timestamp_before_max_ms),
            pick(self.message_timestamp_after_max_ms),
        )
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 3_600_000,
            retention_ms: 7 * 24 * 3_600_000,
            retention_bytes: -1,
            flush_messages: i64::MAX,
            flush_ms: i64::MAX,
            max_message_bytes: 1_048_588,
            index_interval_bytes: 4096,
            cleanup_policy: CleanupPolicy::Delete,
            delete_retention_ms: 24 * 3_600_000,
            min_cleanable_dirty_ratio: 0.5,
            message_timestamp_type: TimestampType::CreateTime,
            message_timestamp_before_max_ms: i64::MAX,
            message_timestamp_after_max_ms: i64::MAX,
            message_timestamp_difference_max_ms: i64::MAX,
            message_downconversion_enable: true,
        }
    }
}

/// A setting that could not be applied: unknown name or value out of bounds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    UnknownName(String),
    BadValue {
        name: String,
        value: String,
        expected: String,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::UnknownName(name) => write!(f, "unknown config {name}"),
            ConfigError::BadValue {
                name,
                value,
                expected,
            } => write!(f, "invalid value {value:?} for {name}: expected {expected}"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// One documented setting: Kafka name, meaning, bounds.
pub struct ConfigKey {
    pub name: &'static str,
    pub doc: &'static str,
    pub min: i64,
    pub max: i64,
}

/// Every topic-level log setting, in DescribeConfigs order.
pub const CONFIG_KEYS: &[ConfigKey] = &[
    ConfigKey {
        name: "cleanup.policy",
        doc: "delete, compact or compact,delete",
        min: 0,
        max: 0,
    },
    ConfigKey {
        name: "delete.retention.ms",
        doc: "how long tombstones survive compaction",
        min: 0,
        max: i64::MAX,
    },
    ConfigKey {
        name: "flush.messages",
        doc: "records between fdatasyncs",
        min: 1,
        max: i64::MAX,
    },
    ConfigKey {
        name: "flush.ms",
        doc: "age of unflushed data that forces an fdatasync",
        min: 0,
        max: i64::MAX,
    },
    ConfigKey {
        name: "index.interval.bytes",
        doc: "log bytes between sparse index entries",
        min: 0,
        max: i32::MAX as i64,
    },
    ConfigKey {
        name: "max.message.bytes",
        doc: "largest record batch accepted",
        min: 0,
        max: i32::MAX as i64,
    },
    ConfigKey {
        name: "message.downconversion.enable",
        doc: "whether Fetch v0-3 readers get down-converted message sets",
        min: 0,
        max: 0,
    },
    ConfigKey {
        name: "message.timestamp.after.max.ms",
        doc: "how far a record's CreateTime may be ahead of the broker's clock",
        min: 0,
        max: i64::MAX,
    },
    ConfigKey {
        name: "message.timestamp.before.max.ms",
        doc: "how far a record's CreateTime may be behind the broker's clock",
        min: 0,
        max: i64::MAX,
    },
    ConfigKey {
        name: "message.timestamp.difference.max.ms",
        doc: "deprecated: both timestamp bounds at once, where the two above are unset",
        min: 0,
        max: i64::MAX,
    },
    ConfigKey {
        name: "message.timestamp.type",
        doc: "CreateTime (the producer's clock) or LogAppendTime (the broker's)",
        min: 0,
        max: 0,
    },
    ConfigKey {
        name: "min.cleanable.dirty.ratio",
        doc: "dirty share that triggers compaction",
        min: 0,
        max: 1,
    },
    ConfigKey {
        name: "retention.bytes",
        doc: "log size beyond which old segments go; -1 unlimited",
        min: -1,
        max: i64::MAX,
    },
    ConfigKey {
        name: "retention.ms",
        doc: "age beyond which old segments go; -1 unlimited",
        min: -1,
        max: i64::MAX,
    },
    ConfigKey {
        name: "segment.bytes",
        doc: "size at which the active segment rolls",
        min: 1024,
        max: i32::MAX as i64,
    },
    ConfigKey {
        name: "segment.ms",
        doc: "age at which the active segment rolls",
        min: 1,
        max: i64::MAX,
    },
];

impl LogConfig {
    /// Applies one `name=value` setting, checking its bounds.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        let key = CONFIG_KEYS
            .iter()
            .find(|k| k.name == name)
            .ok_or_else(|| ConfigError::UnknownName(name.to_string()))?;
        let bad = |expected: String| ConfigError::BadValue {
            name: name.to_string(),
            value: value.to_string(),
            expected,
        };
        match name {
            "cleanup.policy" => {
                self.cleanup_policy = CleanupPolicy::parse(value)
                    .ok_or_else(|| bad("delete, compact or compact,delete".into()))?;
                return Ok(());
            }
            "message.timestamp.type" => {
                self.message_timestamp_type = match value.trim() {
                    "CreateTime" => TimestampType::CreateTime,
                    "LogAppendTime" => TimestampType::LogAppendTime,
                    _ => return Err(bad("CreateTime or LogAppendTime".into())),
                };
                return Ok(());
            }
            "message.downconversion.enable" => {
                self.message_downconversion_enable = match value.trim() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(bad("true or false".into())),
                };
                return Ok(());
            }
            "min.cleanable.dirty.ratio" => {
                let v: f64 = value
                    .trim()
                    .parse()
                    .map_err(|_| bad("a number in [0, 1]".into()))?;
                if !(0.0..=1.0).contains(&v) {
                    return Err(bad("a number in [0, 1]".into()));
                }
                self.min_cleanable_dirty_ratio = v;
                return Ok(());
            }
            _ => {}
        }
        let bounds = || format!("an integer in [{}, {}]", key.min, key.max);
        let v: i64 = value.trim().parse().map_err(|_| bad(bounds()))?;
        if v < key.min || v > key.max {
            return Err(bad(bounds()));
        }
        match name {
            "delete.retention.ms" => self.delete_retention_ms = v,
            "flush.messages" => self.flush_messages = v,
            "flush.ms" => self.flush_ms = v,
            "index.interval.bytes" => self.index_interval_bytes = v as u32,
            "max.message.bytes" => self.max_message_bytes = v as usize,
            "message.timestamp.after.max.ms" => self.message_timestamp_after_max_ms = v,
            "message.timestamp.before.max.ms" => self.message_timestamp_before_max_ms = v,
            "message.timestamp.difference.max.ms" => self.message_timestamp_difference_max_ms = v,
            "retention.bytes" => self.retention_bytes = v,
            "retention.ms" => self.retention_ms = v,
            "segment.bytes" => self.segment_bytes = v as u64,
            "segment.ms" => self.segment_ms = v,
            other => unreachable!("{other} is in CONFIG_KEYS but not handled"),
        }
        Ok(())
    }

    /// The current value of a setting, as DescribeConfigs reports it.
    pub fn get(&self, name: &str) -> Option<String> {
        Some(match name {
            "cleanup.policy" => self.cleanup_policy.name().to_string(),
            "delete.retention.ms" => self.delete_retention_ms.to_string(),
            "flush.messages" => self.flush_messages.to_string(),
            "flush.ms" => self.flush_ms.to_string(),
            "index.interval.bytes" => self.index_interval_bytes.to_string(),
            "max.message.bytes" => self.max_message_bytes.to_string(),
            "message.downconversion.enable" => self.message_downconversion_enable.to_string(),
            "message.timestamp.after.max.ms" => self.message_timestamp_after_max_ms.to_string(),
            "message.timestamp.before.max.ms" => self.message_timestamp_before_max_ms.to_string(),
            "message.timestamp.difference.max.ms" => {
                self.message_timestamp_difference_max_ms.to_string()
            }
            "message.timestamp.type" => match self.message_timestamp_type {
                TimestampType::CreateTime => "CreateTime".to_string(),
                TimestampType::LogAppendTime => "LogAppendTime".to_string(),
            },
            "min.cleanable.dirty.ratio" => self.min_cleanable_dirty_ratio.to_string(),
            "retention.bytes" => self.retention_bytes.to_string(),
            "retention.ms" => self.retention_ms.to_string(),
            "segment.bytes" => self.segment_bytes.to_string(),
            "segment.ms" => self.segment_ms.to_string(),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip_and_bounds_hold() {
        let mut c = LogConfig::default();
        c.set("retention.ms", "1000").unwrap();
        assert_eq!(c.get("retention.ms").as_deref(), Some("1000"));
        c.set("cleanup.policy", "delete,compact").unwrap();
        assert_eq!(c.cleanup_policy, CleanupPolicy::CompactAndDelete);
        assert!(matches!(
            c.set("segment.bytes", "10"),
            Err(ConfigError::BadValue { .. })
        ));
        assert!(matches!(
            c.set("flush.messages", "x"),
            Err(ConfigError::BadValue { .. })
        ));
        assert!(matches!(
            c.set("no.such", "1"),
            Err(ConfigError::UnknownName(_))
        ));
        for key in CONFIG_KEYS {
            assert!(c.get(key.name).is_some(), "{} readable", key.name);
        }
    }
}
