//! `ferrite acl add|remove|list`: ACLs made before any broker runs (or beside running
//! brokers, in ZooKeeper), with kafka-acls.sh's option names, so the first rules (an admin's,
//! the brokers' own) exist before anyone connects:
//! - with `--data-dir`, in `meta/acls.json`, under the directory's lock (a running broker takes
//!   ACLs through CreateAcls and DeleteAcls);
//! - with `--zookeeper`, in Kafka's `/kafka-acl` znodes with a change notification, which every
//!   running broker of the cluster applies at once.

use crate::cli::{AclArgs, AclCommand, AclSpec};
use crate::cluster;
use crate::config::ZkConnect;
use crate::metadata::store;
use crate::security::acl::{
    self, AccessEntry, AclBinding, AclTable, Operation, PatternType, Permission, ResourcePattern,
    ResourceType,
};
use std::collections::BTreeSet;

/// Runs one `ferrite acl` command; the error is what to print.
pub fn run(args: &AclArgs) -> Result<(), String> {
    smol::block_on(async {
        match (&args.data_dir, &args.zookeeper) {
            (Some(dir), None) => {
                let _lock = crate::server::claims::lock_data_dir(dir).map_err(|e| e.to_string())?;
                let mut table = store::load_acls(dir).map_err(|e| e.to_string())?;
                if apply(&mut table, &args.command)? {
                    store::save_acls_blocking(dir, &table).map_err(|e| e.to_string())?;
                }
                Ok(())
            }
            (None, Some(connect)) => {
                let connect = ZkConnect::parse(connect).map_err(|e| e.to_string())?;
                let client = cluster::admin_client(&connect)
                    .await
                    .map_err(|e| format!("ZooKeeper {}: {e}", connect.servers))?;
                let before = cluster::acls::read(&client)
                    .await
                    .map_err(|e| e.to_string())?;
                let mut after = before.clone();
                if apply(&mut after, &args.command)? {
                    let patterns: BTreeSet<&ResourcePattern> =
                        before.keys().chain(after.keys()).collect();
                    for p in patterns
                        .into_iter()
                        .filter(|p| before.get(*p) != after.get(*p))
                    {
                        let entries = after.get(p).cloned().unwrap_or_default();
                        cluster::acls::write(&client, p, &entries).await?;
                    }
                }
                Ok(())
            }
            _ => Err("give exactly one of --data-dir and --zookeeper".into()),
        }
    })
}

/// Carries out `command` on `table`; whether it changed.
fn apply(table: &mut AclTable, command: &AclCommand) -> Result<bool, String> {
    match command {
        AclCommand::List => {
            for b in acl::bindings(table) {
                println!("{}", describe(&b));
            }
            Ok(false)
        }
        AclCommand::Add(spec) => {
            for b in bindings_of(spec)? {
                println!("added: {}", describe(&b));
                table.entry(b.pattern).or_default().insert(b.entry);
            }
            Ok(true)
        }
        AclCommand::Remove(spec) => {
            for b in bindings_of(spec)? {
                let removed = table
                    .get_mut(&b.pattern)
                    .is_some_and(|e| e.remove(&b.entry));
                if !removed {
                    return Err(format!("no such ACL: {}", describe(&b)));
                }
                if table.get(&b.pattern).is_some_and(BTreeSet::is_empty) {
                    table.remove(&b.pattern);
                }
                println!("removed: {}", describe(&b));
            }
            Ok(true)
        }
    }
}

/// One line per ACL, in kafka-acls.sh's words.
fn describe(b: &AclBinding) -> String {
    format!(
        "{}:{}:{} principal={} host={} operation={} permission={}",
        b.pattern.resource_type.name(),
        b.pattern.pattern_type.enum_name(),
        b.pattern.name,
        b.entry.principal,
        b.entry.host,
        b.entry.operation.name(),
        b.entry.permission.name()
    )
}

/// Every (principal, operation) pair of `spec` on its resource.
fn bindings_of(spec: &AclSpec) -> Result<Vec<AclBinding>, String> {
    let (resource_type, name) = match (
        &spec.topic,
        &spec.group,
        &spec.transactional_id,
        spec.cluster,
    ) {
        (Some(t), None, None, false) => (ResourceType::Topic, t.clone()),
        (None, Some(g), None, false) => (ResourceType::Group, g.clone()),
        (None, None, Some(t), false) => (ResourceType::TransactionalId, t.clone()),
        (None, None, None, true) => (ResourceType::Cluster, "kafka-cluster".to_string()),
        _ => {
            return Err(
                "name one resource: --topic, --group, --transactional-id or --cluster".into(),
            )
        }
    };
    if name.is_empty() || name.contains('/') {
        return Err(format!("{name:?} is not a resource name an ACL can hold"));
    }
    let pattern_type = match spec.pattern_type.to_ascii_lowercase().as_str() {
        "literal" => PatternType::Literal,
        "prefixed" => PatternType::Prefixed,
        other => {
            return Err(format!(
                "--resource-pattern-type {other}: literal or prefixed"
            ))
        }
    };
    if spec.allow.is_empty() && spec.deny.is_empty() {
        return Err("give --allow-principal or --deny-principal".into());
    }
    let mut out = Vec::new();
    let principals = spec
        .allow
        .iter()
        .map(|p| (p, Permission::Allow))
        .chain(spec.deny.iter().map(|p| (p, Permission::Deny)));
    for (principal, permission) in principals {
        if !principal
            .split_once(':')
            .is_some_and(|(t, n)| !t.is_empty() && !n.is_empty())
        {
            return Err(format!(
                "{principal:?} is not Type:name (User:alice, User:*)"
            ));
        }
        for op in &spec.operations {
            let operation = Operation::ALL
                .into_iter()
                .find(|o| o.name().eq_ignore_ascii_case(op))
                .ok_or_else(|| format!("--operation {op}: not an ACL operation"))?;
            out.push(AclBinding {
                pattern: ResourcePattern {
                    resource_type,
                    name: name.clone(),
                    pattern_type,
                },
                entry: AccessEntry {
                    principal: principal.clone(),
                    host: spec.host.clone(),
                    operation,
                    permission,
                },
            });
        }
    }
    Ok(out)
}
