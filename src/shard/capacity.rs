//! What this broker process can hold, shared by its shards: partitions per shard, open file
//! descriptors and client connections. A topic change that would cross a bound is refused
//! before anything is created (as Redpanda refuses past `topic_partitions_per_shard`, with
//! INVALID_PARTITIONS), so file descriptors are never the limit that fails first: a broker out
//! of descriptors can accept no connection and could not even reopen its data directory.
//!
//! The descriptors are shared out at start (RLIMIT_NOFILE, raised to its hard limit as the JVM
//! does for Kafka): `DESCRIPTOR_HEADROOM` for the broker itself and each shard's splice pipes
//! (`SPLICE_PIPES_PER_SHARD`), then of the rest (the spare):
//! - connections, one descriptor each: a quarter of the spare while `max.connections` is
//!   Kafka's default (no bound); a `max.connections` the operator set is kept up to three
//!   quarters of it, so a broker can be given many connections at the cost of open segment files
//!   (never below their floor);
//! - segment files: two thirds of what the connections leave, at most half of the spare (half,
//!   with the default quarter for connections), split evenly over the shards (each shard keeps
//!   at most its share open and reopens the others on use,
//!   `ferrite_shards::log::set_open_segment_files_max`);
//! - the rest for direct-mode partitions (below).
//!
//! A limit that leaves a shard fewer than `SEGMENT_FILES_PER_SHARD_MIN` segment files stops the
//! broker at start with the figure it needs.
//!
//! So in buffered mode a partition holds no descriptor of its own, and partitions are bounded
//! by `topic.partitions.per.shard` (and memory), not by `ulimit -n`. In direct mode each
//! partition's active segment keeps an O_DIRECT descriptor open, checked before partitions
//! are added:
//!
//!   open now (segment files apart) + the segment files' share + new partitions × 1
//!     + connections not yet open × `DESCRIPTORS_PER_CONNECTION` + `DESCRIPTOR_HEADROOM`
//!     + the splice pipes ≤ RLIMIT_NOFILE

use super::connections_per_ip::{ConnectionsPerIp, IpClaim, PerIpLimits};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A partition of a direct-mode shard keeps the O_DIRECT descriptor of its active segment
/// open; its buffered descriptors are segment files, within the shard's share.
pub const DESCRIPTORS_PER_DIRECT_PARTITION: u64 = 1;
/// The fewest segment files a shard may be left to keep open: below it a broker with a few
/// busy partitions per shard would reopen files on every request.
pub const SEGMENT_FILES_PER_SHARD_MIN: u64 = 32;
/// A client connection: its socket (its reader and writer share the one descriptor; fetches
/// splice through pipes its shard lends).
pub const DESCRIPTORS_PER_CONNECTION: u64 = 1;
/// Pipes each shard lends to its connections' zero-copy fetches, two descriptors each: a pipe
/// is lent for one file range, so this bounds the ranges one shard splices at once, not its
/// connections (past it, a range is copied).
pub const SPLICE_PIPES_PER_SHARD: u64 = 32;
/// Left for everything else: io_uring rings, event fds, metadata and checkpoint files being
/// rewritten, the ZooKeeper session, log files of a cleaning pass.
pub const DESCRIPTOR_HEADROOM: u64 = 256;
/// Kafka's default `max.connections`, Int.MaxValue: no bound set.
const MAX_CONNECTIONS_UNSET: usize = i32::MAX as usize;

/// The process's bounds, and the connections open now.
#[derive(Debug)]
pub struct Capacity {
    /// RLIMIT_NOFILE, after `raise_descriptor_limit`.
    pub descriptor_limit: u64,
    /// `topic.partitions.per.shard`.
    pub partitions_per_shard: usize,
    /// Segment files each shard keeps open at most.
    pub segment_files_per_shard: u64,
    shards: u64,
    /// Descriptors a new partition holds of its own: 1 when a shard runs in direct mode.
    descriptors_per_new_partition: u64,
    /// `max.connections`, lowered to what the descriptors allow, and the connections open.
    connections: Arc<ConnectionCount>,
    /// `max.connections.per.ip`.
    pub per_ip: Arc<ConnectionsPerIp>,
    /// `listener.name.<l>.max.connections`, by upper-case listener name.
    listeners: HashMap<String, Arc<ConnectionCount>>,
}

