//! ACLs with the semantics of Kafka's `AclAuthorizer` (and KRaft's `StandardAuthorizer`, which
//! decides the same way): bindings of a resource pattern (type, name, LITERAL or PREFIXED, the
//! literal `*` for every name) to a principal (or `User:*`), a host (or `*`), an operation and
//! ALLOW or DENY.
//!
//! An action is allowed when the principal is a super user, or when no DENY binding matches and
//! an ALLOW one does (Read, Write, Delete and Alter imply Describe; AlterConfigs implies
//! DescribeConfigs), or when no binding matches the resource at all and
//! `allow.everyone.if.no.acl.found` is set.
//!
//! The codes are Kafka's (`ResourceType`, `PatternType`, `AclOperation`, `AclPermissionType`),
//! as CreateAcls, DescribeAcls and DeleteAcls carry them; the names are those of Kafka's
//! `/kafka-acl` znodes.

use super::principal::Principal;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ResourceType {
    Topic,
    Group,
    Cluster,
    TransactionalId,
    DelegationToken,
    User,
}

impl ResourceType {
    pub const ALL: [ResourceType; 6] = [
        ResourceType::Topic,
        ResourceType::Group,
        ResourceType::Cluster,
        ResourceType::TransactionalId,
        ResourceType::DelegationToken,
        ResourceType::User,
    ];

    pub fn code(self) -> i8 {
        match self {
            ResourceType::Topic => 2,
            ResourceType::Group => 3,
            ResourceType::Cluster => 4,
            ResourceType::TransactionalId => 5,
            ResourceType::DelegationToken => 6,
            ResourceType::User => 7,
        }
    }

    pub fn from_code(code: i8) -> Option<ResourceType> {
        ResourceType::ALL.into_iter().find(|t| t.code() == code)
    }

