//! The group coordinator of one shard: the groups whose `__consumer_offsets` partition this
//! shard owns, their rebalances, sessions and committed offsets.
//!
//! Every change that must survive a restart — an assignment, an emptied group, committed
//! offsets, a deletion — is a record appended to the group's `__consumer_offsets` partition and
//! acknowledged only once written, so it is as durable as any data. At start-up the shard reads
//! its partitions back (`load`).
//!
//! The coordinator is built from the narrow parts it uses (`GroupHost`: its shard's
//! `__consumer_offsets` partitions and a few metadata questions), held weakly, so it can be
//! tested on a temporary directory without a broker (`tests.rs`). Its work is split by job:
//! `join.rs` (JoinGroup, rebalances), `sync.rs` (SyncGroup, Heartbeat, LeaveGroup, sessions),
//! `offsets.rs`, `admin.rs` (List/Describe/DeleteGroups), `load.rs` (rebuilding from the log),
//! `store.rs` (writing to it). Timers hold the coordinator weakly too.
//!
//! Lives on: every shard, for the groups placed on it.

mod admin;
mod join;
mod load;
mod offsets;
mod store;
mod sync;
#[cfg(test)]
mod tests;
mod txn_offsets;

use super::group::{Group, JoinReply, Member, State, SyncReply};
use super::host::GroupHost;
use super::records::{GroupValue, Key, OffsetValue};
use crate::protocol::errors::ErrorCode;
use bytes::Bytes;
use ferrite_shards::batch::build::{
    build_batch, build_transactional_batch, decode_records, NewRecord, ProducerFields,
};
use ferrite_shards::batch::split_batches;
use ferrite_shards::partition::Partition;
use ferrite_shards::types::now_ms;
use futures::channel::oneshot;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::{Rc, Weak};
use std::time::{Duration, Instant};

/// How often sessions are checked for expiry.
const SESSION_SWEEP: Duration = Duration::from_millis(200);
/// Bytes read at once when loading a `__consumer_offsets` partition.
const LOAD_READ_BYTES: usize = 8 << 20;

#[derive(Clone, Debug)]
pub struct GroupConfig {
    /// `group.initial.rebalance.delay.ms`: a new group's first rebalance waits for more members.
    pub initial_rebalance_delay: Duration,
    /// `group.min.session.timeout.ms` / `group.max.session.timeout.ms`.
    pub min_session_timeout: Duration,
    pub max_session_timeout: Duration,
    /// `offset.metadata.max.bytes`.
    pub offset_metadata_max_bytes: usize,
}

/// A JoinGroup as the coordinator needs it.
pub struct JoinArgs {
    pub group_id: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    pub client_id: String,
    pub client_host: String,
    pub version: i16,
}

pub struct SyncArgs {
    pub group_id: String,
    pub generation: i32,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub assignments: Vec<(String, Bytes)>,
}

/// A TxnOffsetCommit as the coordinator needs it.
pub struct TxnCommitArgs {
    pub commit: CommitArgs,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// From the partition's verification (KIP-890), when the producer's transaction is not
    /// open on the group's partition yet.
    pub guard: Option<u64>,
}

pub struct CommitArgs {
    pub group_id: String,
    pub generation: i32,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub offsets: Vec<CommitOffset>,
}

/// One position to commit.
#[derive(Clone, Debug)]
pub struct CommitOffset {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

/// A group as DescribeGroups shows it.
pub struct Described {
    pub error: ErrorCode,
    pub state: &'static str,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<DescribedMember>,
}

/// A member as DescribeGroups shows it.
#[derive(Clone, Debug)]
pub struct DescribedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// Its subscription in the group's protocol (empty unless the group has one).
    pub metadata: Bytes,
    /// What it was assigned (empty unless the group is stable).
    pub assignment: Bytes,
}

/// A group as ListGroups shows it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ListedGroup {
    pub group_id: String,
    pub protocol_type: String,
    pub state: &'static str,
}

pub struct Coordinator {
    groups: RefCell<HashMap<String, Rc<RefCell<Group>>>>,
    config: GroupConfig,
    /// The shard it runs on, as the parts the coordinator uses.
    host: Weak<dyn GroupHost>,
    /// `__consumer_offsets` partitions whose groups are being read (after a leadership gain).
    loading: RefCell<std::collections::HashSet<i32>>,
}

type GroupRef = Rc<RefCell<Group>>;

/// Committed offsets by topic: (partition, the committed value if any).
pub type CommittedOffsets = Vec<(String, Vec<(i32, Fetched)>)>;

