//! The broker's configuration: the tuning file (`tuning/*.toml`), then the command line over it.
//!
//! Two kinds of settings. Per-core settings (which cores run shards, I/O mode, memory and queue
//! bounds) live in `[shards]`, with `[core.N]` overrides. Broker and log defaults use Kafka's own
//! names (`num.partitions`, `log.retention.ms`, ...) under `[broker]`; topic-level configs fall
//! back to the `log.*` ones.

mod broker;
pub mod connections_per_ip;
mod listeners;
mod security;
mod tuning;
mod zookeeper;

pub use broker::{is_dynamic, BrokerSettings, BROKER_KEYS};
pub use listeners::{Listener, ListenerSettings, Listeners, SecurityProtocol};
pub use security::{KafkaConfigType, SecuritySettings};
pub use tuning::{ShardSettings, TuningFile};
pub use zookeeper::ZkConnect;

use ferrite_shards::IoMode;
use std::net::SocketAddr;
use std::path::PathBuf;

/// A setting that cannot be used, with where it came from.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}: {message}")]
    File { file: String, message: String },
    #[error("{field}: {message}")]
    Field { field: String, message: String },
}

/// What `ferrite serve` runs with.
#[derive(Clone, Debug)]
pub struct BrokerConfig {
    /// Where clients connect, how each listener is secured, and what Metadata tells them.
    pub listeners: Listeners,
    /// `authorizer.class.name` and its settings; `None`: every request is allowed.
    pub authorizer: Option<crate::security::acl::AuthorizerSettings>,
    pub data_dir: PathBuf,
    /// CPUs that run a shard each, in shard order.
    pub cores: Vec<usize>,
    pub node_id: i32,
    pub zookeeper: Option<ZkConnect>,
    /// Where the Prometheus endpoint listens; `None` when turned off.
    pub metrics: Option<SocketAddr>,
    /// The CPU the control thread is pinned to (`None`: wherever the kernel runs it).
    pub control_core: Option<usize>,
    /// Calls one shard may queue towards each other shard before callers wait.
    pub router_queue_depth: usize,
    /// Per-shard settings, indexed by shard.
    pub shards: Vec<ShardSettings>,
    pub broker: BrokerSettings,
}

impl BrokerConfig {
    pub fn shard(&self, shard: usize) -> &ShardSettings {
        &self.shards[shard]
    }

    pub fn io_mode(&self, shard: usize) -> IoMode {
        self.shards[shard].io_mode
    }
}

/// CPUs this process may run on, ascending.
pub fn online_cpus() -> Vec<usize> {
    // SAFETY: sched_getaffinity fills the zeroed set we own.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let ok =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) }
            == 0;
    let cpus: Vec<usize> = if ok {
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect()
    } else {
        Vec::new()
    };
    if cpus.is_empty() {
        let n = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        (0..n).collect()
    } else {
        cpus
    }
}

/// Pins the calling thread to `cpu`; threads it starts afterwards inherit the pinning (the
/// control thread does; shard executors pin themselves to their own core).
pub fn pin_current_thread(cpu: usize) -> std::io::Result<()> {
    // SAFETY: the set is zeroed and filled here; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
