//! `--zookeeper HOST:PORT[,HOST:PORT...][/CHROOT]`, split as Kafka splits `zookeeper.connect`:
//! the chroot starts at the first `/` and applies to every server.

use super::ConfigError;

/// A ZooKeeper connect string, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZkConnect {
    /// `host:port[,host:port...]` without the chroot.
    pub servers: String,
    /// The chroot path (`/kafka/prod`), `None` for the root.
    pub chroot: Option<String>,
}

impl ZkConnect {
    pub fn parse(connect: &str) -> Result<ZkConnect, ConfigError> {
        let bad = |message: String| ConfigError::Field {
            field: "--zookeeper".into(),
            message,
        };
        let (servers, chroot) = match connect.find('/') {
            None => (connect, None),
            Some(at) => (&connect[..at], Some(&connect[at..])),
        };
        if servers.is_empty() || servers.split(',').any(|s| s.trim().is_empty()) {
            return Err(bad(format!("{connect:?} names no ZooKeeper server")));
        }
        let chroot = match chroot {
            None | Some("/") => None,
            Some(path) => Some(checked_chroot(path).map_err(bad)?),
        };
        Ok(ZkConnect {
            servers: servers.to_string(),
            chroot,
        })
    }

    /// Each path from the root down to the chroot (`/a`, `/a/b`), the nodes Kafka creates
    /// when the chroot is missing.
    pub fn chroot_ancestry(&self) -> Vec<String> {
        let Some(chroot) = &self.chroot else {
            return Vec::new();
        };
        chroot
            .match_indices('/')
            .skip(1)
            .map(|(at, _)| chroot[..at].to_string())
            .chain(std::iter::once(chroot.clone()))
            .collect()
    }
}

impl std::fmt::Display for ZkConnect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}{}",
            self.servers,
            self.chroot.as_deref().unwrap_or("")
        )
    }
}

/// ZooKeeper's own path rules (no empty, `.` or `..` component, no trailing `/`), checked here
/// so that a typo stops start-up instead of failing every session attempt.
fn checked_chroot(path: &str) -> Result<String, String> {
    let components: Vec<&str> = path[1..].split('/').collect();
    for c in &components {
        if c.is_empty() || *c == "." || *c == ".." {
            return Err(format!(
                "chroot {path:?} is not a ZooKeeper path (empty, \".\" or \"..\" component)"
            ));
        }
        if c.chars().any(|ch| ch.is_control()) {
            return Err(format!("chroot {path:?} holds a control character"));
        }
    }
    Ok(path.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_the_chroot_at_the_first_slash() {
        let c = ZkConnect::parse("a:1,b:2/kafka/prod").unwrap();
        assert_eq!(c.servers, "a:1,b:2");
        assert_eq!(c.chroot.as_deref(), Some("/kafka/prod"));
        assert_eq!(c.chroot_ancestry(), ["/kafka", "/kafka/prod"]);
        assert_eq!(c.to_string(), "a:1,b:2/kafka/prod");
    }

    #[test]
    fn no_chroot_or_a_bare_slash_is_the_root() {
        for s in ["a:1", "a:1/"] {
            let c = ZkConnect::parse(s).unwrap();
            assert_eq!(c.chroot, None);
            assert!(c.chroot_ancestry().is_empty());
        }
    }

    #[test]
    fn refuses_paths_zookeeper_refuses_and_missing_servers() {
        for bad in [
            "a:1/x/",
            "a:1//x",
            "a:1/x/../y",
            "a:1/./x",
            "/x",
            "a:1,/x",
            "",
        ] {
            assert!(ZkConnect::parse(bad).is_err(), "{bad:?} accepted");
        }
    }
}
