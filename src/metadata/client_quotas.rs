//! Client quota configs (KIP-55, KIP-257): rates set per user, per client id, or per both,
//! each name possibly `<default>`, as Kafka keeps them under `/config/users` and
//! `/config/clients`, and the order in which a connection's quota is found.

use std::collections::BTreeMap;

/// One part of an entity: a name, or the default for every name of its type.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EntityName {
    Default,
    Named(String),
}

/// Who a quota is for: a user, a client id, or both (never neither).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QuotaEntity {
    pub user: Option<EntityName>,
    pub client_id: Option<EntityName>,
}

/// The name of the default entity where names are stored (`/config/users/<default>`).
pub const DEFAULT_NAME: &str = "<default>";

impl EntityName {
    /// The name as stored: `<default>`, or the name with every byte outside
    /// `[A-Za-z0-9._-]` percent-encoded (Kafka's `Sanitizer`, URL encoding), so no stored name
    /// is `<default>` or holds a '/'.
    pub fn stored(&self) -> String {
        match self {
            EntityName::Default => DEFAULT_NAME.to_string(),
            EntityName::Named(n) => {
                let mut out = String::with_capacity(n.len());
                for b in n.bytes() {
                    if b.is_ascii_alphanumeric() || b"._-".contains(&b) {
                        out.push(b as char);
                    } else {
                        out.push_str(&format!("%{b:02X}"));
                    }
                }
                out
            }
        }
    }

    /// The name `stored` wrote; `None` if it is not one.
    pub fn from_stored(stored: &str) -> Option<EntityName> {
        if stored == DEFAULT_NAME {
            return Some(EntityName::Default);
        }
        let bytes = stored.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' {
                let hex = stored.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            } else {
                out.push(bytes[i]);
                i += 1;
            }
        }
        String::from_utf8(out).ok().map(EntityName::Named)
    }
}

/// Every entity's quota values, by Kafka's key, as the text Kafka stores.
pub type ClientQuotaConfigs = BTreeMap<QuotaEntity, BTreeMap<String, String>>;

pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";

/// The quota keys of users and client ids (Kafka's `DynamicConfig.User/Client`), and whether
/// each must be a whole number (LONG) rather than a DOUBLE.
const KEYS: &[(&str, bool)] = &[
    (PRODUCER_BYTE_RATE, true),
    (CONSUMER_BYTE_RATE, true),
    (REQUEST_PERCENTAGE, false),
    (CONTROLLER_MUTATION_RATE, false),
];

/// Whether `key` is a client quota (an entity's znode may hold other configs too: a user's
/// SCRAM credentials live in `/config/users/<u>` as well).
pub fn is_quota_key(key: &str) -> bool {
    KEYS.iter().any(|(k, _)| *k == key)
}

/// The text Kafka stores for `value` of `key`, or its refusal (INVALID_REQUEST), as
/// `ZkAdminManager.alterClientQuotas` checks it.
pub fn stored_value(key: &str, value: f64) -> Result<String, String> {
    let Some(&(_, whole)) = KEYS.iter().find(|(k, _)| *k == key) else {
        return Err(format!("Invalid configuration key {key}"));
    };
    if !whole {
        return Ok(value.to_string());
    }
    const EPSILON: f64 = 1e-6;
    let rounded = (value + EPSILON) as i64;
    if (rounded as f64 - value).abs() > EPSILON {
        return Err(format!("Configuration {key} must be a LONG value"));
    }
    Ok(rounded.to_string())
}

impl QuotaEntity {
    /// Kafka's order for a connection of `user` and `client_id` (`DefaultQuotaCallback`):
    /// user and client id, user and default client, user, default user and client id, both
    /// defaults, default user, client id, default client.
    fn precedence(user: &str, client_id: &str) -> [QuotaEntity; 8] {
        let u = || Some(EntityName::Named(user.to_string()));
        let c = || Some(EntityName::Named(client_id.to_string()));
        let d = || Some(EntityName::Default);
        let e = |user, client_id| QuotaEntity { user, client_id };
        [
            e(u(), c()),
            e(u(), d()),
            e(u(), None),
            e(d(), c()),
            e(d(), d()),
            e(d(), None),
            e(None, c()),
            e(None, d()),
        ]
    }
}

/// Who shares a quota: the user and client id the matching entity names (a default stands
/// for the connection's own name), so every user under a default quota has a rate of its own.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QuotaKey {
    pub user: Option<String>,
    pub client_id: Option<String>,
}