/// One accepted connection's place in `max.connections` (and in its address's and its
/// listener's counts), given back when dropped.
pub struct ConnectionSlot {
    _broker: ConnectionClaim,
    _ip: Option<IpClaim>,
    _listener: Option<ConnectionClaim>,
}

/// A bound on connections and the connections open under it, over all shards: the broker's
/// `max.connections`, or one listener's `listener.name.<l>.max.connections` (KIP-402).
#[derive(Debug)]
pub struct ConnectionCount {
    pub max: usize,
    open: AtomicUsize,
}

/// A connection's place in a `ConnectionCount`, given back when dropped.
pub struct ConnectionClaim(Arc<ConnectionCount>);

impl ConnectionCount {
    fn new(max: usize) -> Arc<ConnectionCount> {
        Arc::new(ConnectionCount {
            max,
            open: AtomicUsize::new(0),
        })
    }

    /// A place for one more connection, or `None` at the bound.
    pub fn claim(self: &Arc<Self>) -> Option<ConnectionClaim> {
        let taken = self.open.fetch_add(1, Ordering::AcqRel);
        let claim = ConnectionClaim(self.clone());
        (taken < self.max).then_some(claim)
    }
}

impl Drop for ConnectionClaim {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}

impl ConnectionSlot {
    /// The slot holds the connection's place in its listener's count too.
    pub fn with_listener_claim(mut self, claim: Option<ConnectionClaim>) -> ConnectionSlot {
        self._listener = claim;
        self
    }

    /// The slot holds the connection's place in its address's count too (none when the
    /// peer's address is unknown).
    pub fn with_ip_claim(mut self, claim: Option<IpClaim>) -> ConnectionSlot {
        self._ip = claim;
        self
    }
}

impl Capacity {
    /// The bounds for a process of `shards` shards whose descriptor limit is
    /// `descriptor_limit`; `direct`: some shard runs in direct mode.
    pub fn new(
        descriptor_limit: u64,
        shards: usize,
        direct: bool,
        partitions_per_shard: usize,
        max_connections: usize,
    ) -> Capacity {
        let shards = shards.max(1) as u64;
        let spare = descriptor_limit.saturating_sub(DESCRIPTOR_HEADROOM + pipe_descriptors(shards));
        // A set max.connections may not take the segment files below their floor: they get
        // two thirds of what connections leave, so connections leave them 1.5 × the floor.
        let segment_floor = SEGMENT_FILES_PER_SHARD_MIN * shards;
        let connection_share = if max_connections >= MAX_CONNECTIONS_UNSET {
            spare / 4
        } else {
            (spare * 3 / 4).min(spare.saturating_sub(segment_floor * 3 / 2))
        } / DESCRIPTORS_PER_CONNECTION;
        let max_connections = max_connections.min(connection_share.max(1) as usize);
        let connection_descriptors = max_connections as u64 * DESCRIPTORS_PER_CONNECTION;
        let segment_files = (spare / 2).min(spare.saturating_sub(connection_descriptors) * 2 / 3);
        Capacity {
            descriptor_limit,
            partitions_per_shard,
            segment_files_per_shard: (segment_files / shards).max(1),
            shards,
            descriptors_per_new_partition: if direct {
                DESCRIPTORS_PER_DIRECT_PARTITION
            } else {
                0
            },
            connections: ConnectionCount::new(max_connections),
            per_ip: Arc::default(),
            listeners: HashMap::new(),
        }
    }

    /// Refuses a descriptor limit too low for this many shards, naming the one it needs.
    pub fn check_descriptor_limit(&self) -> Result<(), String> {
        if self.segment_files_per_shard >= SEGMENT_FILES_PER_SHARD_MIN {
            return Ok(());
        }
        // The segment files have half of the spare, whatever the connections take, unless the
        // spare is too small for that half to reach their floor.
        let needed = DESCRIPTOR_HEADROOM
            + pipe_descriptors(self.shards)
            + SEGMENT_FILES_PER_SHARD_MIN * self.shards * 2;
        Err(format!(
            "the open file limit (ulimit -n) is {}; {} shards need at least {needed} \
             (raise it with ulimit -n, or LimitNOFILE= in a systemd unit)",
            self.descriptor_limit, self.shards
        ))
    }