/// One partition's committed offset as OffsetFetch reads it.
#[derive(Clone, Debug, PartialEq)]
pub enum Fetched {
    /// The committed value, if any.
    Committed(Option<OffsetValue>),
    /// A transaction not yet ended holds an offset for it, and the reader asked for stable
    /// offsets only.
    Unstable,
}

fn new_member_id(client_id: &str) -> String {
    let id = crate::metadata::random_id();
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let prefix = if client_id.is_empty() {
        "member"
    } else {
        client_id
    };
    format!(
        "{prefix}-{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

impl Coordinator {
    pub fn new(config: GroupConfig, host: Weak<dyn GroupHost>) -> Coordinator {
        Coordinator {
            groups: RefCell::new(HashMap::new()),
            config,
            host,
            loading: RefCell::new(std::collections::HashSet::new()),
        }
    }

    pub fn is_loading(&self, partition: i32) -> bool {
        self.loading.borrow().contains(&partition)
    }

    /// Drops the groups of one `__consumer_offsets` partition (of `partitions`): this broker
    /// no longer leads it, or is about to read it again.
    pub fn forget_partition(&self, partition: i32, partitions: i32) {
        self.groups
            .borrow_mut()
            .retain(|id, _| super::records::coordinator_partition(id, partitions) != partition);
    }

    /// Reads a partition's groups afresh, answering LOAD_IN_PROGRESS meanwhile: this broker
    /// has just become its leader, and what it replicated as a follower is the truth now.
    pub async fn reload(
        &self,
        partition: &Rc<Partition>,
        partitions: i32,
    ) -> Result<(usize, usize), String> {
        let index = partition.index();
        self.loading.borrow_mut().insert(index);
        self.forget_partition(index, partitions);
        let loaded = self.load(partition).await;
        self.loading.borrow_mut().remove(&index);
        loaded
    }

    fn group(&self, id: &str) -> Option<GroupRef> {
        self.groups.borrow().get(id).cloned()
    }

    fn group_or_create(&self, id: &str) -> GroupRef {
        self.groups
            .borrow_mut()
            .entry(id.to_string())
            .or_insert_with(|| Rc::new(RefCell::new(Group::new(id))))
            .clone()
    }

    /// The shard it runs on; `None` once the shard is gone.
    fn host(&self) -> Option<Rc<dyn GroupHost>> {
        self.host.upgrade()
    }

    /// Starts the session-expiry sweeper of this shard's groups; it ends with the shard (it
    /// holds the coordinator weakly).
    pub fn start(self: &Rc<Self>) {
        let me = Rc::downgrade(self);
        glommio::spawn_local(async move {
            loop {
                glommio::timer::sleep(SESSION_SWEEP).await;
                let Some(me) = me.upgrade() else { return };
                if me.host().is_none_or(|h| h.is_shutting_down()) {
                    return;
                }
                me.expire_sessions();
            }
        })
        .detach();
    }
}

enum Admitted {
    Reply(JoinReply),
    /// Wait for the join phase to complete; the rebalance's epoch if this join started one.
    Wait(oneshot::Receiver<JoinReply>, Option<u64>),
    /// Reply once the group is stored.
    AfterStoring(JoinReply),
}

/// The join answer of the current generation, for a member rejoining without change.
fn current_join(g: &Group, member_id: &str) -> JoinReply {
    let protocol = g.protocol.clone().unwrap_or_default();
    let leader = g.leader.clone().unwrap_or_default();
    let members = if leader == member_id {
        g.members_in_join_order(&protocol)
    } else {
        Vec::new()
    };
    JoinReply {
        error: ErrorCode::NONE,
        generation: g.generation,
        protocol_type: g.protocol_type.clone(),
        protocol: Some(protocol),
        leader,
        member_id: member_id.to_string(),
        members,
        skip_assignment: false,
    }
}

/// A member, its instance id and generation must match the group's.
fn check_member(
    g: &Group,
    member_id: &str,
    instance_id: &Option<String>,
    generation: i32,
) -> Result<(), ErrorCode> {
    if let Some(inst) = instance_id {
        if let Some(current) = g.instances.get(inst) {
            if current != member_id {
                return Err(ErrorCode::FENCED_INSTANCE_ID);
            }
        }
    }
    let Some(m) = g.members.get(member_id) else {
        return Err(ErrorCode::UNKNOWN_MEMBER_ID);
    };
    if instance_id.is_some() && &m.instance_id != instance_id {
        return Err(ErrorCode::FENCED_INSTANCE_ID);
    }
    if generation != g.generation {
        return Err(ErrorCode::ILLEGAL_GENERATION);
    }
    Ok(())
}
