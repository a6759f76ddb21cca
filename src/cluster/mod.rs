//! ZooKeeper mode: several brokers coordinated through ZooKeeper, in Kafka's znode layout.
//!
//! The ZooKeeper session lives on its own control thread (`session.rs`), never on a shard.
//! Shards talk to it through a `ZkHandle` (requests with a reply, such as creating a topic),
//! and it hands shard 0 a new `ClusterMetadata` whenever what ZooKeeper holds changes; shard 0
//! installs it on every shard as the single-broker controller does. The elected controller's
//! duties (leaders for new partitions, elections when brokers go, deletions) run on the
//! control thread of whichever broker holds `/controller` (`duties.rs`).
//!
//! A broker whose session expires is fenced: it publishes a view in which it leads nothing
//! until it has registered again with a new session. While ZooKeeper is only unreachable, the
//! last view stays: leaders keep serving and nothing changes.

pub mod acls;
mod changes;
mod duties;
pub mod requests;
mod session;
mod view;
mod zk;
pub mod znodes;

pub use requests::{IsrChange, Request};
pub use session::{start, ClusterOptions, Started};
pub use zk::PARTITION_OPS_IN_FLIGHT;

use ferrite_shards::foreign::{self, Reply};
use futures::channel::mpsc;

/// A ZooKeeper client for a command-line tool (`ferrite user`): connected, under the chroot
/// (created when missing, as a broker creates it), with `/config/users` and `/config/changes`
/// in place.
pub async fn admin_client(
    connect: &crate::config::ZkConnect,
) -> Result<zookeeper_client::Client, zookeeper_client::Error> {
    let timeout = std::time::Duration::from_secs(10);
    let client = zookeeper_client::Client::connector()
        .with_session_timeout(timeout)
        .with_connection_timeout(timeout)
        .connect(&connect.servers)
        .await?;
    let client = session::rooted(client, connect).await?;
    for path in ["/config", znodes::USER_CONFIGS, znodes::CONFIG_CHANGES] {
        zk::create_if_missing(&client, path, b"").await?;
    }
    Ok(client)
}

/// How long a shard waits for the control thread's answer.
const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// A shard's way to the control thread.
#[derive(Clone)]
pub struct ZkHandle {
    requests: mpsc::UnboundedSender<Request>,
}

impl ZkHandle {
    /// Sends `make(reply)` to the control thread and waits for its answer; `None` if the
    /// control thread has stopped.
    /// The answer comes back through this shard's foreign inbox, never by waking this task
    /// from the control thread (see `ferrite_shards::foreign`).
    pub async fn call<T: Send + 'static>(
        &self,
        make: impl FnOnce(Reply<T>) -> Request,
    ) -> Option<T> {
        let (reply, answer) = foreign::reply();
        self.requests.unbounded_send(make(reply)).ok()?;
        // Bounded: while ZooKeeper is unreachable the control thread answers nothing, and a
        // shard must not wait on it forever.
        glommio::timer::timeout(CALL_TIMEOUT, async {
            answer.await.ok_or_else(|| {
                glommio::GlommioError::IoError(std::io::Error::other("control thread gone"))
            })
        })
        .await
        .ok()
    }
}

/// The shard of this broker that owns a partition: spread by topic and index, and the same on
/// every start with the same number of shards (a partition's directory does not depend on it).
pub fn shard_for(topic: &str, partition: i32, shards: usize) -> usize {
    // FNV-1a: stable across processes and Rust versions, unlike the std hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in topic.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    ((h as usize).wrapping_add(partition.max(0) as usize)) % shards.max(1)
}

/// Kafka's replica placement without racks: partition p's replicas are `rf` consecutive
/// brokers (by id) from a start that moves with p, so leaders (the first replica) spread
/// evenly and no broker holds two replicas of a partition.
pub fn assign_replicas(
    brokers: &[i32],
    partitions: usize,
    rf: usize,
    start: usize,
) -> Vec<Vec<i32>> {
    let mut sorted = brokers.to_vec();
    sorted.sort_unstable();
    let n = sorted.len();
    (0..partitions)
        .map(|p| {
            (0..rf.min(n))
                .map(|r| sorted[(start + p + r) % n])
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicas_spread_leaders_and_never_repeat_a_broker() {
        let a = assign_replicas(&[3, 1, 2], 6, 3, 0);
        assert_eq!(a[0], vec![1, 2, 3]);
        assert_eq!(a[1], vec![2, 3, 1]);
        let mut leaders = [0; 4];
        for r in &a {
            leaders[r[0] as usize] += 1;
            let mut d = r.clone();
            d.dedup();
            assert_eq!(d.len(), 3);
        }
        assert_eq!(&leaders[1..], &[2, 2, 2]);
        assert_eq!(
            assign_replicas(&[1, 2], 1, 3, 0),
            vec![vec![1, 2]],
            "rf capped"
        );
    }

    #[test]
    fn placement_is_stable_and_spreads_a_topics_partitions() {
        assert_eq!(shard_for("orders", 3, 4), shard_for("orders", 3, 4));
        let shards: std::collections::HashSet<_> = (0..4).map(|p| shard_for("t", p, 4)).collect();
        assert_eq!(shards.len(), 4);
    }
}
