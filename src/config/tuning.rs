//! The tuning file: per-core settings and broker defaults, typed and bounded.
//!
//! ```toml
//! [shards]
//! cores = "all"            # or a list of CPU numbers, one shard each
//! control_core = "any"     # or the CPU of the control thread
//! io_mode = "buffered"     # or "direct"
//!
//! [core.1]                 # overrides for the shard on CPU 1
//! io_mode = "direct"
//!
//! [broker]
//! "num.partitions" = 3     # Kafka's names
//! ```
//! Every refusal names the field, its bound and the line. The fields and their bounds are the
//! table `SHARD_FIELDS`; `tuning/default.toml` documents each one.

use super::{BrokerSettings, ConfigError};
use ferrite_shards::log::WriterTuning;
use ferrite_shards::IoMode;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::ops::Range;
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
    /// Requests one connection may have in flight (pipelined) before reading pauses.
    pub connection_inflight_max: usize,
    /// Each log's write-behind queue, batch size per write, and writes in flight.
    pub writer: WriterTuning,
    /// Entries of the shard's io_uring ring (operations the kernel holds at once).
    pub uring_entries: u32,
    /// Buffered writes of at most this many bytes are made by the shard thread itself;
    /// larger ones go through the ring to its worker threads. 0 sends every write there.
    pub inline_write_bytes_max: usize,
    /// A plaintext connection whose last this-many produce and fetch requests named only
    /// partitions of one other shard moves to that shard; 0 keeps connections where they land.
    pub connection_move_after_requests: u32,
    /// SO_SNDBUF / SO_RCVBUF of client connections; 0 leaves the kernel's autotuning.
    pub socket_send_buffer_bytes: usize,
    pub socket_receive_buffer_bytes: usize,
}

impl Default for ShardSettings {
    fn default() -> Self {
        ShardSettings {
            io_mode: IoMode::Buffered,
            cache_bytes: 64 << 20,
            request_bytes_max: 256 << 20,
            connection_inflight_max: 64,
            writer: WriterTuning::default(),
            uring_entries: 512,
            inline_write_bytes_max: 1 << 20,
            connection_move_after_requests: 16,
            socket_send_buffer_bytes: 0,
            socket_receive_buffer_bytes: 0,
        }
    }
}

/// A numeric per-core field: its name, bounds, and where it goes.
struct NumericField {
    name: &'static str,
    min: u64,
    max: u64,
    set: fn(&mut ShardSettings, u64),
}

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

/// Every numeric field a `[shards]` or `[core.N]` section may set.
const SHARD_FIELDS: &[NumericField] = &[
    NumericField {
        name: "cache_bytes",
        min: 0,
        max: 64 * GIB,
        set: |s, v| s.cache_bytes = v as usize,
    },
    NumericField {
        name: "request_bytes_max",
        min: MIB,
        max: 64 * GIB,
        set: |s, v| s.request_bytes_max = v as usize,
    },
    NumericField {
        name: "connection_inflight_max",
        min: 1,
        max: 4096,
        set: |s, v| s.connection_inflight_max = v as usize,
    },
    NumericField {
        name: "write_behind_bytes",
        min: MIB,
        max: 4 * GIB,
        set: |s, v| s.writer.queued_bytes_max = v as usize,
    },
    NumericField {
        name: "write_bytes_max",
        min: 0,
        max: 256 * MIB,
        set: |s, v| s.writer.write_bytes_max = (v > 0).then_some(v as usize),
    },
    NumericField {
        name: "writes_in_flight",
        min: 1,
        max: 64,
        set: |s, v| s.writer.writes_in_flight = v as usize,
    },
    NumericField {
        name: "uring_entries",
        min: 16,
        max: 4096,
        set: |s, v| s.uring_entries = v as u32,
    },
    NumericField {
        name: "inline_write_bytes_max",
        min: 0,
        max: 256 * MIB,
        set: |s, v| s.inline_write_bytes_max = v as usize,
    },
    NumericField {
        name: "connection_move_after_requests",
        min: 0,
        max: 1_000_000,
        set: |s, v| s.connection_move_after_requests = v as u32,
    },
    NumericField {
        name: "socket_send_buffer_bytes",
        min: 0,
        max: 64 * MIB,
        set: |s, v| s.socket_send_buffer_bytes = v as usize,
    },
    NumericField {
        name: "socket_receive_buffer_bytes",
        min: 0,
        max: 64 * MIB,
        set: |s, v| s.socket_receive_buffer_bytes = v as usize,
    },
];

