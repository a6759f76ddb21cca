//! The tuning file: per-core settings and broker defaults, typed and bounded.
//!
//! ```toml
//! [shards]
//! cores = "all"            # or a list of CPU numbers, one shard each
//! io_mode = "buffered"     # or "direct"
//!
//! [core.1]                 # overrides for the shard on CPU 1
//! io_mode = "direct"
//!
//! [broker]
//! "num.partitions" = 3     # Kafka's names
//! ```
//! Every refusal names the field, its bound and the line.

use super::{BrokerSettings, ConfigError};
use ferrite_shards::IoMode;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use toml::Spanned;

/// Settings of one shard.
#[derive(Clone, Debug, PartialEq)]
pub struct ShardSettings {
    /// `direct` (O_DIRECT + batch cache) or `buffered` (page cache + splice).
    pub io_mode: IoMode,
    /// Direct mode: bytes of recent batches cached for tailing readers.
    pub cache_bytes: usize,
    /// Bytes of requests read but not yet answered; reading waits beyond it.
    pub request_bytes_max: usize,
    /// Calls queued towards each other shard before callers wait.
    pub router_queue_depth: usize,
    /// Requests one connection may have in flight (pipelined) before reading pauses.
    pub connection_inflight_max: usize,
}

impl Default for ShardSettings {
    fn default() -> Self {
        ShardSettings {
            io_mode: IoMode::Buffered,
            cache_bytes: 64 << 20,
            request_bytes_max: 256 << 20,
            router_queue_depth: 256,
            connection_inflight_max: 64,
        }
    }
}

