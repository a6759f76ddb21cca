//! The command line: `ferrite serve` and its flags, resolved over the tuning file.

use crate::config::{
    online_cpus, BrokerConfig, ConfigError, ListenerSettings, Listeners, SecuritySettings,
    TuningFile,
};
use crate::security::acl::AuthorizerSettings;
use clap::{ArgGroup, Parser, Subcommand};
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
    /// Check this host against what a broker needs (--check), or apply what can be (--apply).
    Tune(TuneArgs),
    /// Add, list or delete SCRAM users while no broker runs on the data directory (or in
    /// ZooKeeper, where every broker of the cluster reads them).
    User(UserArgs),
    /// Add, list or remove ACLs while no broker runs on the data directory (or in ZooKeeper),
    /// with kafka-acls.sh's options; a running broker takes them through CreateAcls.
    Acl(AclArgs),
}

/// `ferrite acl`: exactly one of `--data-dir` and `--zookeeper`, as for `ferrite user`.
#[derive(clap::Args, Debug, Clone)]
pub struct AclArgs {
    #[command(subcommand)]
    pub command: AclCommand,
    /// The single broker's data directory (its `meta/acls.json`).
    #[arg(long, value_name = "DIR", global = true)]
    pub data_dir: Option<PathBuf>,
    /// The cluster's ZooKeeper, `HOST:PORT[,HOST:PORT...][/chroot]` (`/kafka-acl/...`).
    #[arg(long, value_name = "CONNECT", global = true)]
    pub zookeeper: Option<String>,
}

#[derive(Subcommand, Debug, Clone)]
pub enum AclCommand {
    /// Add ACLs: each principal, each operation, on the resource.
    Add(AclSpec),
    /// Remove exactly these ACLs.
    Remove(AclSpec),
    /// Print every ACL, one per line.
    List,
}

/// What an ACL names, with kafka-acls.sh's option names.
#[derive(clap::Args, Debug, Clone)]
pub struct AclSpec {
    /// `User:name` (or `User:*`) to allow (repeatable).
    #[arg(long = "allow-principal", value_name = "PRINCIPAL")]
    pub allow: Vec<String>,
    /// `User:name` (or `User:*`) to deny (repeatable).
    #[arg(long = "deny-principal", value_name = "PRINCIPAL")]
    pub deny: Vec<String>,
    /// Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs,
    /// AlterConfigs, IdempotentWrite or All (repeatable).
    #[arg(long = "operation", value_name = "OPERATION", required = true)]
    pub operations: Vec<String>,
    /// The host the ACL applies to (default `*`, every host).
    #[arg(long, value_name = "HOST", default_value = "*")]
    pub host: String,
    #[arg(long, value_name = "NAME", group = "resource")]
    pub topic: Option<String>,
    #[arg(long, value_name = "NAME", group = "resource")]
    pub group: Option<String>,
    #[arg(long = "transactional-id", value_name = "ID", group = "resource")]
    pub transactional_id: Option<String>,
    /// The cluster resource (`kafka-cluster`).
    #[arg(long, group = "resource")]
    pub cluster: bool,
    /// literal (the name itself, or `*` for every name) or prefixed.
    #[arg(
        long = "resource-pattern-type",
        value_name = "TYPE",
        default_value = "literal"
    )]
    pub pattern_type: String,
}

/// Exactly one of `--data-dir` and `--zookeeper` (checked when run: they may follow the
/// subcommand, where clap's groups do not see them).
#[derive(clap::Args, Debug, Clone)]
pub struct UserArgs {
    #[command(subcommand)]
    pub command: UserCommand,
    /// The single broker's data directory (its `meta/users.json`).
    #[arg(long, value_name = "DIR", global = true)]
    pub data_dir: Option<PathBuf>,
    /// The cluster's ZooKeeper, `HOST:PORT[,HOST:PORT...][/chroot]` (`/config/users/<name>`).
    #[arg(long, value_name = "CONNECT", global = true)]
    pub zookeeper: Option<String>,
}

