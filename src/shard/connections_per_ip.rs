//! Kafka's `max.connections.per.ip` and `max.connections.per.ip.overrides`
//! (`ConnectionQuotas`): how many client connections one address may hold at once, over every
//! listener and shard. Unlike `max.connections`, which makes the acceptor wait, a connection
//! past its address's limit is closed as soon as it is accepted (Kafka throws
//! `TooManyConnectionsException` and the acceptor closes the socket).

pub use crate::config::connections_per_ip::PerIpLimits;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

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
        if open.get(&ip).copied().unwrap_or(0) >= self.limits.limit_of(ip) {
            return None;
        }
        *open.entry(ip).or_insert(0) += 1;
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
    use crate::config::connections_per_ip::parse_overrides;

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
}
