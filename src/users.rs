//! `ferrite user add|list|delete`: SCRAM users (SCRAM-SHA-256, SCRAM-SHA-512) made before any
//! broker runs, as Kafka's `kafka-configs.sh --alter --add-config 'SCRAM-SHA-256=[...]'` makes
//! the first one. Only the salted credential is kept (`security::scram`), never the password:
//! - with `--data-dir`, in `meta/users.json`, under the directory's lock, so this refuses while
//!   a broker runs there (a running broker takes users through AlterUserScramCredentials);
//! - with `--zookeeper`, in `/config/users/<name>` under the mechanism's name, Kafka's layout,
//!   beside any quotas of the user, with a `/config/changes` notification.

use crate::cli::{UserArgs, UserCommand};
use crate::cluster::{self, requests, znodes};
use crate::config::ZkConnect;
use crate::metadata::client_quotas::EntityName;
use crate::metadata::store::{self, ScramUsers};
use crate::security::scram::{self, Credential, Mechanism};
use std::collections::BTreeMap;
use std::io::Read;

/// Runs one `ferrite user` command; the error is what to print.
pub fn run(args: &UserArgs) -> Result<(), String> {
    if let UserCommand::Add { name, .. } | UserCommand::Delete { name, .. } = &args.command {
        if name.is_empty() {
            return Err("a user name cannot be empty".into());
        }
    }
    smol::block_on(async {
        let store = match (&args.data_dir, &args.zookeeper) {
            (Some(dir), None) => {
                let lock = crate::server::claims::lock_data_dir(dir).map_err(|e| e.to_string())?;
                Store::DataDir {
                    dir: dir.clone(),
                    users: store::load_users(dir).map_err(|e| e.to_string())?,
                    _lock: lock,
                }
            }
            (None, Some(connect)) => {
                let connect = ZkConnect::parse(connect).map_err(|e| e.to_string())?;
                let client = cluster::admin_client(&connect)
                    .await
                    .map_err(|e| format!("ZooKeeper {}: {e}", connect.servers))?;
                Store::ZooKeeper { client }
            }
            _ => return Err("give exactly one of --data-dir and --zookeeper".into()),
        };
        run_on(store, &args.command).await
    })
}

/// The credential for `add`, its password read from standard input (one line).
fn new_credential(mechanism: Mechanism, iterations: u32) -> Result<Credential, String> {
    if !(scram::MIN_ITERATIONS..=scram::MAX_ITERATIONS).contains(&iterations) {
        return Err(format!(
            "--iterations {iterations}: SCRAM needs {} to {}",
            scram::MIN_ITERATIONS,
            scram::MAX_ITERATIONS
        ));
    }
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .map_err(|e| format!("reading the password from standard input: {e}"))?;
    let password = input.lines().next().unwrap_or_default();
    if password.is_empty() {
        return Err("no password on standard input".into());
    }
    Ok(Credential::new(
        mechanism,
        password.as_bytes(),
        &scram::random_bytes(32),
        iterations,
    ))
}

fn mechanism_of(name: &str) -> Result<Mechanism, String> {
    Mechanism::from_name(name)
        .ok_or_else(|| format!("--mechanism {name}: use SCRAM-SHA-256 or SCRAM-SHA-512"))
}

/// One user's mechanisms with their iteration counts, for `list`.
fn describe(name: &str, credentials: &BTreeMap<String, String>) -> Option<String> {
    let parts: Vec<String> = credentials
        .iter()
        .filter(|(m, _)| Mechanism::from_name(m).is_some())
        .map(|(m, text)| match Credential::from_kafka_string(text) {
            Ok(c) => format!("{m} iterations={}", c.iterations),
            Err(e) => format!("{m} (unreadable: {e})"),
        })
        .collect();
    (!parts.is_empty()).then(|| format!("{name}: {}", parts.join(", ")))
}

/// Where users are kept: a data directory (locked while the tool runs) or ZooKeeper. Each
/// user is its config map; in ZooKeeper that map may hold other configs (quotas), which are
/// written back untouched.
enum Store {
    DataDir {
        dir: std::path::PathBuf,
        users: ScramUsers,
        _lock: std::fs::File,
    },
    ZooKeeper {
        client: zookeeper_client::Client,
    },
}

impl Store {
    async fn config(&self, name: &str) -> Result<BTreeMap<String, String>, String> {
        match self {
            Store::DataDir { users, .. } => Ok(users.get(name).cloned().unwrap_or_default()),
            Store::ZooKeeper { client } => {
                requests::read_entity_config(client, &znodes::user_config_path(name).0).await
            }
        }
    }

    async fn put(&mut self, name: &str, config: BTreeMap<String, String>) -> Result<(), String> {
        match self {
            Store::DataDir { dir, users, .. } => {
                if config.is_empty() {
                    users.remove(name);
                } else {
                    users.insert(name.to_string(), config);
                }
                store::save_users_blocking(dir, users).map_err(|e| e.to_string())
            }
            Store::ZooKeeper { client } => {
                let (path, entity) = znodes::user_config_path(name);
                requests::write_entity_config(client, &path, &entity, config).await
            }
        }
    }

    async fn names(&self) -> Result<Vec<String>, String> {
        let mut names: Vec<String> = match self {
            Store::DataDir { users, .. } => users.keys().cloned().collect(),
            Store::ZooKeeper { client } => client
                .list_children(znodes::USER_CONFIGS)
                .await
                .map_err(|e| e.to_string())?
                .iter()
                .filter_map(|stored| match EntityName::from_stored(stored)? {
                    EntityName::Named(name) => Some(name),
                    EntityName::Default => None,
                })
                .collect(),
        };
        names.sort();
        Ok(names)
    }

    fn place(&self, name: &str) -> String {
        match self {
            Store::DataDir { dir, .. } => format!("in {}", dir.display()),
            Store::ZooKeeper { .. } => {
                format!("in ZooKeeper at {}", znodes::user_config_path(name).0)
            }
        }
    }
}

async fn run_on(mut store: Store, command: &UserCommand) -> Result<(), String> {
    match command {
        UserCommand::Add {
            name,
            mechanism,
            iterations,
            ..
        } => {
            let mechanism = mechanism_of(mechanism)?;
            let credential = new_credential(mechanism, *iterations)?;
            let mut config = store.config(name).await?;
            config.insert(mechanism.name().to_string(), credential.to_kafka_string());
            store.put(name, config).await?;
            println!(
                "user {name}: {} credential stored {}",
                mechanism.name(),
                store.place(name)
            );
        }
        UserCommand::List => {
            for name in store.names().await? {
                if let Some(line) = describe(&name, &store.config(&name).await?) {
                    println!("{line}");
                }
            }
        }
        UserCommand::Delete { name, mechanism } => {
            let mut config = store.config(name).await?;
            if !remove(&mut config, mechanism.as_deref())? {
                return Err(format!("no such user: {name}"));
            }
            store.put(name, config).await?;
            println!("user {name}: deleted");
        }
    }
    Ok(())
}

/// Removes one mechanism's credential, or all of them; whether there was one.
fn remove(
    credentials: &mut BTreeMap<String, String>,
    mechanism: Option<&str>,
) -> Result<bool, String> {
    Ok(match mechanism {
        Some(m) => credentials.remove(mechanism_of(m)?.name()).is_some(),
        None => {
            let before = credentials.len();
            credentials.retain(|k, _| Mechanism::from_name(k).is_none());
            credentials.len() != before
        }
    })
}