/// Bounds of the numeric shard fields: (name, min, max).
pub const SHARD_FIELD_BOUNDS: &[(&str, u64, u64)] = &[
    ("cache_bytes", 0, 64 << 30),
    ("request_bytes_max", 1 << 20, 64 << 30),
    ("router_queue_depth", 1, 65_536),
    ("connection_inflight_max", 1, 4096),
];

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ShardSection {
    cores: Option<Spanned<Cores>>,
    io_mode: Option<Spanned<String>>,
    cache_bytes: Option<Spanned<u64>>,
    request_bytes_max: Option<Spanned<u64>>,
    router_queue_depth: Option<Spanned<u64>>,
    connection_inflight_max: Option<Spanned<u64>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Cores {
    All(String),
    List(Vec<usize>),
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileLayout {
    #[serde(default)]
    shards: ShardSection,
    #[serde(default)]
    core: BTreeMap<String, ShardSection>,
    #[serde(default)]
    broker: BTreeMap<String, Spanned<toml::Value>>,
}

/// A parsed tuning file.
#[derive(Clone, Debug, Default)]
pub struct TuningFile {
    /// CPUs named by `cores`; `None` for all online CPUs.
    pub cores: Option<Vec<usize>>,
    pub shard_defaults: ShardSettings,
    /// `[core.N]` overrides, applied to the shard on CPU N.
    pub per_core: BTreeMap<usize, ShardSettings>,
    pub broker: BrokerSettings,
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

impl TuningFile {
    pub fn load(path: &Path) -> Result<TuningFile, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::File {
            file: path.display().to_string(),
            message: e.to_string(),
        })?;
        TuningFile::parse(&text, &path.display().to_string())
    }

    pub fn parse(text: &str, file: &str) -> Result<TuningFile, ConfigError> {
        let layout: FileLayout = toml::from_str(text).map_err(|e| ConfigError::File {
            file: file.to_string(),
            message: e.to_string().trim().replace('\n', " "),
        })?;
        let at = |span: std::ops::Range<usize>, field: &str, message: String| ConfigError::Field {
            field: format!("{file}:{}: {field}", line_of(text, span.start)),
            message,
        };
        let mut out = TuningFile::default();
        if let Some(cores) = &layout.shards.cores {
            out.cores = match cores.get_ref() {
                Cores::All(s) if s == "all" => None,
                Cores::All(s) => {
                    return Err(at(
                        cores.span(),
                        "shards.cores",
                        format!("{s:?}: expected \"all\" or a list of CPU numbers"),
                    ))
                }
                Cores::List(list) if list.is_empty() => {
                    return Err(at(cores.span(), "shards.cores", "the list is empty".into()))
                }
                Cores::List(list) => Some(list.clone()),
            };
        }
        out.shard_defaults =
            apply_section(ShardSettings::default(), &layout.shards, "shards", &at)?;
        for (name, section) in &layout.core {
            let cpu: usize = name.parse().map_err(|_| ConfigError::Field {
                field: format!("{file}: core.{name}"),
                message: "core sections are named by CPU number, e.g. [core.0]".into(),
            })?;
            if section.cores.is_some() {
                return Err(ConfigError::Field {
                    field: format!("{file}: core.{name}.cores"),
                    message: "cores is set in [shards] only".into(),
                });
            }
            let settings = apply_section(
                out.shard_defaults.clone(),
                section,
                &format!("core.{name}"),
                &at,
            )?;
            out.per_core.insert(cpu, settings);
        }
        for (name, value) in &layout.broker {
            let text_value = match value.get_ref() {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                toml::Value::Float(f) => f.to_string(),
                _ => {
                    return Err(at(
                        value.span(),
                        &format!("broker.{name}"),
                        "expected a string, number or boolean".into(),
                    ))
                }
            };
            out.broker
                .set(name, &text_value)
                .map_err(|e| at(value.span(), &format!("broker.{name}"), e.to_string()))?;
        }
        Ok(out)
    }

    /// The settings of the shard running on `cpu`.
    pub fn shard_for_cpu(&self, cpu: usize) -> ShardSettings {
        self.per_core
            .get(&cpu)
            .cloned()
            .unwrap_or_else(|| self.shard_defaults.clone())
    }
}

fn apply_section(
    mut s: ShardSettings,
    section: &ShardSection,
    prefix: &str,
    at: &dyn Fn(std::ops::Range<usize>, &str, String) -> ConfigError,
) -> Result<ShardSettings, ConfigError> {
    if let Some(mode) = &section.io_mode {
        s.io_mode = IoMode::parse(mode.get_ref()).ok_or_else(|| {
            at(
                mode.span(),
                &format!("{prefix}.io_mode"),
                format!("{:?}: expected \"direct\" or \"buffered\"", mode.get_ref()),
            )
        })?;
    }
    let numeric = [
        ("cache_bytes", &section.cache_bytes),
        ("request_bytes_max", &section.request_bytes_max),
        ("router_queue_depth", &section.router_queue_depth),
        ("connection_inflight_max", &section.connection_inflight_max),
    ];
    for (name, value) in numeric {
        let Some(v) = value else { continue };
        let &(_, min, max) = SHARD_FIELD_BOUNDS
            .iter()
            .find(|(n, _, _)| *n == name)
            .expect("bounds for every numeric field");
        let n = *v.get_ref();
        if n < min || n > max {
            return Err(at(
                v.span(),
                &format!("{prefix}.{name}"),
                format!("{n} is outside [{min}, {max}]"),
            ));
        }
        let n = n as usize;
        match name {
            "cache_bytes" => s.cache_bytes = n,
            "request_bytes_max" => s.request_bytes_max = n,
            "router_queue_depth" => s.router_queue_depth = n,
            "connection_inflight_max" => s.connection_inflight_max = n,
            _ => unreachable!(),
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_file_parses() {
        let t = TuningFile::parse(
            "[shards]\ncores = [0, 1]\nio_mode = \"buffered\"\n\n[core.1]\nio_mode = \"direct\"\n\n[broker]\n\"num.partitions\" = 4\n\"auto.create.topics.enable\" = false\n",
            "t.toml",
        )
        .unwrap();
        assert_eq!(t.cores, Some(vec![0, 1]));
        assert_eq!(t.shard_for_cpu(0).io_mode, IoMode::Buffered);
        assert_eq!(t.shard_for_cpu(1).io_mode, IoMode::Direct);
        assert_eq!(t.broker.num_partitions, 4);
        assert!(!t.broker.auto_create_topics);
    }

    #[test]
    fn bad_values_name_the_field_the_bound_and_the_line() {
        let err = TuningFile::parse("[shards]\n\nrouter_queue_depth = 0\n", "t.toml").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("t.toml:3: shards.router_queue_depth"), "{msg}");
        assert!(msg.contains("[1, 65536]"), "{msg}");
        let err = TuningFile::parse("[broker]\n\"num.partitions\" = 0\n", "t.toml").unwrap_err();
        assert!(
            err.to_string().contains("t.toml:2: broker.num.partitions"),
            "{err}"
        );
        assert!(
            TuningFile::parse("[shards]\nspeed = 3\n", "t.toml").is_err(),
            "unknown field"
        );
        assert!(TuningFile::parse("[shards]\nio_mode = \"fast\"\n", "t.toml").is_err());
    }
}
