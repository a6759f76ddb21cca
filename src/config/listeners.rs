//! Kafka's listeners: where the broker accepts connections, how each one is secured, and what
//! clients and other brokers are told to connect to.
//!
//! `listeners` (`NAME://host:port,...`), `listener.security.protocol.map` (`NAME:PROTOCOL,...`),
//! `advertised.listeners`, and `inter.broker.listener.name` or `security.inter.broker.protocol`,
//! with the rules of Kafka 3.9's `KafkaConfig` and `CoreUtils.listenerListToEndPoints`:
//! names are case-insensitive (kept upper case), each listener has its own name and port, a
//! name must be in the protocol map, advertised listeners are a subset of the listeners and
//! never `0.0.0.0`, and the inter-broker listener must be advertised. An empty host binds every
//! interface and advertises this machine's host name. Without `listeners` the broker has one
//! PLAINTEXT listener from `--listen`/`--advertised`.

use super::ConfigError;
use std::net::{SocketAddr, ToSocketAddrs};

/// How a listener is secured (Kafka's `SecurityProtocol`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    const ALL: [SecurityProtocol; 4] = [
        SecurityProtocol::Plaintext,
        SecurityProtocol::Ssl,
        SecurityProtocol::SaslPlaintext,
        SecurityProtocol::SaslSsl,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    pub fn parse(name: &str) -> Option<SecurityProtocol> {
        let upper = name.trim().to_ascii_uppercase();
        SecurityProtocol::ALL
            .into_iter()
            .find(|p| p.name() == upper)
    }

    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

/// Kafka's default `listener.security.protocol.map`: each protocol under its own name.
const DEFAULT_PROTOCOL_MAP: &str =
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL";

/// One listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    /// Upper case, as Kafka normalises listener names.
    pub name: String,
    pub protocol: SecurityProtocol,
    pub bind: SocketAddr,
    /// What this listener's clients are told; `None` when it is not advertised.
    pub advertised: Option<(String, u16)>,
}

/// Every listener of the broker, and which one brokers use between themselves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listeners {
    pub list: Vec<Listener>,
    inter_broker: String,
}

/// The settings listeners are made from, as given (`None`: not set).
#[derive(Default)]
pub struct ListenerSettings<'a> {
    pub listeners: Option<&'a str>,
    pub advertised_listeners: Option<&'a str>,
    pub protocol_map: Option<&'a str>,
    pub inter_broker_listener_name: Option<&'a str>,
    pub security_inter_broker_protocol: Option<&'a str>,
}

fn bad(field: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Field {
        field: field.to_string(),
        message: message.into(),
    }
}

impl Listeners {
    /// The single PLAINTEXT listener of `--listen` and `--advertised`.
    pub fn plaintext(bind: SocketAddr, advertised_host: String, advertised_port: u16) -> Listeners {
        Listeners {
            list: vec![Listener {
                name: "PLAINTEXT".into(),
                protocol: SecurityProtocol::Plaintext,
                bind,
                advertised: Some((advertised_host, advertised_port)),
            }],
            inter_broker: "PLAINTEXT".into(),
        }
    }

