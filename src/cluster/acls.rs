//! ACLs in ZooKeeper where Kafka's `AclAuthorizer` keeps them (`ZkAclStore`):
//!
//! - LITERAL patterns in `/kafka-acl/<ResourceType>/<name>`, PREFIXED ones in
//!   `/kafka-acl-extended/prefixed/<ResourceType>/<name>`, each holding
//!   `{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}`;
//! - after each change a sequential `acl_changes_` notification: under `/kafka-acl-changes`
//!   naming the literal pattern as `<ResourceType>:<name>`, under
//!   `/kafka-acl-extended-changes` as JSON with the pattern type, so Kafka brokers sharing the
//!   ZooKeeper reload that resource. Ferrite's control threads see the znodes themselves.

use super::zk::{create_if_missing, delete_if_present, persistent_sequential};
use crate::security::acl::{
    AccessEntry, AclTable, Operation, PatternType, Permission, ResourcePattern, ResourceType,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use zookeeper_client::{Client, Error};

const LITERAL_ROOT: &str = "/kafka-acl";
const LITERAL_CHANGES: &str = "/kafka-acl-changes";
const EXTENDED_ROOT: &str = "/kafka-acl-extended";
const PREFIXED_ROOT: &str = "/kafka-acl-extended/prefixed";
const EXTENDED_CHANGES: &str = "/kafka-acl-extended-changes";

/// A pattern's znode.
#[derive(Debug, Serialize, Deserialize)]
struct AclZnode {
    version: i32,
    acls: Vec<ZkEntry>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ZkEntry {
    principal: String,
    permission_type: String,
    operation: String,
    host: String,
}

/// The extended change notification.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ExtendedChange<'a> {
    version: i32,
    resource_type: &'a str,
    name: &'a str,
    pattern_type: &'a str,
}

fn root_of(pattern_type: PatternType) -> &'static str {
    match pattern_type {
        PatternType::Literal => LITERAL_ROOT,
        PatternType::Prefixed => PREFIXED_ROOT,
    }
}

pub fn znode_path(pattern: &ResourcePattern) -> String {
    format!(
        "{}/{}/{}",
        root_of(pattern.pattern_type),
        pattern.resource_type.name(),
        pattern.name
    )
}