    /// With the bound of each listener that has one (`listener.name.<l>.max.connections`).
    pub fn with_listener_limits(
        mut self,
        limits: impl IntoIterator<Item = (String, usize)>,
    ) -> Capacity {
        self.listeners = limits
            .into_iter()
            .map(|(name, max)| (name, ConnectionCount::new(max)))
            .collect();
        self
    }

    /// The bound of listener `name` (upper case), if it has one.
    pub fn listener(&self, name: &str) -> Option<&Arc<ConnectionCount>> {
        self.listeners.get(name)
    }

    /// With `max.connections.per.ip` and its overrides.
    pub fn with_connections_per_ip(mut self, limits: PerIpLimits) -> Capacity {
        self.per_ip = Arc::new(ConnectionsPerIp::new(limits));
        self
    }

    /// A place for one more connection, or `None` at `max.connections`.
    pub fn open_connection(&self) -> Option<ConnectionSlot> {
        Some(ConnectionSlot {
            _broker: self.connections.claim()?,
            _ip: None,
            _listener: None,
        })
    }

    /// `max.connections`, lowered to what the descriptors allow.
    pub fn max_connections(&self) -> usize {
        self.connections.max
    }

    pub fn connections_open(&self) -> usize {
        self.connections.open.load(Ordering::Acquire)
    }

    /// Whether shards holding `per_shard_after` partitions (after a change adding `added`
    /// partitions to this process, `open_now` descriptors open before it) stay within the
    /// bounds; the refusal is the client's message.
    pub fn check_partitions(
        &self,
        per_shard_after: &[usize],
        added: usize,
        open_now: u64,
    ) -> Result<(), String> {
        self.check_shards(per_shard_after, added)?;
        self.check_descriptors(open_now, added as u64)
    }

    /// The per-shard bound alone, for another broker's shards (assumed as many as ours).
    pub fn check_shards(&self, per_shard_after: &[usize], added: usize) -> Result<(), String> {
        if let Some((shard, &count)) = per_shard_after
            .iter()
            .enumerate()
            .find(|(_, &c)| c > self.partitions_per_shard)
        {
            return Err(format!(
                "{added} more partitions would put {count} on shard {shard}, more than \
                 topic.partitions.per.shard ({}) allows",
                self.partitions_per_shard
            ));
        }
        Ok(())
    }

    /// `open_now`: descriptors open other than segment files (`open_descriptors`).
    fn check_descriptors(&self, open_now: u64, added: u64) -> Result<(), String> {
        let own = added * self.descriptors_per_new_partition;
        if own == 0 {
            return Ok(());
        }
        let connections_to_come = self
            .max_connections()
            .saturating_sub(self.connections_open()) as u64;
        let segment_files = self.segment_files_per_shard * self.shards;
        let needed = open_now
            + segment_files
            + own
            + connections_to_come * DESCRIPTORS_PER_CONNECTION
            + DESCRIPTOR_HEADROOM
            + pipe_descriptors(self.shards);
        if needed > self.descriptor_limit {
            return Err(format!(
                "{added} more direct-mode partitions need {own} file descriptors; {open_now} are \
                 open, {segment_files} are kept for segment files and {} for max.connections \
                 ({}) and the broker itself, of a limit of {} (raise LimitNOFILE, or lower \
                 max.connections)",
                connections_to_come * DESCRIPTORS_PER_CONNECTION
                    + DESCRIPTOR_HEADROOM
                    + pipe_descriptors(self.shards),
                self.max_connections(),
                self.descriptor_limit
            ));
        }
        Ok(())
    }
}

/// The descriptors of every shard's splice pipes, all lent at once.
fn pipe_descriptors(shards: u64) -> u64 {
    shards * SPLICE_PIPES_PER_SHARD * 2
}

/// The descriptors this process has open now other than segment files, which have their own
/// share (read once per topic change: the partitions it adds are counted apart until they are
/// open).
pub fn open_descriptors() -> u64 {
    let all = std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count() as u64)
        .unwrap_or(0);
    all.saturating_sub(ferrite_shards::log::segment_files_open_in_process() as u64)
}