#[derive(Subcommand, Debug, Clone)]
pub enum UserCommand {
    /// Store a salted SCRAM credential for NAME; the password is the first line of standard
    /// input.
    Add {
        name: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512.
        #[arg(long)]
        mechanism: String,
        /// Read the password from standard input (the only way: it never appears in `ps`).
        #[arg(long, required = true)]
        password_stdin: bool,
        /// PBKDF2 iterations (Kafka takes 4096 to 16384).
        #[arg(long, default_value_t = 4096)]
        iterations: u32,
    },
    /// Each user with its mechanisms and iteration counts.
    List,
    /// Remove a user's credentials (one mechanism's with --mechanism).
    Delete {
        name: String,
        #[arg(long)]
        mechanism: Option<String>,
    },
}

/// What `ferrite tune` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TuneMode {
    /// Report only; nothing is changed.
    Check,
    /// Write the recommended values, after backing up the originals under this directory.
    Apply { backup_dir: PathBuf },
}

#[derive(clap::Args, Debug, Clone)]
#[command(group(ArgGroup::new("mode").required(true).args(["check", "apply"])))]
pub struct TuneArgs {
    /// Report each setting with its current and recommended value; change nothing.
    #[arg(long)]
    pub check: bool,
    /// Write the recommended value of each setting that a file write changes, back up the
    /// originals with a restore.sh, and say what could not be applied.
    #[arg(long)]
    pub apply: bool,
    /// Where --apply backs up what it changes (a new subdirectory per run, named by UTC time).
    #[arg(
        long,
        value_name = "DIR",
        default_value = "./tune-backup",
        conflicts_with = "check"
    )]
    pub backup_dir: PathBuf,
    /// Prefix of every /proc and /sys path read or written (tests point it at a fake tree).
    #[arg(long, value_name = "DIR", default_value = "/", hide = true)]
    pub root: PathBuf,
    /// The shards the broker would run (default: every online core).
    #[arg(long, value_name = "N")]
    pub cores: Option<usize>,
    /// The data directory whose disk is checked.
    #[arg(long, value_name = "DIR", default_value = "./data")]
    pub data_dir: PathBuf,
}

impl TuneArgs {
    pub fn mode(&self) -> TuneMode {
        debug_assert!(
            self.check != self.apply,
            "clap makes them exclusive and one required"
        );
        if self.apply {
            TuneMode::Apply {
                backup_dir: self.backup_dir.clone(),
            }
        } else {
            TuneMode::Check
        }
    }

    /// The tree /proc and /sys are under, as an absolute path without links.
    pub fn root(&self) -> Result<PathBuf, ConfigError> {
        std::fs::canonicalize(&self.root).map_err(|e| ConfigError::Field {
            field: "--root".into(),
            message: format!("{}: {e}", self.root.display()),
        })
    }

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
    /// Address of the one PLAINTEXT listener (default 127.0.0.1:9092); Kafka's `listeners`
    /// setting (`--set listeners=...`) replaces it.
    #[arg(long, value_name = "HOST:PORT")]
    pub listen: Option<String>,
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

/// The one PLAINTEXT listener's address when neither `--listen` nor `listeners` is given.
const DEFAULT_LISTEN: &str = "127.0.0.1:9092";

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
    /// Kafka's `listeners` settings when given, else the one PLAINTEXT listener of `--listen`
    /// and `--advertised` (both ways at once is refused: which one was meant is not clear).
    fn listeners(&self, security: &SecuritySettings) -> Result<Listeners, ConfigError> {
        if security.get("listeners").is_some() {
            if let Some(flag) = [
                ("--listen", &self.listen),
                ("--advertised", &self.advertised),
            ]
            .iter()
            .find_map(|(flag, v)| v.is_some().then_some(flag))
            {
                return Err(ConfigError::Field {
                    field: flag.to_string(),
                    message: "give either it or the listeners setting, not both".into(),
                });
            }
            return Listeners::from_settings(&ListenerSettings {
                listeners: security.get("listeners"),
                advertised_listeners: security.get("advertised.listeners"),
                protocol_map: security.get("listener.security.protocol.map"),
                inter_broker_listener_name: security.get("inter.broker.listener.name"),
                security_inter_broker_protocol: security.get("security.inter.broker.protocol"),
            });
        }
        let listen = self.listen.as_deref().unwrap_or(DEFAULT_LISTEN);
        let bind = resolve_addr("--listen", listen)?;
        let (host, port) = match &self.advertised {
            Some(a) => split_host_port("--advertised", a)?,
            None => {
                let (host, port) = split_host_port("--listen", listen)?;
                let host = if host == "0.0.0.0" || host == "::" {
                    "127.0.0.1".to_string()
                } else {
                    host
                };
                (host, port)
            }
        };
        Ok(Listeners::plaintext(bind, host, port))
    }

