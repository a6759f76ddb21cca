//! Kafka's `max.connections.per.ip` and `max.connections.per.ip.overrides`
//! (`ConnectionQuotas`): how many client connections one address may hold at once, over every
//! listener and shard. Unlike `max.connections`, which makes the acceptor wait, a connection
//! past its address's limit is closed as soon as it is accepted (Kafka throws
//! `TooManyConnectionsException` and the acceptor closes the socket).

use std::collections::HashMap;
use std::net::{IpAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};

/// The limits, as configured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerIpLimits {
    /// `max.connections.per.ip`.
    pub default: usize,
    /// `max.connections.per.ip.overrides`, by address.
    pub overrides: HashMap<IpAddr, usize>,
}

impl Default for PerIpLimits {
    fn default() -> Self {
        PerIpLimits {
            default: i32::MAX as usize,
            overrides: HashMap::new(),
        }
    }
}

impl PerIpLimits {
    /// Kafka refuses `max.connections.per.ip=0` without overrides (no client could connect).
    pub fn check(&self) -> Result<(), String> {
        if self.default == 0 && self.overrides.is_empty() {
            return Err("max.connections.per.ip.overrides must be set when \
                        max.connections.per.ip is 0"
                .to_string());
        }
        Ok(())
    }

    fn limit_of(&self, ip: IpAddr) -> usize {
        self.overrides.get(&ip).copied().unwrap_or(self.default)
    }
}

/// `host:count,host:count`; a host is an address or a name, resolved now (as Kafka resolves
/// it when the setting is read).
pub fn parse_overrides(value: &str) -> Result<HashMap<IpAddr, usize>, String> {
    let mut overrides = HashMap::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (host, count) = entry
            .rsplit_once(':')
            .ok_or_else(|| format!("{entry:?} is not host:count"))?;
        let count: usize = count
            .trim()
            .parse()
            .map_err(|_| format!("{entry:?}: {count:?} is not a count"))?;
        let host = host.trim().trim_start_matches('[').trim_end_matches(']');
        let ips: Vec<IpAddr> = match host.parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => (host, 0)
                .to_socket_addrs()
                .map_err(|e| format!("{entry:?}: {host:?} does not resolve: {e}"))?
                .map(|a| a.ip())
                .collect(),
        };
        for ip in ips {
            overrides.insert(ip, count);
        }
    }
    Ok(overrides)
}

/// The connections open per address, shared by every shard.
#[derive(Debug, Default)]
pub struct ConnectionsPerIp {
    limits: PerIpLimits,
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One connection's place in its address's count, given back when dropped (it moves with the
/// connection when the connection moves to another shard).
#[derive(Debug)]
pub struct IpClaim {
    counts: Arc<ConnectionsPerIp>,
    ip: IpAddr,
}

impl Drop for IpClaim {
    fn drop(&mut self) {
        let mut open = self.counts.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

impl ConnectionsPerIp {
    pub fn new(limits: PerIpLimits) -> ConnectionsPerIp {
        ConnectionsPerIp {
            limits,
            open: Mutex::default(),
        }
    }

    /// A place for one more connection from `ip`, or `None` when it holds its limit.
    pub fn claim(self: &Arc<Self>, ip: IpAddr) -> Option<IpClaim> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(ip).or_insert(0);
        if *n >= self.limits.limit_of(ip) {
            if *n == 0 {
                open.remove(&ip);
            }
            return None;
        }
        *n += 1;
        Some(IpClaim {
            counts: self.clone(),
            ip,
        })
    }

    pub fn limit_of(&self, ip: IpAddr) -> usize {
        self.limits.limit_of(ip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_holds_its_limit_and_an_override_its_own() {
        let limits = PerIpLimits {
            default: 2,
            overrides: parse_overrides("127.0.0.2:0, 127.0.0.3:3").unwrap(),
        };
        let counts = Arc::new(ConnectionsPerIp::new(limits));
        let one: IpAddr = "127.0.0.1".parse().unwrap();
        let a = counts.claim(one).unwrap();
        let _b = counts.claim(one).unwrap();
        assert!(counts.claim(one).is_none());
        drop(a);
        assert!(counts.claim(one).is_some());
        assert!(counts.claim("127.0.0.2".parse().unwrap()).is_none());
        let three: IpAddr = "127.0.0.3".parse().unwrap();
        let held: Vec<_> = (0..3).map(|_| counts.claim(three).unwrap()).collect();
        assert!(counts.claim(three).is_none());
        drop(held);
        assert!(counts.open.lock().unwrap().get(&three).is_none());
    }

    #[test]
    fn overrides_are_host_and_count_and_zero_needs_them() {
        assert!(parse_overrides("127.0.0.1").is_err());
        assert!(parse_overrides("127.0.0.1:x").is_err());
        let o = parse_overrides("localhost:5,[::1]:7").unwrap();
        assert_eq!(o.get(&"::1".parse::<IpAddr>().unwrap()), Some(&7));
        assert!(o.contains_key(&"127.0.0.1".parse::<IpAddr>().unwrap()));
        let zero = PerIpLimits {
            default: 0,
            overrides: HashMap::new(),
        };
        assert!(zero.check().is_err());
    }
}
