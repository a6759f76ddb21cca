//! Each listener's security as the broker runs it, built once at start-up from the settings
//! (so a missing key store or an unknown mechanism stops the start with the listener named),
//! and this broker's own side of the inter-broker listener (replication).

use super::principal::PrincipalMapper;
use super::sasl::SaslMechanism;
use super::tls;
use crate::config::{Listener, SecurityProtocol, SecuritySettings};
use std::net::SocketAddr;
use std::sync::Arc;

/// One listener: where it binds, how it is secured.
pub struct ListenerSecurity {
    /// Upper case, as in `listeners`.
    pub name: String,
    pub protocol: SecurityProtocol,
    pub bind: SocketAddr,
    /// The TLS server side (SSL and SASL_SSL).
    pub tls: Option<futures_rustls::TlsAcceptor>,
    /// `sasl.enabled.mechanisms` (SASL_PLAINTEXT and SASL_SSL), in the order given.
    pub mechanisms: Vec<SaslMechanism>,
    /// `ssl.principal.mapping.rules`, for client certificates.
    pub principal_mapper: PrincipalMapper,
}

/// Kafka's default is GSSAPI, which Ferrite does not offer; without the setting a SASL
/// listener offers both SCRAM mechanisms (PLAIN sends the password itself and is only
/// enabled when asked for).
const DEFAULT_MECHANISMS: &str = "SCRAM-SHA-256,SCRAM-SHA-512";

fn mechanisms(settings: &SecuritySettings, listener: &str) -> Result<Vec<SaslMechanism>, String> {
    let text = settings
        .for_listener(listener, "sasl.enabled.mechanisms")
        .unwrap_or(DEFAULT_MECHANISMS);
    let mut out = Vec::new();
    for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let m = SaslMechanism::from_name(name).ok_or_else(|| {
            format!(
                "sasl.enabled.mechanisms: {name} is not offered (PLAIN, SCRAM-SHA-256 and \
                 SCRAM-SHA-512 are)"
            )
        })?;
        if !out.contains(&m) {
            out.push(m);
        }
    }
    if out.is_empty() {
        return Err("sasl.enabled.mechanisms names no mechanism".into());
    }
    Ok(out)
}

impl ListenerSecurity {
    pub fn build(
        listener: &Listener,
        settings: &SecuritySettings,
    ) -> Result<ListenerSecurity, String> {
        let name = &listener.name;
        let in_listener = |e: String| format!("listener {name}: {e}");
        let tls = listener
            .protocol
            .uses_tls()
            .then(|| tls::server_config(settings, name).map(futures_rustls::TlsAcceptor::from))
            .transpose()
            .map_err(in_listener)?;
        let mechanisms = if listener.protocol.uses_sasl() {
            mechanisms(settings, name).map_err(in_listener)?
        } else {
            Vec::new()
        };
        let principal_mapper =
            PrincipalMapper::parse(settings.for_listener(name, "ssl.principal.mapping.rules"))
                .map_err(in_listener)?;
        Ok(ListenerSecurity {
            name: name.clone(),
            protocol: listener.protocol,
            bind: listener.bind,
            tls,
            mechanisms,
            principal_mapper,
        })
    }
}

/// How this broker authenticates itself to the others on the inter-broker listener.
pub struct InterBrokerClient {
    /// Upper case; the peers' endpoint on this listener is where replicas fetch.
    pub listener: String,
    pub tls: Option<futures_rustls::TlsConnector>,
    pub sasl: Option<SaslLogin>,
}

/// A SASL login: mechanism, user, password (from the JAAS config, as Kafka's brokers have it).
pub struct SaslLogin {
    pub mechanism: SaslMechanism,
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for SaslLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SaslLogin({}, {})", self.mechanism.name(), self.username)
    }
}

impl InterBrokerClient {
    /// `sasl.mechanism.inter.broker.protocol` (default: the listener's first enabled
    /// mechanism; Kafka's GSSAPI is not offered) with the credentials of that mechanism's
    /// `sasl.jaas.config` on the listener: `... required username="..." password="...";`.
    pub fn build(
        listener: &Listener,
        settings: &SecuritySettings,
    ) -> Result<InterBrokerClient, String> {
        let name = &listener.name;
        let in_listener = |e: String| format!("inter-broker listener {name}: {e}");
        let tls = listener
            .protocol
            .uses_tls()
            .then(|| tls::client_config(settings, name).map(futures_rustls::TlsConnector::from))
            .transpose()
            .map_err(in_listener)?;
        let sasl = if listener.protocol.uses_sasl() {
            let mechanism = match settings.get("sasl.mechanism.inter.broker.protocol") {
                Some(m) => SaslMechanism::from_name(m.trim()).ok_or_else(|| {
                    in_listener(format!(
                        "sasl.mechanism.inter.broker.protocol: {m} is not offered"
                    ))
                })?,
                None => mechanisms(settings, name).map_err(in_listener)?[0],
            };
            let jaas = settings.jaas_for(name, mechanism.name()).ok_or_else(|| {
                in_listener(format!(
                    "needs this broker's credentials: listener.name.{}.{}.sasl.jaas.config",
                    name.to_ascii_lowercase(),
                    mechanism.name().to_ascii_lowercase()
                ))
            })?;
            let options = jaas_options(jaas);
            let get = |key: &str| {
                options
                    .iter()
                    .find(|(k, _)| k == key)
                    .map(|(_, v)| v.clone())
                    .ok_or_else(|| in_listener(format!("sasl.jaas.config has no {key}")))
            };
            Some(SaslLogin {
                mechanism,
                username: get("username")?,
                password: get("password")?,
            })
        } else {
            None
        };
        Ok(InterBrokerClient {
            listener: name.clone(),
            tls,
            sasl,
        })
    }
}

/// The `key="value"` options of a JAAS line (`LoginModule required k="v" k2="v2";`).
fn jaas_options(jaas: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = jaas;
    while let Some(eq) = rest.find("=\"") {
        let key = rest[..eq]
            .rsplit(|c: char| c.is_whitespace())
            .next()
            .unwrap_or("")
            .to_string();
        let value_start = eq + 2;
        let mut value = String::new();
        let mut chars = rest[value_start..].char_indices();
        let mut end = rest.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, n)) = chars.next() {
                        value.push(n);
                    }
                }
                '"' => {
                    end = value_start + i + 1;
                    break;
                }
                c => value.push(c),
            }
        }
        out.push((key, value));
        rest = &rest[end.min(rest.len())..];
    }
    out
}

/// Every listener's security, or the first reason one cannot start.
pub fn build_all(
    listeners: &crate::config::Listeners,
    settings: &SecuritySettings,
) -> Result<Vec<Arc<ListenerSecurity>>, String> {
    listeners
        .list
        .iter()
        .map(|l| ListenerSecurity::build(l, settings).map(Arc::new))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jaas_lines_give_their_options() {
        let o = jaas_options(
            r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="a \"q\" b";"#,
        );
        assert_eq!(
            o,
            vec![
                ("username".to_string(), "admin".to_string()),
                ("password".to_string(), "a \"q\" b".to_string())
            ]
        );
    }
}
