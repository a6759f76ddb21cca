//! The command line: `ferrite serve` and its flags, resolved over the tuning file.

use crate::config::{online_cpus, BrokerConfig, ConfigError, TuningFile};
use clap::{Parser, Subcommand};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};

#[derive(Parser, Debug)]
#[command(
    name = "ferrite",
    version,
    about = "A Kafka-compatible, thread-per-core message broker"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the broker until SIGTERM or SIGINT.
    Serve(ServeArgs),
    /// Check this host against what a broker needs (nothing is changed).
    Tune(TuneArgs),
}

#[derive(clap::Args, Debug, Clone)]
pub struct TuneArgs {
    /// Report each setting with its current and recommended value.
    #[arg(long, required = true)]
    pub check: bool,
    /// The shards the broker would run (default: every online core).
    #[arg(long, value_name = "N")]
    pub cores: Option<usize>,
    /// The data directory whose disk is checked.
    #[arg(long, value_name = "DIR", default_value = "./data")]
    pub data_dir: PathBuf,
}

impl TuneArgs {
    /// The cores shards would run on, and the directory to check (its nearest existing parent).
    pub fn resolve(&self) -> (Vec<usize>, PathBuf) {
        let mut cores = online_cpus();
        if let Some(n) = self.cores {
            cores.truncate(n.max(1));
        }
        let mut dir = self.data_dir.clone();
        while !dir.exists() {
            match dir.parent() {
                Some(p) if !p.as_os_str().is_empty() => dir = p.to_path_buf(),
                _ => {
                    dir = PathBuf::from(".");
                    break;
                }
            }
        }
        (cores, dir)
    }
}

#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// Tuning file (default: tuning/default.toml when present).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address to listen on.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:9092")]
    pub listen: String,
    /// Address given to clients in Metadata (default: the listen address).
    #[arg(long, value_name = "HOST:PORT")]
    pub advertised: Option<String>,
    /// Where partitions and metadata live.
    #[arg(long, value_name = "DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    /// Shards to run, one per core (default: every core the tuning file names, else every
    /// online core).
    #[arg(long, value_name = "N")]
    pub cores: Option<usize>,
    /// This broker's id.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub node_id: i32,
    /// ZooKeeper connection (cluster mode); without it the broker runs alone.
    #[arg(long, value_name = "HOST:PORT[/CHROOT]")]
    pub zookeeper: Option<String>,
    /// Log level or filter (`info`, `debug`, `ferrite=debug`); RUST_LOG also works.
    #[arg(long, value_name = "LEVEL")]
    pub log_level: Option<String>,
    /// Log lines as `text` (human) or `json` (one object per line, for log pipelines).
    #[arg(long, value_name = "FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
    /// Prometheus endpoint (`GET /metrics`); port 0 picks a free one, `off` turns it off.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:9644")]
    pub metrics: String,
    /// A broker setting by its Kafka name, over the tuning file (repeatable).
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub settings: Vec<String>,
}

fn resolve_addr(flag: &str, s: &str) -> Result<SocketAddr, ConfigError> {
    s.to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| ConfigError::Field {
            field: flag.into(),
            message: format!("{s:?} is not HOST:PORT"),
        })
}

fn split_host_port(flag: &str, s: &str) -> Result<(String, u16), ConfigError> {
    let bad = || ConfigError::Field {
        field: flag.into(),
        message: format!("{s:?} is not HOST:PORT"),
    };
    let (host, port) = s.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    if host.is_empty() {
        return Err(bad());
    }
    Ok((
        host.trim_matches(|c| c == '[' || c == ']').to_string(),
        port,
    ))
}

impl ServeArgs {
    pub fn resolve(&self) -> Result<BrokerConfig, ConfigError> {
        let default_file = Path::new("tuning/default.toml");
        let tuning = match &self.config {
            Some(path) => TuningFile::load(path)?,
            None if default_file.exists() => TuningFile::load(default_file)?,
            None => TuningFile::default(),
        };
        let listen = resolve_addr("--listen", &self.listen)?;
        let (advertised_host, advertised_port) = match &self.advertised {
            Some(a) => split_host_port("--advertised", a)?,
            None => {
                let (host, port) = split_host_port("--listen", &self.listen)?;
                let host = if host == "0.0.0.0" || host == "::" {
                    "127.0.0.1".to_string()
                } else {
                    host
                };
                (host, port)
            }
        };
        let online = online_cpus();
        let candidates = match &tuning.cores {
            Some(list) => {
                if let Some(c) = list.iter().find(|c| !online.contains(c)) {
                    return Err(ConfigError::Field {
                        field: "shards.cores".into(),
                        message: format!("CPU {c} is not online here (online: {online:?})"),
                    });
                }
                list.clone()
            }
            None => online.clone(),
        };
        let cores = match self.cores {
            None => candidates,
            Some(0) => {
                return Err(ConfigError::Field {
                    field: "--cores".into(),
                    message: "at least one core".into(),
                })
            }
            Some(n) if n > candidates.len() => {
                return Err(ConfigError::Field {
                    field: "--cores".into(),
                    message: format!(
                        "{n} cores asked, {} available ({candidates:?})",
                        candidates.len()
                    ),
                })
            }
            Some(n) => candidates[..n].to_vec(),
        };
        let mut broker = tuning.broker.clone();
        for s in &self.settings {
            let (name, value) = s.split_once('=').ok_or_else(|| ConfigError::Field {
                field: "--set".into(),
                message: format!("{s:?} is not NAME=VALUE"),
            })?;
            broker.set(name.trim(), value.trim())?;
        }
        if self.node_id < 0 {
            return Err(ConfigError::Field {
                field: "--node-id".into(),
                message: "must be 0 or more".into(),
            });
        }
        if let Some(c) = tuning.control_core.filter(|c| !online.contains(c)) {
            return Err(ConfigError::Field {
                field: "shards.control_core".into(),
                message: format!("CPU {c} is not online here (online: {online:?})"),
            });
        }
        Ok(BrokerConfig {
            listen,
            control_core: tuning.control_core,
            router_queue_depth: tuning.router_queue_depth,
            advertised_host,
            advertised_port,
            data_dir: self.data_dir.clone(),
            shards: cores.iter().map(|&c| tuning.shard_for_cpu(c)).collect(),
            cores,
            node_id: self.node_id,
            zookeeper: self.zookeeper.clone(),
            metrics: match self.metrics.as_str() {
                "off" => None,
                addr => Some(resolve_addr("--metrics", addr)?),
            },
            broker,
        })
    }
}