/// Bounds of `router_queue_depth`, set in `[shards]` only: one depth for every channel.
const ROUTER_QUEUE_DEPTH: (u64, u64) = (1, 65_536);

/// Fields of `[shards]` that are not per core.
const SHARDS_ONLY: &[&str] = &["cores", "control_core", "router_queue_depth"];

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileLayout {
    #[serde(default)]
    shards: BTreeMap<String, Spanned<toml::Value>>,
    #[serde(default)]
    core: BTreeMap<String, BTreeMap<String, Spanned<toml::Value>>>,
    #[serde(default)]
    broker: BTreeMap<String, Spanned<toml::Value>>,
}

/// A parsed tuning file.
#[derive(Clone, Debug)]
pub struct TuningFile {
    /// CPUs named by `cores`; `None` for all online CPUs.
    pub cores: Option<Vec<usize>>,
    /// The CPU the control thread (ZooKeeper session, controller duties) is pinned to.
    pub control_core: Option<usize>,
    /// Calls one shard may queue towards each other shard before callers wait.
    pub router_queue_depth: usize,
    pub shard_defaults: ShardSettings,
    /// `[core.N]` overrides, applied to the shard on CPU N.
    pub per_core: BTreeMap<usize, ShardSettings>,
    pub broker: BrokerSettings,
}

impl Default for TuningFile {
    fn default() -> Self {
        TuningFile {
            cores: None,
            control_core: None,
            router_queue_depth: 256,
            shard_defaults: ShardSettings::default(),
            per_core: BTreeMap::new(),
            broker: BrokerSettings::default(),
        }
    }
}

/// Builds errors that point at a place in the file.
struct Locator<'a> {
    text: &'a str,
    file: &'a str,
}