/// Raises the soft RLIMIT_NOFILE to the hard one (what a process may do by itself) and
/// returns the limit now in force.
pub fn raise_descriptor_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit on a struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 1024;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    limit.rlim_cur
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_past_its_bound_is_named() {
        let c = Capacity::new(1_000_000, 2, false, 100, 10);
        assert!(c.check_partitions(&[100, 100], 10, 20).is_ok());
        let e = c.check_partitions(&[100, 101], 10, 20).unwrap_err();
        assert!(e.contains("101 on shard 1"), "{e}");
        assert!(e.contains("topic.partitions.per.shard (100)"), "{e}");
    }

    #[test]
    fn direct_mode_partitions_leave_room_for_segment_files_and_every_connection() {
        let c = Arc::new(Capacity::new(100_000, 2, true, 100_000, 1000));
        // Spare: 100,000 - 256 - 2 shards × 32 pipes × 2 = 99,616. Segment files: half of it,
        // 49,808; 1000 connections × 1 + 256 + 128 kept: 48,808 left for what is open and
        // what is added.
        assert_eq!(c.segment_files_per_shard, 24_904);
        assert!(c.check_descriptors(45_808, 3000).is_ok());
        let e = c.check_descriptors(45_809, 3000).unwrap_err();
        assert!(e.contains("limit of 100000"), "{e}");
        // Open connections are in "open now" already and no longer kept apart.
        let slots: Vec<_> = (0..500).map(|_| c.open_connection().unwrap()).collect();
        assert!(c.check_descriptors(46_308, 3000).is_ok());
        assert!(c.check_descriptors(46_309, 3000).is_err());
        drop(slots);
        assert_eq!(c.connections_open(), 0);
    }

    #[test]
    fn buffered_partitions_hold_no_descriptor_of_their_own() {
        let c = Capacity::new(600, 2, false, 100_000, usize::MAX);
        assert!(c.check_descriptors(500, 100_000).is_ok());
        assert_eq!(c.segment_files_per_shard, (600 - 256 - 128) / 2 / 2);
    }

    #[test]
    fn a_limit_too_low_for_the_shards_is_refused_with_the_one_needed() {
        assert!(Capacity::new(512, 2, false, 1000, 10)
            .check_descriptor_limit()
            .is_ok());
        let e = Capacity::new(511, 2, false, 1000, 10)
            .check_descriptor_limit()
            .unwrap_err();
        assert!(
            e.contains("is 511") && e.contains("at least 512 (raise"),
            "{e}"
        );
    }

    #[test]
    fn connections_stop_at_the_bound_and_come_back_when_closed() {
        let c = Arc::new(Capacity::new(1_000_000, 2, false, 1000, 2));
        let a = c.open_connection().unwrap();
        let _b = c.open_connection().unwrap();
        assert!(c.open_connection().is_none());
        drop(a);
        assert!(c.open_connection().is_some());
    }

    #[test]
    fn max_connections_unset_is_a_quarter_of_the_descriptors() {
        let spare = 20_000 - 256 - 128;
        for unset in [usize::MAX, i32::MAX as usize] {
            let c = Capacity::new(20_000, 2, false, 1000, unset);
            assert_eq!(c.max_connections(), spare / 4);
            assert_eq!(c.segment_files_per_shard as usize, spare / 2 / 2);
        }
    }

    #[test]
    fn max_connections_set_is_kept_up_to_three_quarters_at_the_cost_of_segment_files() {
        let spare = 20_000 - 256 - 128;
        let c = Capacity::new(20_000, 2, false, 1000, 10_000);
        assert_eq!(c.max_connections(), 10_000);
        assert_eq!(
            c.segment_files_per_shard as usize,
            (spare - 10_000) * 2 / 3 / 2
        );
        let c = Capacity::new(20_000, 2, false, 1000, 1_000_000);
        assert_eq!(c.max_connections(), spare * 3 / 4);
        // A small bound leaves the segment files their usual half.
        let c = Capacity::new(20_000, 2, false, 1000, 100);
        assert_eq!(c.segment_files_per_shard as usize, spare / 2 / 2);
    }

    #[test]
    fn max_connections_set_never_takes_the_segment_files_below_their_floor() {
        // Spare 128: three quarters would leave the segment files 21, below 2 shards × 32.
        let c = Capacity::new(512, 2, false, 1000, 10_000);
        assert_eq!(c.max_connections(), 128 - 64 * 3 / 2);
        assert_eq!(c.segment_files_per_shard, SEGMENT_FILES_PER_SHARD_MIN);
        assert!(c.check_descriptor_limit().is_ok());
    }
}