    pub fn resolve(&self) -> Result<BrokerConfig, ConfigError> {
        let default_file = Path::new("tuning/default.toml");
        let tuning = match &self.config {
            Some(path) => TuningFile::load(path)?,
            None if default_file.exists() => TuningFile::load(default_file)?,
            None => TuningFile::default(),
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
        let listeners = self.listeners(&broker.security)?;
        let security = &broker.security;
        let authorizer = AuthorizerSettings::from_settings(
            security.get("authorizer.class.name"),
            security.get("super.users"),
            security.get("allow.everyone.if.no.acl.found"),
        )
        .map_err(|message| ConfigError::Field {
            field: "authorizer.class.name".into(),
            message,
        })?;
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
            listeners,
            authorizer,
            control_core: tuning.control_core,
            router_queue_depth: tuning.router_queue_depth,
            data_dir: self.data_dir.clone(),
            shards: cores.iter().map(|&c| tuning.shard_for_cpu(c)).collect(),
            cores,
            node_id: self.node_id,
            zookeeper: self
                .zookeeper
                .as_deref()
                .map(crate::config::ZkConnect::parse)
                .transpose()?,
            metrics: match self.metrics.as_str() {
                "off" => None,
                addr => Some(resolve_addr("--metrics", addr)?),
            },
            broker,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tune(args: &[&str]) -> Result<TuneArgs, clap::Error> {
        let argv = ["ferrite", "tune"].iter().chain(args);
        match Cli::try_parse_from(argv)?.command {
            Command::Tune(t) => Ok(t),
            Command::Serve(_) | Command::User(_) | Command::Acl(_) => {
                unreachable!("parsed `tune`")
            }
        }
    }

    #[test]
    fn tune_takes_exactly_one_of_check_and_apply() {
        assert_eq!(tune(&["--check"]).unwrap().mode(), TuneMode::Check);
        assert_eq!(
            tune(&["--apply"]).unwrap().mode(),
            TuneMode::Apply {
                backup_dir: "./tune-backup".into()
            }
        );
        assert_eq!(
            tune(&["--apply", "--backup-dir", "/b"]).unwrap().mode(),
            TuneMode::Apply {
                backup_dir: "/b".into()
            }
        );
        assert!(tune(&[]).is_err());
        assert!(tune(&["--check", "--apply"]).is_err());
        assert!(tune(&["--check", "--backup-dir", "/b"]).is_err());
        for bad in [tune(&[]), tune(&["--check", "--apply"])] {
            assert_eq!(bad.unwrap_err().exit_code(), 2);
        }
    }

    #[test]
    fn tune_root_is_the_host_unless_given() {
        assert_eq!(tune(&["--check"]).unwrap().root, PathBuf::from("/"));
        let t = tune(&["--check", "--root", "/tmp"]).unwrap();
        assert_eq!(t.root().unwrap(), std::fs::canonicalize("/tmp").unwrap());
        assert!(tune(&["--check", "--root", "/no/such/dir"])
            .unwrap()
            .root()
            .is_err());
    }
}
