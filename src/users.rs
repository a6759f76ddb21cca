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
use std::path::Path;

/// Runs one `ferrite user` command; the error is what to print.
pub fn run(args: &UserArgs) -> Result<(), String> {
    if let UserCommand::Add { name, .. } | UserCommand::Delete { name, .. } = &args.command {
        if name.is_empty() {
            return Err("a user name cannot be empty".into());
        }
    }
    match (&args.data_dir, &args.zookeeper) {
        (Some(dir), None) => with_data_dir(dir, &args.command),
        (None, Some(connect)) => {
            let connect = ZkConnect::parse(connect).map_err(|e| e.to_string())?;
            smol::block_on(with_zookeeper(&connect, &args.command))
        }
        _ => Err("give exactly one of --data-dir and --zookeeper".into()),
    }
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

fn with_data_dir(dir: &Path, command: &UserCommand) -> Result<(), String> {
    let _lock = crate::server::claims::lock_data_dir(dir).map_err(|e| e.to_string())?;
    let mut users: ScramUsers = store::load_users(dir).map_err(|e| e.to_string())?;
    match command {
        UserCommand::Add {
            name,
            mechanism,
            iterations,
            ..
        } => {
            let mechanism = mechanism_of(mechanism)?;
            let credential = new_credential(mechanism, *iterations)?;
            users
                .entry(name.clone())
                .or_default()
                .insert(mechanism.name().to_string(), credential.to_kafka_string());
            store::save_users_blocking(dir, &users).map_err(|e| e.to_string())?;
            println!(
                "user {name}: {} credential stored in {}",
                mechanism.name(),
                dir.display()
            );
        }
        UserCommand::List => {
            for (name, credentials) in &users {
                if let Some(line) = describe(name, credentials) {
                    println!("{line}");
                }
            }
        }
        UserCommand::Delete { name, mechanism } => {
            let removed = remove(users.get_mut(name), mechanism.as_deref())?;
            if users.get(name).is_some_and(BTreeMap::is_empty) {
                users.remove(name);
            }
            if !removed {
                return Err(format!("no such user: {name}"));
            }
            store::save_users_blocking(dir, &users).map_err(|e| e.to_string())?;
            println!("user {name}: deleted");
        }
    }
    Ok(())
}

/// Removes one mechanism's credential, or all of them; whether there was one.
fn remove(
    credentials: Option<&mut BTreeMap<String, String>>,
    mechanism: Option<&str>,
) -> Result<bool, String> {
    let Some(credentials) = credentials else {
        return Ok(false);
    };
    Ok(match mechanism {
        Some(m) => credentials.remove(mechanism_of(m)?.name()).is_some(),
        None => {
            let before = credentials.len();
            credentials.retain(|k, _| Mechanism::from_name(k).is_none());
            credentials.len() != before
        }
    })
}

async fn with_zookeeper(connect: &ZkConnect, command: &UserCommand) -> Result<(), String> {
    let client = cluster::admin_client(connect)
        .await
        .map_err(|e| format!("ZooKeeper {}: {e}", connect.servers))?;
    let user_config = |name: &str| {
        let stored = EntityName::Named(name.to_string()).stored();
        (
            format!("{}/{stored}", znodes::USER_CONFIGS),
            format!("users/{stored}"),
        )
    };
    let read = |path: String| {
        let client = &client;
        async move {
            match client.get_data(&path).await {
                Ok((bytes, _)) => {
                    znodes::decode::<znodes::EntityConfig>(&path, &bytes).map(|c| c.config)
                }
                Err(zookeeper_client::Error::NoNode) => Ok(BTreeMap::new()),
                Err(e) => Err(e.to_string()),
            }
        }
    };
    match command {
        UserCommand::Add {
            name,
            mechanism,
            iterations,
            ..
        } => {
            let mechanism = mechanism_of(mechanism)?;
            let credential = new_credential(mechanism, *iterations)?;
            let (path, entity) = user_config(name);
            let mut config = read(path.clone()).await?;
            config.insert(mechanism.name().to_string(), credential.to_kafka_string());
            requests::write_entity_config(&client, &path, &entity, config).await?;
            println!(
                "user {name}: {} credential stored in ZooKeeper at {path}",
                mechanism.name()
            );
        }
        UserCommand::List => {
            let mut names = client
                .list_children(znodes::USER_CONFIGS)
                .await
                .map_err(|e| e.to_string())?;
            names.sort();
            for stored in names {
                let Some(EntityName::Named(name)) = EntityName::from_stored(&stored) else {
                    continue;
                };
                let config = read(format!("{}/{stored}", znodes::USER_CONFIGS)).await?;
                if let Some(line) = describe(&name, &config) {
                    println!("{line}");
                }
            }
        }
        UserCommand::Delete { name, mechanism } => {
            let (path, entity) = user_config(name);
            let mut config = read(path.clone()).await?;
            if !remove(Some(&mut config), mechanism.as_deref())? {
                return Err(format!("no such user: {name}"));
            }
            requests::write_entity_config(&client, &path, &entity, config).await?;
            println!("user {name}: deleted");
        }
    }
    Ok(())
}