async fn children(client: &Client, path: &str) -> Result<Vec<String>, Error> {
    match client.list_children(path).await {
        Ok(c) => Ok(c),
        Err(Error::NoNode) => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Every ACL under both roots; entries Ferrite cannot read (another version's operation
/// names) are logged and left out.
pub async fn read(client: &Client) -> Result<AclTable, Error> {
    let mut table = AclTable::new();
    for pattern_type in [PatternType::Literal, PatternType::Prefixed] {
        let root = root_of(pattern_type);
        for type_name in children(client, root).await? {
            let Some(resource_type) = ResourceType::from_name(&type_name) else {
                continue;
            };
            for name in children(client, &format!("{root}/{type_name}")).await? {
                let pattern = ResourcePattern {
                    resource_type,
                    name,
                    pattern_type,
                };
                let path = znode_path(&pattern);
                let bytes = match client.get_data(&path).await {
                    Ok((bytes, _)) => bytes,
                    Err(Error::NoNode) => continue,
                    Err(e) => return Err(e),
                };
                let entries = decode(&path, &bytes);
                if !entries.is_empty() {
                    table.insert(pattern, entries);
                }
            }
        }
    }
    Ok(table)
}

fn decode(path: &str, bytes: &[u8]) -> BTreeSet<AccessEntry> {
    let znode: AclZnode = match serde_json::from_slice(bytes) {
        Ok(z) => z,
        Err(e) => {
            tracing::warn!(path, error = %e, "an ACL znode that does not parse is ignored");
            return BTreeSet::new();
        }
    };
    znode
        .acls
        .into_iter()
        .filter_map(|e| {
            let entry = AccessEntry {
                operation: Operation::from_name(&e.operation)?,
                permission: Permission::from_name(&e.permission_type)?,
                principal: e.principal,
                host: e.host,
            };
            Some(entry)
        })
        .collect()
}

/// Replaces the ACLs of `pattern` with `entries` (none: the znode goes), then notifies.
pub async fn write(
    client: &Client,
    pattern: &ResourcePattern,
    entries: &BTreeSet<AccessEntry>,
) -> Result<(), String> {
    let failed = |e: Error| e.to_string();
    let root = root_of(pattern.pattern_type);
    let path = znode_path(pattern);
    if entries.is_empty() {
        delete_if_present(client, &path).await.map_err(failed)?;
    } else {
        let znode = AclZnode {
            version: 1,
            acls: entries
                .iter()
                .map(|e| ZkEntry {
                    principal: e.principal.clone(),
                    permission_type: e.permission.name().to_string(),
                    operation: e.operation.name().to_string(),
                    host: e.host.clone(),
                })
                .collect(),
        };
        let data = serde_json::to_vec(&znode).expect("serialisable");
        if pattern.pattern_type == PatternType::Prefixed {
            create_if_missing(client, EXTENDED_ROOT, b"")
                .await
                .map_err(failed)?;
        }
        for parent in [
            root.to_string(),
            format!("{root}/{}", pattern.resource_type.name()),
        ] {
            create_if_missing(client, &parent, b"")
                .await
                .map_err(failed)?;
        }
        match client.set_data(&path, &data, None).await {
            Ok(_) => {}
            Err(Error::NoNode) => create_if_missing(client, &path, &data)
                .await
                .map_err(failed)?,
            Err(e) => return Err(e.to_string()),
        }
    }
    let (changes, note) = change_notification(pattern);
    create_if_missing(client, changes, b"")
        .await
        .map_err(failed)?;
    client
        .create(
            &format!("{changes}/acl_changes_"),
            &note,
            &persistent_sequential(),
        )
        .await
        .map(|_| ())
        .map_err(failed)
}

/// Where and what Kafka's `LiteralAclChangeStore` / `ExtendedAclChangeStore` write for a change
/// to `pattern`'s ACLs (ZkData.scala), so that Kafka brokers and tools sharing the ZooKeeper
/// hear of it: the resource type by its Java enum name (`TRANSACTIONAL_ID:tx-1`; a Kafka
/// broker that reads an UNKNOWN type drops the change), the name as it is.
fn change_notification(pattern: &ResourcePattern) -> (&'static str, Vec<u8>) {
    match pattern.pattern_type {
        PatternType::Literal => (
            LITERAL_CHANGES,
            format!("{}:{}", pattern.resource_type.enum_name(), pattern.name).into_bytes(),
        ),
        PatternType::Prefixed => (
            EXTENDED_CHANGES,
            serde_json::to_vec(&ExtendedChange {
                version: 1,
                resource_type: pattern.resource_type.enum_name(),
                name: &pattern.name,
                pattern_type: pattern.pattern_type.enum_name(),
            })
            .expect("serialisable"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_own_acl_znode_decodes() {
        let entries = decode(
            "/kafka-acl/Topic/orders",
            br#"{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Write","host":"*"},{"principal":"User:*","permissionType":"Deny","operation":"Describe","host":"10.0.0.1"}]}"#,
        );
        assert_eq!(entries.len(), 2);
        assert!(entries.contains(&AccessEntry {
            principal: "User:alice".into(),
            host: "*".into(),
            operation: Operation::Write,
            permission: Permission::Allow,
        }));
        let prefixed = ResourcePattern {
            resource_type: ResourceType::Group,
            name: "app-".into(),
            pattern_type: PatternType::Prefixed,
        };
        assert_eq!(
            znode_path(&prefixed),
            "/kafka-acl-extended/prefixed/Group/app-"
        );
    }

    /// The notifications as Kafka 3.9's `ZkData.scala` encodes them, byte for byte.
    #[test]
    fn change_notifications_are_kafkas() {
        let literal = ResourcePattern {
            resource_type: ResourceType::TransactionalId,
            name: "tx:1".into(),
            pattern_type: PatternType::Literal,
        };
        assert_eq!(
            change_notification(&literal),
            (LITERAL_CHANGES, b"TRANSACTIONAL_ID:tx:1".to_vec())
        );
        let prefixed = ResourcePattern {
            resource_type: ResourceType::Group,
            name: "app-".into(),
            pattern_type: PatternType::Prefixed,
        };
        assert_eq!(
            change_notification(&prefixed),
            (
                EXTENDED_CHANGES,
                br#"{"version":1,"resourceType":"GROUP","name":"app-","patternType":"PREFIXED"}"#
                    .to_vec()
            )
        );
    }
}