    /// The name in `/kafka-acl/<name>/...`.
    pub fn name(self) -> &'static str {
        match self {
            ResourceType::Topic => "Topic",
            ResourceType::Group => "Group",
            ResourceType::Cluster => "Cluster",
            ResourceType::TransactionalId => "TransactionalId",
            ResourceType::DelegationToken => "DelegationToken",
            ResourceType::User => "User",
        }
    }

    pub fn from_name(name: &str) -> Option<ResourceType> {
        ResourceType::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Kafka's Java enum name (`ResourceType.name()`), as ACL change notifications carry it:
    /// a Kafka broker reads it back with `ResourceType.fromString`, which upper-cases what it
    /// gets, so `TransactionalId` would come back UNKNOWN where `TRANSACTIONAL_ID` does not.
    pub fn enum_name(self) -> &'static str {
        match self {
            ResourceType::Topic => "TOPIC",
            ResourceType::Group => "GROUP",
            ResourceType::Cluster => "CLUSTER",
            ResourceType::TransactionalId => "TRANSACTIONAL_ID",
            ResourceType::DelegationToken => "DELEGATION_TOKEN",
            ResourceType::User => "USER",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PatternType {
    Literal,
    Prefixed,
}

impl PatternType {
    pub fn code(self) -> i8 {
        match self {
            PatternType::Literal => 3,
            PatternType::Prefixed => 4,
        }
    }

    pub fn from_code(code: i8) -> Option<PatternType> {
        match code {
            3 => Some(PatternType::Literal),
            4 => Some(PatternType::Prefixed),
            _ => None,
        }
    }

    /// Kafka's Java enum name (`PatternType.name()`); `PatternType.fromString` matches it
    /// exactly, case included.
    pub fn enum_name(self) -> &'static str {
        match self {
            PatternType::Literal => "LITERAL",
            PatternType::Prefixed => "PREFIXED",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Operation {
    All,
    Read,
    Write,
    Create,
    Delete,
    Alter,
    Describe,
    ClusterAction,
    DescribeConfigs,
    AlterConfigs,
    IdempotentWrite,
    CreateTokens,
    DescribeTokens,
}

impl Operation {
    pub const ALL: [Operation; 13] = [
        Operation::All,
        Operation::Read,
        Operation::Write,
        Operation::Create,
        Operation::Delete,
        Operation::Alter,
        Operation::Describe,
        Operation::ClusterAction,
        Operation::DescribeConfigs,
        Operation::AlterConfigs,
        Operation::IdempotentWrite,
        Operation::CreateTokens,
        Operation::DescribeTokens,
    ];

    pub fn code(self) -> i8 {
        match self {
            Operation::All => 2,
            Operation::Read => 3,
            Operation::Write => 4,
            Operation::Create => 5,
            Operation::Delete => 6,
            Operation::Alter => 7,
            Operation::Describe => 8,
            Operation::ClusterAction => 9,
            Operation::DescribeConfigs => 10,
            Operation::AlterConfigs => 11,
            Operation::IdempotentWrite => 12,
            Operation::CreateTokens => 13,
            Operation::DescribeTokens => 14,
        }
    }

    pub fn from_code(code: i8) -> Option<Operation> {
        Operation::ALL.into_iter().find(|o| o.code() == code)
    }

    /// The name in Kafka's znode JSON (`AclOperation` in camel case).
    pub fn name(self) -> &'static str {
        match self {
            Operation::All => "All",
            Operation::Read => "Read",
            Operation::Write => "Write",
            Operation::Create => "Create",
            Operation::Delete => "Delete",
            Operation::Alter => "Alter",
            Operation::Describe => "Describe",
            Operation::ClusterAction => "ClusterAction",
            Operation::DescribeConfigs => "DescribeConfigs",
            Operation::AlterConfigs => "AlterConfigs",
            Operation::IdempotentWrite => "IdempotentWrite",
            Operation::CreateTokens => "CreateTokens",
            Operation::DescribeTokens => "DescribeTokens",
        }
    }

    pub fn from_name(name: &str) -> Option<Operation> {
        Operation::ALL.into_iter().find(|o| o.name() == name)
    }

    /// The operations an ALLOW of which allows `self` (Kafka's ACL inheritance).
    fn allowed_by(self) -> &'static [Operation] {
        match self {
            Operation::Describe => &[
                Operation::Describe,
                Operation::Read,
                Operation::Write,
                Operation::Delete,
                Operation::Alter,
            ],
            Operation::DescribeConfigs => &[Operation::DescribeConfigs, Operation::AlterConfigs],
            Operation::Read => &[Operation::Read],
            Operation::Write => &[Operation::Write],
            Operation::Create => &[Operation::Create],
            Operation::Delete => &[Operation::Delete],
            Operation::Alter => &[Operation::Alter],
            Operation::ClusterAction => &[Operation::ClusterAction],
            Operation::AlterConfigs => &[Operation::AlterConfigs],
            Operation::IdempotentWrite => &[Operation::IdempotentWrite],
            Operation::CreateTokens => &[Operation::CreateTokens],
            Operation::DescribeTokens => &[Operation::DescribeTokens],
            Operation::All => &[Operation::All],
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Permission {
    Deny,
    Allow,
}

impl Permission {
    pub fn code(self) -> i8 {
        match self {
            Permission::Deny => 2,
            Permission::Allow => 3,
        }
    }

    pub fn from_code(code: i8) -> Option<Permission> {
        match code {
            2 => Some(Permission::Deny),
            3 => Some(Permission::Allow),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Permission::Deny => "Deny",
            Permission::Allow => "Allow",
        }
    }

    pub fn from_name(name: &str) -> Option<Permission> {
        [Permission::Deny, Permission::Allow]
            .into_iter()
            .find(|p| p.name() == name)
    }
}

/// The name that matches every resource of a type (a LITERAL pattern), the principal that
/// matches everyone, and the host that matches every host.
pub const WILDCARD: &str = "*";
pub const WILDCARD_PRINCIPAL: &str = "User:*";

/// A resource pattern: what an ACL is about.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ResourcePattern {
    pub resource_type: ResourceType,
    pub name: String,
    pub pattern_type: PatternType,
}

impl ResourcePattern {
    /// Whether an action on (`resource_type`, `name`) falls under this pattern.
    fn covers(&self, resource_type: ResourceType, name: &str) -> bool {
        self.resource_type == resource_type
            && match self.pattern_type {
                PatternType::Literal => self.name == name || self.name == WILDCARD,
                PatternType::Prefixed => name.starts_with(&self.name),
            }
    }
}

/// Who may (or may not) do what from where, on the pattern it is kept under.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AccessEntry {
    /// `Type:name` as written (`User:alice`, `User:*`).
    pub principal: String,
    pub host: String,
    pub operation: Operation,
    pub permission: Permission,
}

impl AccessEntry {
    /// Whether the entry speaks of `who` (`Type:name`) connecting from `host`.
    fn applies_to(&self, who: &str, host: &str) -> bool {
        (self.principal == who || self.principal == WILDCARD_PRINCIPAL)
            && (self.host == host || self.host == WILDCARD)
    }

    /// A DENY of `operation` (or of All).
    fn denies(&self, operation: Operation) -> bool {
        self.permission == Permission::Deny
            && (self.operation == operation || self.operation == Operation::All)
    }

    /// An ALLOW of `operation`, of All, or of an operation that implies it.
    fn allows(&self, operation: Operation) -> bool {
        self.permission == Permission::Allow
            && (self.operation == Operation::All
                || operation.allowed_by().contains(&self.operation))
    }
}

/// One ACL.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AclBinding {
    pub pattern: ResourcePattern,
    pub entry: AccessEntry,
}

/// Every ACL, by the pattern it is kept under (one znode each in ZooKeeper).
pub type AclTable = BTreeMap<ResourcePattern, BTreeSet<AccessEntry>>;

/// The table's bindings, one per entry.
pub fn bindings(table: &AclTable) -> impl Iterator<Item = AclBinding> + '_ {
    table.iter().flat_map(|(pattern, entries)| {
        entries.iter().map(move |entry| AclBinding {
            pattern: pattern.clone(),
            entry: entry.clone(),
        })
    })
}

/// A table from bindings.
pub fn table_of(list: impl IntoIterator<Item = AclBinding>) -> AclTable {
    let mut table = AclTable::new();
    for b in list {
        table.entry(b.pattern).or_default().insert(b.entry);
    }
    table
}

/// What DescribeAcls and DeleteAcls select by (Kafka's `AclBindingFilter`): each field `None`
/// matches anything (ANY); `pattern_filter` MATCH selects every pattern that would cover the
/// named resource.
#[derive(Clone, Debug, Default)]
pub struct AclFilter {
    pub resource_type: Option<ResourceType>,
    pub name: Option<String>,
    pub pattern: PatternFilter,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Option<Operation>,
    pub permission: Option<Permission>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PatternFilter {
    #[default]
    Any,
    Match,
    Exactly(PatternType),
}

impl AclFilter {
    pub fn matches(&self, b: &AclBinding) -> bool {
        let p = &b.pattern;
        let e = &b.entry;
        self.resource_type.is_none_or(|t| t == p.resource_type)
            && match (self.pattern, &self.name) {
                (PatternFilter::Match, Some(name)) => p.covers(p.resource_type, name),
                (PatternFilter::Match, None) => true,
                (PatternFilter::Any, name) => name.as_ref().is_none_or(|n| *n == p.name),
                (PatternFilter::Exactly(t), name) => {
                    t == p.pattern_type && name.as_ref().is_none_or(|n| *n == p.name)
                }
            }
            && self.principal.as_ref().is_none_or(|x| *x == e.principal)
            && self.host.as_ref().is_none_or(|x| *x == e.host)
            && self.operation.is_none_or(|o| o == e.operation)
            && self.permission.is_none_or(|x| x == e.permission)
    }
}

/// How decisions are made, from the broker's settings.
#[derive(Clone, Debug, Default)]
pub struct AuthorizerSettings {
    /// `super.users`: `User:a;User:b`.
    pub super_users: Vec<String>,
    /// `allow.everyone.if.no.acl.found`.
    pub allow_if_no_acl: bool,
}

impl AuthorizerSettings {
    /// `authorizer.class.name` (Kafka's class names; any other is refused), `super.users`,
    /// `allow.everyone.if.no.acl.found`. `None` when no authorizer is set: everything allowed.
    pub fn from_settings(
        class: Option<&str>,
        super_users: Option<&str>,
        allow_if_no_acl: Option<&str>,
    ) -> Result<Option<AuthorizerSettings>, String> {
        let Some(class) = class.map(str::trim).filter(|c| !c.is_empty()) else {
            return Ok(None);
        };
        const KNOWN: [&str; 3] = [
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "kafka.security.authorizer.AclAuthorizer",
            "kafka.security.auth.SimpleAclAuthorizer",
        ];
        if !KNOWN.contains(&class) {
            return Err(format!(
                "authorizer.class.name={class}: Ferrite's authorizer takes the place of {}",
                KNOWN.join(" or ")
            ));
        }
        let allow_if_no_acl = match allow_if_no_acl.map(str::trim) {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(format!(
                    "allow.everyone.if.no.acl.found={other}: true or false"
                ))
            }
        };
        let super_users = super_users
            .unwrap_or("")
            .split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                if s.contains(':') {
                    Ok(s.to_string())
                } else {
                    Err(format!("super.users: {s:?} is not Type:name"))
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(Some(AuthorizerSettings {
            super_users,
            allow_if_no_acl,
        }))
    }

    /// Kafka's decision for `principal` from `host` doing `operation` on (`resource_type`,
    /// `name`), given every binding.
    pub fn authorize(
        &self,
        acls: &AclTable,
        principal: &Principal,
        host: &str,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        let who = principal.to_string();
        if self.super_users.contains(&who) {
            return true;
        }
        let mut any = false;
        let mut allowed = false;
        let covering = acls
            .iter()
            .filter(|(pattern, _)| pattern.covers(resource_type, name))
            .flat_map(|(_, entries)| entries);
        for e in covering {
            any = true;
            if !e.applies_to(&who, host) {
                continue;
            }
            if e.denies(operation) {
                return false;
            }
            allowed |= e.allows(operation);
        }
        allowed || (!any && self.allow_if_no_acl)
    }

    /// Kafka's `authorizeByResourceType`: whether some resource of `resource_type` would let
    /// `principal` do `operation`: a super user; an ALLOW on any pattern of the type that no
    /// DENY on the same or a wider pattern (the `*` literal, a shorter prefix) takes back; or,
    /// with `allow.everyone.if.no.acl.found`, no ACL of the type at all.
    pub fn authorize_any(
        &self,
        acls: &AclTable,
        principal: &Principal,
        host: &str,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        let who = principal.to_string();
        if self.super_users.contains(&who) {
            return true;
        }
        let of_type: Vec<(&ResourcePattern, &AccessEntry)> = acls
            .iter()
            .filter(|(p, _)| p.resource_type == resource_type)
            .flat_map(|(p, entries)| entries.iter().map(move |e| (p, e)))
            .collect();
        if of_type.is_empty() {
            return self.allow_if_no_acl;
        }
        let denied_under = |allowed: &ResourcePattern| {
            of_type.iter().any(|(p, e)| {
                e.denies(operation)
                    && e.applies_to(&who, host)
                    && p.covers(resource_type, &allowed.name)
            })
        };
        of_type
            .iter()
            .any(|(p, e)| e.allows(operation) && e.applies_to(&who, host) && !denied_under(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(
        t: ResourceType,
        name: &str,
        pattern: PatternType,
        who: &str,
        op: Operation,
        perm: Permission,
    ) -> AclBinding {
        AclBinding {
            pattern: ResourcePattern {
                resource_type: t,
                name: name.into(),
                pattern_type: pattern,
            },
            entry: AccessEntry {
                principal: who.into(),
                host: WILDCARD.into(),
                operation: op,
                permission: perm,
            },
        }
    }

    #[test]
    fn kafkas_rules() {
        use Operation::*;
        use PatternType::*;
        use Permission::*;
        use ResourceType::*;
        let s = AuthorizerSettings {
            super_users: vec!["User:admin".into()],
            allow_if_no_acl: false,
        };
        let list = vec![
            acl(Topic, "orders", Literal, "User:alice", Write, Allow),
            acl(Topic, "logs-", Prefixed, "User:*", Read, Allow),
            acl(Topic, "logs-secret", Literal, "User:bob", Read, Deny),
            acl(Topic, "*", Literal, "User:carol", All, Allow),
        ];
        let acls = table_of(list.clone());
        let alice = Principal::user("alice");
        let bob = Principal::user("bob");
        let check =
            |p: &Principal, op, name: &str| s.authorize(&acls, p, "10.0.0.1", op, Topic, name);
        assert!(check(&alice, Write, "orders"));
        assert!(check(&alice, Describe, "orders"), "Write implies Describe");
        assert!(!check(&alice, Read, "orders"));
        assert!(check(&bob, Read, "logs-app"), "PREFIXED and User:*");
        assert!(!check(&bob, Read, "logs-secret"), "DENY wins");
        assert!(check(&alice, Read, "logs-secret"));
        assert!(!check(&bob, Read, "other"), "no ACL: denied by default");
        assert!(
            check(&Principal::user("carol"), Delete, "anything"),
            "* and All"
        );
        assert!(
            check(&Principal::user("admin"), Alter, "orders"),
            "super user"
        );
        let open = AuthorizerSettings {
            allow_if_no_acl: true,
            ..s.clone()
        };
        assert!(
            open.authorize(&acls, &bob, "h", Read, Group, "g"),
            "no ACL for the group"
        );
        assert!(
            !open.authorize(&acls, &bob, "h", Write, Topic, "orders"),
            "an ACL exists"
        );
        let hosts = table_of([AclBinding {
            entry: AccessEntry {
                host: "10.0.0.2".into(),
                ..list[0].entry.clone()
            },
            ..list[0].clone()
        }]);
        assert!(!s.authorize(&hosts, &alice, "10.0.0.1", Write, Topic, "orders"));
        assert!(s.authorize(&hosts, &alice, "10.0.0.2", Write, Topic, "orders"));
    }

    #[test]
    fn filters_select_as_describe_and_delete_acls_do() {
        use PatternType::*;
        let acls = [
            acl(
                ResourceType::Topic,
                "logs-",
                Prefixed,
                "User:a",
                Operation::Read,
                Permission::Allow,
            ),
            acl(
                ResourceType::Topic,
                "logs-x",
                Literal,
                "User:a",
                Operation::Read,
                Permission::Allow,
            ),
            acl(
                ResourceType::Topic,
                "*",
                Literal,
                "User:b",
                Operation::Write,
                Permission::Deny,
            ),
            acl(
                ResourceType::Group,
                "g",
                Literal,
                "User:a",
                Operation::Read,
                Permission::Allow,
            ),
        ];
        let count = |f: AclFilter| acls.iter().filter(|b| f.matches(b)).count();
        assert_eq!(count(AclFilter::default()), 4);
        assert_eq!(
            count(AclFilter {
                resource_type: Some(ResourceType::Topic),
                name: Some("logs-x".into()),
                pattern: PatternFilter::Match,
                ..Default::default()
            }),
            3
        );
        assert_eq!(
            count(AclFilter {
                name: Some("logs-x".into()),
                ..Default::default()
            }),
            1
        );
        assert_eq!(
            count(AclFilter {
                pattern: PatternFilter::Exactly(Prefixed),
                ..Default::default()
            }),
            1
        );
        assert_eq!(
            count(AclFilter {
                principal: Some("User:a".into()),
                permission: Some(Permission::Allow),
                ..Default::default()
            }),
            3
        );
    }

    #[test]
    fn settings_take_kafkas_class_names_only() {
        let on = AuthorizerSettings::from_settings(
            Some("org.apache.kafka.metadata.authorizer.StandardAuthorizer"),
            Some("User:admin; User:broker"),
            None,
        )
        .unwrap()
        .unwrap();
        assert_eq!(on.super_users, ["User:admin", "User:broker"]);
        assert!(!on.allow_if_no_acl);
        assert!(AuthorizerSettings::from_settings(None, None, None)
            .unwrap()
            .is_none());
        assert!(AuthorizerSettings::from_settings(Some("com.example.Mine"), None, None).is_err());
        assert!(AuthorizerSettings::from_settings(
            Some("kafka.security.authorizer.AclAuthorizer"),
            Some("admin"),
            None
        )
        .is_err());
    }
}
