//! The string-valued security settings under Kafka's names: listeners, TLS, SASL and the
//! authorizer, each optionally per listener (`listener.name.<name>.<setting>`, the name in lower
//! case, as Kafka's `ListenerName.configPrefix` writes it).
//!
//! They are kept as given and read when the broker starts (`security::ListenerSecurity`), so
//! the check of a file path or a PEM happens once, with the listener it belongs to in the
//! error.

use super::ConfigError;
use std::collections::BTreeMap;

/// Settings that may also be given per listener.
/// Allowed under a listener's prefix only (see `listener_max_connections`).
const LISTENER_MAX_CONNECTIONS: &str = "max.connections";
const PER_LISTENER_KEYS: &[&str] = &[
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.key.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
    "ssl.client.auth",
    "ssl.principal.mapping.rules",
    "ssl.enabled.protocols",
    "ssl.protocol",
    "ssl.endpoint.identification.algorithm",
    "sasl.enabled.mechanisms",
    "sasl.jaas.config",
];

/// Settings only the whole broker has.
const BROKER_ONLY_KEYS: &[&str] = &[
    "listeners",
    "advertised.listeners",
    "listener.security.protocol.map",
    "inter.broker.listener.name",
    "security.inter.broker.protocol",
    "sasl.mechanism.inter.broker.protocol",
    "authorizer.class.name",
    "super.users",
    "allow.everyone.if.no.acl.found",
];

/// `<mechanism>.sasl.jaas.config` under a listener prefix (Kafka's per-mechanism JAAS).
const MECHANISM_PREFIXES: &[&str] = &["plain.", "scram-sha-256.", "scram-sha-512."];

/// Kafka's `ConfigDef.Type` of the security settings, as DescribeConfigs' `config_type`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum KafkaConfigType {
    /// Not one of KafkaConfig's keys (`super.users`, `allow.everyone.if.no.acl.found` belong
    /// to the authorizer): Kafka cannot tell its type and treats the value as sensitive.
    Unknown = 0,
    String = 2,
    Int = 3,
    List = 7,
    Password = 9,
}

impl KafkaConfigType {
    /// Kafka's `KafkaConfig.configType` of a security setting, through its listener prefix.
    pub fn of(name: &str) -> KafkaConfigType {
        match base_key(name) {
            "ssl.keystore.password"
            | "ssl.keystore.key"
            | "ssl.keystore.certificate.chain"
            | "ssl.key.password"
            | "ssl.truststore.password"
            | "ssl.truststore.certificates"
            | "sasl.jaas.config" => KafkaConfigType::Password,
            "sasl.enabled.mechanisms" | "ssl.enabled.protocols" | "ssl.principal.mapping.rules" => {
                KafkaConfigType::List
            }
            "super.users" | "allow.everyone.if.no.acl.found" => KafkaConfigType::Unknown,
            LISTENER_MAX_CONNECTIONS => KafkaConfigType::Int,
            _ => KafkaConfigType::String,
        }
    }

    /// Kafka's `KafkaConfig.maybeSensitive`: passwords, and whatever it cannot type, are
    /// described without their value.
    pub fn is_sensitive(self) -> bool {
        matches!(self, KafkaConfigType::Password | KafkaConfigType::Unknown)
    }
}

/// The setting a (possibly `listener.name.<l>.` and mechanism prefixed) name stands for.
fn base_key(name: &str) -> &str {
    let Some(rest) = name.strip_prefix("listener.name.") else {
        return name;
    };
    let key = rest.split_once('.').map_or(rest, |(_, key)| key);
    MECHANISM_PREFIXES
        .iter()
        .find_map(|p| key.strip_prefix(p))
        .unwrap_or(key)
}

#[derive(Clone, Debug, Default)]
pub struct SecuritySettings {
    values: BTreeMap<String, String>,
}

impl SecuritySettings {
    /// Whether `name` is a security setting (so `BrokerSettings::set` hands it here).
    pub fn takes(name: &str) -> bool {
        BROKER_ONLY_KEYS.contains(&name)
            || PER_LISTENER_KEYS.contains(&name)
            || name.starts_with("listener.name.")
    }