    /// Kafka's listener settings, checked as Kafka checks them.
    pub fn from_settings(s: &ListenerSettings) -> Result<Listeners, ConfigError> {
        let listeners_text = s.listeners.ok_or_else(|| bad("listeners", "not set"))?;
        let map = parse_protocol_map(s.protocol_map.unwrap_or(DEFAULT_PROTOCOL_MAP))?;
        let endpoints = parse_endpoints("listeners", listeners_text)?;
        if endpoints.is_empty() {
            return Err(bad("listeners", "names no listener"));
        }
        let mut list = Vec::with_capacity(endpoints.len());
        for (name, host, port) in &endpoints {
            if list.iter().any(|l: &Listener| &l.name == name) {
                return Err(bad(
                    "listeners",
                    format!("each listener must have a different name: {name} is given twice"),
                ));
            }
            let protocol = protocol_of(&map, name, "listeners")?;
            let bind = bind_address(host, *port)?;
            if let Some(other) = list
                .iter()
                .find(|l: &&Listener| l.bind.port() == bind.port() && port_shared(l.bind, bind))
            {
                return Err(bad(
                    "listeners",
                    format!(
                        "each listener must have a different port: {name} and {} both use {}",
                        other.name,
                        bind.port()
                    ),
                ));
            }
            list.push(Listener {
                name: name.clone(),
                protocol,
                bind,
                advertised: None,
            });
        }
        let advertised = match s.advertised_listeners {
            Some(text) => parse_endpoints("advertised.listeners", text)?,
            None => endpoints.clone(),
        };
        for (name, host, port) in advertised {
            let field = if s.advertised_listeners.is_some() {
                "advertised.listeners"
            } else {
                "listeners"
            };
            let Some(listener) = list.iter_mut().find(|l| l.name == name) else {
                return Err(bad(
                    "advertised.listeners",
                    format!("{name} is not one of the listeners"),
                ));
            };
            if listener.advertised.is_some() {
                return Err(bad(field, format!("{name} is advertised twice")));
            }
            if host == "0.0.0.0" || host == "::" {
                return Err(bad(
                    field,
                    format!(
                        "{name}: cannot advertise the non-routable address {host} \
                         (set advertised.listeners)"
                    ),
                ));
            }
            let host = if host.is_empty() {
                local_host_name()
            } else {
                host
            };
            // An advertised port 0 means the bound one, which is only known for a fixed port.
            let port = if port == 0 {
                listener.bind.port()
            } else {
                port
            };
            listener.advertised = Some((host, port));
        }
        let inter_broker =
            match (
                s.inter_broker_listener_name,
                s.security_inter_broker_protocol,
            ) {
                (Some(_), Some(_)) => return Err(bad(
                    "inter.broker.listener.name",
                    "only one of inter.broker.listener.name and security.inter.broker.protocol \
                     may be set",
                )),
                (Some(name), None) => name.trim().to_ascii_uppercase(),
                (None, Some(protocol)) => SecurityProtocol::parse(protocol)
                    .ok_or_else(|| {
                        bad(
                            "security.inter.broker.protocol",
                            format!("{protocol:?} is not a security protocol"),
                        )
                    })?
                    .name()
                    .to_string(),
                (None, None) => SecurityProtocol::Plaintext.name().to_string(),
            };
        if !list
            .iter()
            .any(|l| l.name == inter_broker && l.advertised.is_some())
        {
            return Err(bad(
                "inter.broker.listener.name",
                format!(
                    "{inter_broker} must be a listener name defined in advertised.listeners \
                     (set inter.broker.listener.name to one of {})",
                    list.iter()
                        .map(|l| l.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        Ok(Listeners { list, inter_broker })
    }

    /// The listener brokers use between themselves (replication).
    pub fn inter_broker(&self) -> &Listener {
        self.by_name(&self.inter_broker)
            .expect("checked when the listeners were made")
    }

    /// The four listener settings in force, in Kafka's text forms (for DescribeConfigs):
    /// what was given, or what `--listen`/`--advertised` and the defaults made of it.
    pub fn in_force(&self) -> [(&'static str, String); 4] {
        let join = |parts: Vec<String>| parts.join(",");
        let url = |name: &str, host: &str, port: u16| match host.contains(':') {
            true => format!("{name}://[{host}]:{port}"),
            false => format!("{name}://{host}:{port}"),
        };
        [
            (
                "listeners",
                join(
                    self.list
                        .iter()
                        .map(|l| url(&l.name, &l.bind.ip().to_string(), l.bind.port()))
                        .collect(),
                ),
            ),
            (
                "advertised.listeners",
                join(self.advertised().map(|(n, h, p)| url(n, h, p)).collect()),
            ),
            (
                "listener.security.protocol.map",
                join(
                    self.list
                        .iter()
                        .map(|l| format!("{}:{}", l.name, l.protocol.name()))
                        .collect(),
                ),
            ),
            ("inter.broker.listener.name", self.inter_broker.clone()),
        ]
    }

    pub fn by_name(&self, name: &str) -> Option<&Listener> {
        self.list.iter().find(|l| l.name == name)
    }

    /// The advertised listeners, as `(name, host, port)`.
    pub fn advertised(&self) -> impl Iterator<Item = (&str, &str, u16)> {
        self.list.iter().filter_map(|l| {
            l.advertised
                .as_ref()
                .map(|(host, port)| (l.name.as_str(), host.as_str(), *port))
        })
    }
}

/// Two binds on one port clash unless both name distinct, specific addresses.
fn port_shared(a: SocketAddr, b: SocketAddr) -> bool {
    a.ip().is_unspecified() || b.ip().is_unspecified() || a.ip() == b.ip()
}

/// `NAME:PROTOCOL,...`.
fn parse_protocol_map(text: &str) -> Result<Vec<(String, SecurityProtocol)>, ConfigError> {
    let field = "listener.security.protocol.map";
    let mut map = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, protocol) = entry
            .split_once(':')
            .ok_or_else(|| bad(field, format!("{entry:?} is not NAME:PROTOCOL")))?;
        let protocol = SecurityProtocol::parse(protocol)
            .ok_or_else(|| bad(field, format!("{protocol:?} is not a security protocol")))?;
        map.push((name.trim().to_ascii_uppercase(), protocol));
    }
    Ok(map)
}

fn protocol_of(
    map: &[(String, SecurityProtocol)],
    name: &str,
    field: &str,
) -> Result<SecurityProtocol, ConfigError> {
    map.iter()
        .find(|(n, _)| n == name)
        .map(|(_, p)| *p)
        .ok_or_else(|| {
            bad(
                field,
                format!("listener {name} has no entry in listener.security.protocol.map"),
            )
        })
}

/// `NAME://host:port,...` (an IPv6 host in brackets), as `(NAME, host, port)`.
fn parse_endpoints(field: &str, text: &str) -> Result<Vec<(String, String, u16)>, ConfigError> {
    let mut out = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let malformed = || bad(field, format!("{entry:?} is not NAME://HOST:PORT"));
        let (name, address) = entry.split_once("://").ok_or_else(malformed)?;
        let (host, port) = address.rsplit_once(':').ok_or_else(malformed)?;
        let port: u16 = port.parse().map_err(|_| malformed())?;
        if name.is_empty() {
            return Err(malformed());
        }
        let host = host.trim_start_matches('[').trim_end_matches(']');
        out.push((name.to_ascii_uppercase(), host.to_string(), port));
    }
    Ok(out)
}

fn bind_address(host: &str, port: u16) -> Result<SocketAddr, ConfigError> {
    let host = if host.is_empty() { "0.0.0.0" } else { host };
    (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| bad("listeners", format!("cannot resolve {host:?}")))
}

/// This machine's host name, advertised for a listener bound to every interface (Kafka
/// advertises the canonical host name there).
fn local_host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into the buffer we own.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    match (rc, std::str::from_utf8(&buf[..end])) {
        (0, Ok(name)) if !name.is_empty() => name.to_string(),
        _ => "localhost".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn make(listeners: &str) -> ListenerSettings<'_> {
        ListenerSettings {
            listeners: Some(listeners),
            ..Default::default()
        }
    }

    #[test]
    fn named_listeners_take_their_protocol_from_the_map() {
        let s = ListenerSettings {
            protocol_map: Some("INTERNAL:SASL_SSL,EXTERNAL:SSL"),
            inter_broker_listener_name: Some("internal"),
            ..make("INTERNAL://127.0.0.1:19093,external://127.0.0.1:19094")
        };
        let l = Listeners::from_settings(&s).unwrap();
        assert_eq!(l.inter_broker().name, "INTERNAL");
        assert_eq!(l.inter_broker().protocol, SecurityProtocol::SaslSsl);
        let external = l.by_name("EXTERNAL").unwrap();
        assert_eq!(external.protocol, SecurityProtocol::Ssl);
        assert_eq!(external.advertised, Some(("127.0.0.1".into(), 19094)));
    }

    #[test]
    fn kafkas_refusals() {
        let refused = |s: ListenerSettings| Listeners::from_settings(&s).unwrap_err().to_string();
        assert!(
            refused(make("PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2"))
                .contains("different name")
        );
        assert!(refused(make("PLAINTEXT://127.0.0.1:1,SSL://:1")).contains("different port"));
        assert!(refused(make("OTHER://127.0.0.1:1")).contains("protocol.map"));
        assert!(refused(make("PLAINTEXT://0.0.0.0:1")).contains("non-routable"));
        assert!(refused(make("SSL://127.0.0.1:1")).contains("inter.broker.listener.name"));
        assert!(refused(ListenerSettings {
            inter_broker_listener_name: Some("PLAINTEXT"),
            security_inter_broker_protocol: Some("PLAINTEXT"),
            ..make("PLAINTEXT://127.0.0.1:1")
        })
        .contains("only one"));
        assert!(refused(ListenerSettings {
            advertised_listeners: Some("SSL://h:1"),
            ..make("PLAINTEXT://127.0.0.1:1")
        })
        .contains("not one of the listeners"));
    }

    #[test]
    fn advertised_listeners_replace_the_bound_addresses() {
        let s = ListenerSettings {
            advertised_listeners: Some("PLAINTEXT://kafka1.example:9092"),
            ..make("PLAINTEXT://0.0.0.0:9092,SSL://127.0.0.1:9093")
        };
        let l = Listeners::from_settings(&s).unwrap();
        let advertised: Vec<_> = l.advertised().collect();
        assert_eq!(advertised, vec![("PLAINTEXT", "kafka1.example", 9092)]);
        assert!(l.list[0].bind.ip().is_unspecified());
    }
}