/// The quota `key` of a connection of `user` and `client_id`: who shares it, and its bound.
pub fn quota_for(
    configs: &ClientQuotaConfigs,
    key: &str,
    user: &str,
    client_id: &str,
) -> Option<(QuotaKey, f64)> {
    QuotaEntity::precedence(user, client_id)
        .into_iter()
        .find_map(|entity| {
            let bound: f64 = configs.get(&entity)?.get(key)?.parse().ok()?;
            Some((
                QuotaKey {
                    user: entity.user.map(|_| user.to_string()),
                    client_id: entity.client_id.map(|_| client_id.to_string()),
                },
                bound,
            ))
        })
}

/// One component of a DescribeClientQuotas filter, for one entity type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Match {
    /// That name exactly.
    Exact(String),
    /// The type's default entity.
    Default,
    /// Any entity of the type, the default included.
    Any,
}

/// Kafka's `handleDescribeClientQuotas` `matches`: a component matches the entity's part of
/// its type; a type without a component matches an entity without that part, or any when not
/// `strict`.
pub fn matches(component: Option<&Match>, part: Option<&EntityName>, strict: bool) -> bool {
    match component {
        Some(Match::Exact(n)) => part == Some(&EntityName::Named(n.clone())),
        Some(Match::Default) => part == Some(&EntityName::Default),
        Some(Match::Any) => part.is_some(),
        None => part.is_none() || !strict,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(user: Option<&str>, client_id: Option<&str>) -> QuotaEntity {
        let name = |n: &str| {
            if n == "<default>" {
                EntityName::Default
            } else {
                EntityName::Named(n.to_string())
            }
        };
        QuotaEntity {
            user: user.map(name),
            client_id: client_id.map(name),
        }
    }

    #[test]
    fn the_most_specific_entity_with_the_key_wins_and_defaults_stand_for_each_name() {
        let mut configs = ClientQuotaConfigs::new();
        let rate = |v: &str| BTreeMap::from([(PRODUCER_BYTE_RATE.to_string(), v.to_string())]);
        configs.insert(entity(None, Some("<default>")), rate("100"));
        configs.insert(entity(None, Some("loader")), rate("200"));
        configs.insert(entity(Some("alice"), Some("loader")), rate("300"));
        let (key, bound) = quota_for(&configs, PRODUCER_BYTE_RATE, "alice", "loader").unwrap();
        assert_eq!(
            (key.user.as_deref(), key.client_id.as_deref(), bound),
            (Some("alice"), Some("loader"), 300.0)
        );
        let (key, bound) = quota_for(&configs, PRODUCER_BYTE_RATE, "bob", "loader").unwrap();
        assert_eq!((key.user, bound), (None, 200.0));
        let (key, bound) = quota_for(&configs, PRODUCER_BYTE_RATE, "bob", "other").unwrap();
        assert_eq!((key.client_id.as_deref(), bound), (Some("other"), 100.0));
        assert!(quota_for(&configs, CONSUMER_BYTE_RATE, "bob", "other").is_none());
    }

    #[test]
    fn stored_names_cannot_be_mistaken_for_the_default_or_a_path() {
        for n in ["plain-id_1.x", "<default>", "a/b c", "ünï"] {
            let name = EntityName::Named(n.to_string());
            let stored = name.stored();
            assert!(!stored.contains('/') && stored != DEFAULT_NAME, "{stored}");
            assert_eq!(EntityName::from_stored(&stored), Some(name));
        }
        assert_eq!(
            EntityName::from_stored("<default>"),
            Some(EntityName::Default)
        );
    }

    #[test]
    fn values_are_checked_as_kafka_checks_them() {
        assert_eq!(stored_value(PRODUCER_BYTE_RATE, 5e6).unwrap(), "5000000");
        assert!(stored_value(PRODUCER_BYTE_RATE, 1.5).is_err());
        assert_eq!(stored_value(REQUEST_PERCENTAGE, 12.5).unwrap(), "12.5");
        assert!(stored_value("no_such_quota", 1.0).is_err());
        assert!(matches(None, None, true));
        assert!(!matches(None, Some(&EntityName::Default), true));
        assert!(matches(None, Some(&EntityName::Default), false));
        assert!(matches(Some(&Match::Any), Some(&EntityName::Default), true));
        assert!(!matches(
            Some(&Match::Default),
            Some(&EntityName::Named("a".into())),
            true
        ));
    }
}