    pub fn set(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        if let Some(rest) = name.strip_prefix("listener.name.") {
            let known = rest.split_once('.').is_some_and(|(listener, key)| {
                !listener.is_empty()
                    && (PER_LISTENER_KEYS.contains(&key)
                        || key == LISTENER_MAX_CONNECTIONS
                        || MECHANISM_PREFIXES
                            .iter()
                            .any(|p| key.strip_prefix(p) == Some("sasl.jaas.config")))
            });
            if !known {
                return Err(ConfigError::Field {
                    field: name.to_string(),
                    message: "unknown per-listener setting (listener.name.<name>.<ssl.* or \
                              sasl.* setting, or max.connections>)"
                        .into(),
                });
            }
        }
        self.values.insert(name.to_string(), value.to_string());
        Ok(())
    }

    /// Every setting given, by name, as given.
    pub fn given(&self) -> impl Iterator<Item = (&str, &str)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// A broker-wide setting as given.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// `listener.name.<listener>.max.connections` (KIP-402): the connections that listener
    /// may hold, within the broker's `max.connections`; `None` when not set. Only the
    /// prefixed form is a security setting: the broker-wide `max.connections` is the broker's.
    pub fn listener_max_connections(&self, listener: &str) -> Result<Option<usize>, String> {
        let name = format!(
            "listener.name.{}.{LISTENER_MAX_CONNECTIONS}",
            listener.to_ascii_lowercase()
        );
        self.get(&name)
            .map(|v| {
                v.trim()
                    .parse::<usize>()
                    .map_err(|_| format!("{name}: {v:?} is not a count of connections"))
            })
            .transpose()
    }

    /// `name` for `listener`: its `listener.name.<listener>.` value, else the broker's.
    pub fn for_listener(&self, listener: &str, name: &str) -> Option<&str> {
        let prefixed = format!("listener.name.{}.{name}", listener.to_ascii_lowercase());
        self.get(&prefixed).or_else(|| self.get(name))
    }

    /// The JAAS config for `mechanism` on `listener`: `<mechanism>.sasl.jaas.config` under the
    /// listener's prefix, then the listener's `sasl.jaas.config`, then the broker's.
    pub fn jaas_for(&self, listener: &str, mechanism: &str) -> Option<&str> {
        let prefixed = format!(
            "listener.name.{}.{}.sasl.jaas.config",
            listener.to_ascii_lowercase(),
            mechanism.to_ascii_lowercase()
        );
        self.get(&prefixed)
            .or_else(|| self.for_listener(listener, "sasl.jaas.config"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_listener_values_win_over_the_brokers() {
        let mut s = SecuritySettings::default();
        s.set("ssl.client.auth", "none").unwrap();
        s.set("listener.name.external.ssl.client.auth", "required")
            .unwrap();
        s.set("listener.name.internal.scram-sha-512.sasl.jaas.config", "x")
            .unwrap();
        assert_eq!(
            s.for_listener("EXTERNAL", "ssl.client.auth"),
            Some("required")
        );
        assert_eq!(s.for_listener("INTERNAL", "ssl.client.auth"), Some("none"));
        assert_eq!(s.jaas_for("INTERNAL", "SCRAM-SHA-512"), Some("x"));
        assert_eq!(s.jaas_for("INTERNAL", "PLAIN"), None);
        assert!(s.set("listener.name.x.num.partitions", "1").is_err());
        assert!(SecuritySettings::takes("listeners"));
        assert!(
            KafkaConfigType::of("listener.name.internal.scram-sha-512.sasl.jaas.config")
                .is_sensitive()
        );
        assert!(KafkaConfigType::of("listener.name.external.ssl.keystore.key").is_sensitive());
        assert!(KafkaConfigType::of("super.users").is_sensitive());
        assert!(!KafkaConfigType::of("listener.name.external.ssl.client.auth").is_sensitive());
        assert_eq!(
            KafkaConfigType::of("sasl.enabled.mechanisms"),
            KafkaConfigType::List
        );
        assert!(!SecuritySettings::takes("num.partitions"));
    }
}