impl Locator<'_> {
    fn at(&self, span: Range<usize>, field: &str, message: String) -> ConfigError {
        let line = self.text[..span.start.min(self.text.len())]
            .matches('\n')
            .count()
            + 1;
        ConfigError::Field {
            field: format!("{}:{line}: {field}", self.file),
            message,
        }
    }
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
        let loc = Locator { text, file };
        let mut out = TuningFile::default();
        let mut per_core_fields = BTreeMap::new();
        for (name, value) in &layout.shards {
            let field = format!("shards.{name}");
            match name.as_str() {
                "cores" => out.cores = cores(value, &field, &loc)?,
                "control_core" => out.control_core = control_core(value, &field, &loc)?,
                "router_queue_depth" => {
                    let (min, max) = ROUTER_QUEUE_DEPTH;
                    out.router_queue_depth = bounded(value, &field, min, max, &loc)? as usize;
                }
                _ => {
                    per_core_fields.insert(name.clone(), value.clone());
                }
            }
        }
        out.shard_defaults =
            apply_section(ShardSettings::default(), &per_core_fields, "shards", &loc)?;
        for (name, section) in &layout.core {
            let cpu: usize = name.parse().map_err(|_| ConfigError::Field {
                field: format!("{file}: core.{name}"),
                message: "core sections are named by CPU number, e.g. [core.0]".into(),
            })?;
            let prefix = format!("core.{name}");
            if let Some((field, value)) = section
                .iter()
                .find(|(f, _)| SHARDS_ONLY.contains(&f.as_str()))
            {
                return Err(loc.at(
                    value.span(),
                    &format!("{prefix}.{field}"),
                    "is set in [shards] only: it applies to every shard".into(),
                ));
            }
            let settings = apply_section(out.shard_defaults.clone(), section, &prefix, &loc)?;
            out.per_core.insert(cpu, settings);
        }
        for (name, value) in &layout.broker {
            let field = format!("broker.{name}");
            let text_value = match value.get_ref() {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                toml::Value::Float(f) => f.to_string(),
                _ => {
                    return Err(loc.at(
                        value.span(),
                        &field,
                        "expected a string, number or boolean".into(),
                    ))
                }
            };
            out.broker
                .set(name, &text_value)
                .map_err(|e| loc.at(value.span(), &field, e.to_string()))?;
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

fn cores(
    value: &Spanned<toml::Value>,
    field: &str,
    loc: &Locator,
) -> Result<Option<Vec<usize>>, ConfigError> {
    match value.get_ref() {
        toml::Value::String(s) if s == "all" => Ok(None),
        toml::Value::Array(list) if list.is_empty() => {
            Err(loc.at(value.span(), field, "the list is empty".into()))
        }
        toml::Value::Array(list) => list
            .iter()
            .map(|v| match v.as_integer() {
                Some(n) if (0..4096).contains(&n) => Ok(n as usize),
                _ => Err(loc.at(
                    value.span(),
                    field,
                    format!("{v}: a CPU number is within [0, 4095]"),
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        other => Err(loc.at(
            value.span(),
            field,
            format!("{other}: expected \"all\" or a list of CPU numbers"),
        )),
    }
}

fn control_core(
    value: &Spanned<toml::Value>,
    field: &str,
    loc: &Locator,
) -> Result<Option<usize>, ConfigError> {
    match value.get_ref() {
        toml::Value::String(s) if s == "any" => Ok(None),
        toml::Value::Integer(_) => bounded(value, field, 0, 4095, loc).map(|n| Some(n as usize)),
        other => Err(loc.at(
            value.span(),
            field,
            format!("{other}: expected \"any\" or a CPU number within [0, 4095]"),
        )),
    }
}

fn bounded(
    value: &Spanned<toml::Value>,
    field: &str,
    min: u64,
    max: u64,
    loc: &Locator,
) -> Result<u64, ConfigError> {
    match value.get_ref() {
        toml::Value::Integer(n) if *n >= 0 && (min..=max).contains(&(*n as u64)) => Ok(*n as u64),
        toml::Value::Integer(n) => Err(loc.at(
            value.span(),
            field,
            format!("{n} is outside [{min}, {max}]"),
        )),
        other => Err(loc.at(
            value.span(),
            field,
            format!("{other}: expected an integer within [{min}, {max}]"),
        )),
    }
}

fn apply_section(
    mut s: ShardSettings,
    section: &BTreeMap<String, Spanned<toml::Value>>,
    prefix: &str,
    loc: &Locator,
) -> Result<ShardSettings, ConfigError> {
    for (name, value) in section {
        let field = format!("{prefix}.{name}");
        if name == "io_mode" {
            let mode = value.get_ref().as_str().and_then(IoMode::parse);
            s.io_mode = mode.ok_or_else(|| {
                loc.at(
                    value.span(),
                    &field,
                    format!("{}: expected \"direct\" or \"buffered\"", value.get_ref()),
                )
            })?;
            continue;
        }
        let Some(f) = SHARD_FIELDS.iter().find(|f| f.name == name) else {
            let known: Vec<&str> = std::iter::once("io_mode")
                .chain(SHARD_FIELDS.iter().map(|f| f.name))
                .collect();
            return Err(loc.at(
                value.span(),
                &field,
                format!("unknown field (known: {})", known.join(", ")),
            ));
        };
        (f.set)(&mut s, bounded(value, &field, f.min, f.max, loc)?);
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_file_parses() {
        let t = TuningFile::parse(
            "[shards]\ncores = [0, 1]\ncontrol_core = 1\nio_mode = \"buffered\"\nwrite_behind_bytes = 16777216\nrouter_queue_depth = 64\n\n[core.1]\nio_mode = \"direct\"\nuring_entries = 1024\n\n[broker]\n\"num.partitions\" = 4\n\"auto.create.topics.enable\" = false\n",
            "t.toml",
        )
        .unwrap();
        assert_eq!(t.cores, Some(vec![0, 1]));
        assert_eq!(t.control_core, Some(1));
        assert_eq!(t.router_queue_depth, 64);
        assert_eq!(t.shard_for_cpu(0).io_mode, IoMode::Buffered);
        assert_eq!(t.shard_for_cpu(0).uring_entries, 512);
        assert_eq!(t.shard_for_cpu(1).io_mode, IoMode::Direct);
        assert_eq!(t.shard_for_cpu(1).uring_entries, 1024);
        // A core section starts from [shards].
        assert_eq!(t.shard_for_cpu(1).writer.queued_bytes_max, 16 << 20);
        assert_eq!(t.broker.num_partitions, 4);
        assert!(!t.broker.auto_create_topics);
    }

    #[test]
    fn bad_values_name_the_field_the_bound_and_the_line() {
        let cases = [
            (
                "[shards]\n\nrouter_queue_depth = 0\n",
                "t.toml:3: shards.router_queue_depth",
                "[1, 65536]",
            ),
            (
                "[shards]\nwrites_in_flight = 65\n",
                "t.toml:2: shards.writes_in_flight",
                "[1, 64]",
            ),
            (
                "[core.3]\n# a comment\nuring_entries = 8\n",
                "t.toml:3: core.3.uring_entries",
                "[16, 4096]",
            ),
            (
                "[shards]\ncache_bytes = -1\n",
                "t.toml:2: shards.cache_bytes",
                "[0, 68719476736]",
            ),
            (
                "[shards]\nsocket_send_buffer_bytes = \"big\"\n",
                "t.toml:2: shards.socket_send_buffer_bytes",
                "expected an integer within [0, 67108864]",
            ),
            (
                "[shards]\nspeed = 3\n",
                "t.toml:2: shards.speed",
                "unknown field",
            ),
            (
                "[shards]\nio_mode = \"fast\"\n",
                "t.toml:2: shards.io_mode",
                "\"direct\" or \"buffered\"",
            ),
            (
                "[core.1]\nrouter_queue_depth = 4\n",
                "t.toml:2: core.1.router_queue_depth",
                "[shards] only",
            ),
            (
                "[shards]\ncontrol_core = \"fast\"\n",
                "t.toml:2: shards.control_core",
                "\"any\" or a CPU number",
            ),
            (
                "[broker]\n\"num.partitions\" = 0\n",
                "t.toml:2: broker.num.partitions",
                "",
            ),
        ];
        for (text, field, bound) in cases {
            let msg = TuningFile::parse(text, "t.toml").unwrap_err().to_string();
            assert!(msg.contains(field), "{text:?}: {msg}");
            assert!(msg.contains(bound), "{text:?}: {msg}");
        }
    }

    #[test]
    fn the_shipped_profiles_parse_and_default_toml_matches_the_built_in_defaults() {
        let default = TuningFile::parse(include_str!("../../tuning/default.toml"), "default")
            .expect("default.toml");
        assert_eq!(default.shard_defaults, ShardSettings::default());
        assert_eq!(
            default.router_queue_depth,
            TuningFile::default().router_queue_depth
        );
        assert_eq!(default.control_core, None);
        for (name, text) in [
            ("throughput", include_str!("../../tuning/throughput.toml")),
            ("latency", include_str!("../../tuning/latency.toml")),
            ("small-host", include_str!("../../tuning/small-host.toml")),
        ] {
            let t = TuningFile::parse(text, name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_ne!(
                t.shard_defaults,
                ShardSettings::default(),
                "{name} tunes something"
            );
        }
    }
}
