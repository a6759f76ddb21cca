//! Kafka's `max.connections.per.ip` and `max.connections.per.ip.overrides`, as configured
//! (`shard::connections_per_ip` counts and enforces them).

use std::collections::HashMap;
use std::net::{IpAddr, ToSocketAddrs};

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

    pub fn limit_of(&self, ip: IpAddr) -> usize {
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

#[cfg(test)]
mod tests {
    use super::*;

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
