//! The group coordinator of one shard: the groups whose `__consumer_offsets` partition this
//! shard owns, their rebalances, sessions and committed offsets.
//!
//! Every change that must survive a restart — an assignment, an emptied group, committed
//! offsets, a deletion — is a record appended to the group's `__consumer_offsets` partition and
//! acknowledged only once written, so it is as durable as any data. At start-up the shard reads
//! its partitions back (`load`).
//!
//! Lives on: every shard, for the groups placed on it.

use super::group::{Group, JoinReply, Member, State, SyncReply};
use super::records::{GroupValue, Key, OffsetValue};
use crate::metadata::CONSUMER_OFFSETS_TOPIC;
use crate::protocol::errors::ErrorCode;
use crate::shard::Shard;
use bytes::Bytes;
use ferrite_shards::batch::build::{build_batch, decode_records, NewRecord, ProducerFields};
use ferrite_shards::batch::split_batches;
use ferrite_shards::partition::Partition;
use ferrite_shards::types::now_ms;
use futures::channel::oneshot;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
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

pub struct CommitArgs {
    pub group_id: String,
    pub generation: i32,
    pub member_id: String,
    pub instance_id: Option<String>,
    /// (topic, partition, offset, leader epoch, metadata)
    pub offsets: Vec<(String, i32, i64, i32, Option<String>)>,
}

/// A group as DescribeGroups shows it.
pub struct Described {
    pub error: ErrorCode,
    pub state: &'static str,
    pub protocol_type: String,
    pub protocol: String,
    /// (member id, instance id, client id, host, metadata, assignment)
    pub members: Vec<(String, Option<String>, String, String, Bytes, Bytes)>,
}

pub struct Coordinator {
    groups: RefCell<HashMap<String, Rc<RefCell<Group>>>>,
    config: GroupConfig,
    /// `__consumer_offsets` partitions whose groups are being read (after a leadership gain).
    loading: RefCell<std::collections::HashSet<i32>>,
}

type GroupRef = Rc<RefCell<Group>>;

/// Committed offsets by topic: (partition, the committed value if any).
pub type CommittedOffsets = Vec<(String, Vec<(i32, Option<OffsetValue>)>)>;

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
    pub fn new(config: GroupConfig) -> Coordinator {
        Coordinator {
            groups: RefCell::new(HashMap::new()),
            config,
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

    /// Starts the session-expiry sweeper of this shard's groups.
    pub fn start(self: &Rc<Self>, shard: &Rc<Shard>) {
        let me = self.clone();
        let shard = shard.clone();
        glommio::spawn_local(async move {
            while !shard.is_shutting_down() {
                glommio::timer::sleep(SESSION_SWEEP).await;
                me.expire_sessions(&shard);
            }
        })
        .detach();
    }

    // ---- JoinGroup -------------------------------------------------------------------------

    pub async fn join(
        self: &Rc<Self>,
        shard: &Rc<Shard>,
        partition: i32,
        a: JoinArgs,
    ) -> JoinReply {
        let c = &self.config;
        if a.session_timeout < c.min_session_timeout || a.session_timeout > c.max_session_timeout {
            return JoinReply::error(ErrorCode::INVALID_SESSION_TIMEOUT, &a.member_id);
        }
        let group = self.group_or_create(&a.group_id);
        let admitted = {
            let mut g = group.borrow_mut();
            if g.state == State::Dead {
                return JoinReply::error(ErrorCode::COORDINATOR_NOT_AVAILABLE, &a.member_id);
            }
            if !g.accepts(&a.protocol_type, &a.protocols) {
                return JoinReply::error(ErrorCode::INCONSISTENT_GROUP_PROTOCOL, &a.member_id);
            }
            let now = Instant::now();
            g.pending.retain(|_, deadline| *deadline > now);
            self.admit(&mut g, a, now)
        };
        let (waiter, rebalance) = match admitted {
            Admitted::Reply(r) => return r,
            Admitted::Wait(w, rebalance) => (w, rebalance),
            Admitted::AfterStoring(reply) => {
                return self.store_then_reply(shard, partition, &group, reply).await;
            }
        };
        if let Some(epoch) = rebalance {
            self.spawn_rebalance_timer(shard, partition, &group, epoch);
        }
        self.maybe_complete_join(shard, partition, &group);
        waiter
            .await
            .unwrap_or_else(|_| JoinReply::error(ErrorCode::UNKNOWN_MEMBER_ID, ""))
    }

    /// Stores the group (a static member's new id) and replies, unless the group moved on.
    async fn store_then_reply(
        &self,
        shard: &Rc<Shard>,
        partition: i32,
        group: &GroupRef,
        reply: JoinReply,
    ) -> JoinReply {
        let (id, value, generation) = {
            let g = group.borrow();
            (g.id.clone(), g.to_value(), g.generation)
        };
        let key = Key::Group { group: id };
        if let Err(code) =
            append(shard, partition, vec![(key.encode(), Some(value.encode()))]).await
        {
            return JoinReply::error(code, &reply.member_id);
        }
        if group.borrow().generation != generation {
            return JoinReply::error(ErrorCode::REBALANCE_IN_PROGRESS, &reply.member_id);
        }
        reply
    }

    fn admit(&self, g: &mut Group, a: JoinArgs, now: Instant) -> Admitted {
        if a.member_id.is_empty() {
            let new_id = new_member_id(&a.client_id);
            if let Some(inst) = a.instance_id.clone() {
                if let Some(old_id) = g.instances.get(&inst).cloned() {
                    return self.rejoin_static(g, &old_id, new_id, a, now);
                }
                return self.add_member(g, new_id, a, now);
            }
            if a.version >= 4 {
                // KIP-394: the client learns its id first and joins again with it.
                g.pending.insert(new_id.clone(), now + a.session_timeout);
                return Admitted::Reply(JoinReply::error(ErrorCode::MEMBER_ID_REQUIRED, &new_id));
            }
            return self.add_member(g, new_id, a, now);
        }
        if g.pending.remove(&a.member_id).is_some() {
            let id = a.member_id.clone();
            return self.add_member(g, id, a, now);
        }
        let is_leader = g.leader.as_deref() == Some(a.member_id.as_str());
        let state = g.state;
        let Some(m) = g.members.get_mut(&a.member_id) else {
            return Admitted::Reply(JoinReply::error(ErrorCode::UNKNOWN_MEMBER_ID, &a.member_id));
        };
        if m.instance_id != a.instance_id {
            return Admitted::Reply(JoinReply::error(
                ErrorCode::FENCED_INSTANCE_ID,
                &a.member_id,
            ));
        }
        let unchanged = m.protocols == a.protocols;
        m.protocols = a.protocols;
        m.session_timeout = a.session_timeout;
        m.rebalance_timeout = a.rebalance_timeout;
        m.last_heartbeat = now;
        let member_id = a.member_id;
        match state {
            State::CompletingRebalance if unchanged => Admitted::Reply(current_join(g, &member_id)),
            State::Stable if unchanged && !is_leader => {
                Admitted::Reply(current_join(g, &member_id))
            }
            _ => {
                let (tx, rx) = oneshot::channel();
                g.members.get_mut(&member_id).expect("present").join_waiter = Some(tx);
                let rebalance = self.start_rebalance(g);
                Admitted::Wait(rx, rebalance)
            }
        }
    }

    fn add_member(&self, g: &mut Group, id: String, a: JoinArgs, now: Instant) -> Admitted {
        let (tx, rx) = oneshot::channel();
        if g.members.is_empty() {
            g.protocol_type = Some(a.protocol_type.clone());
        }
        if let Some(inst) = &a.instance_id {
            g.instances.insert(inst.clone(), id.clone());
        }
        let joined_at = g.next_order();
        g.members.insert(
            id.clone(),
            Member {
                id,
                instance_id: a.instance_id,
                client_id: a.client_id,
                client_host: a.client_host,
                session_timeout: a.session_timeout,
                rebalance_timeout: a.rebalance_timeout,
                protocols: a.protocols,
                assignment: Bytes::new(),
                last_heartbeat: now,
                joined_at,
                join_waiter: Some(tx),
                sync_waiter: None,
            },
        );
        // New members arriving during a new group's initial delay extend it, within the
        // rebalance timeout, so a whole fleet of consumers lands in one first generation.
        if let (Some(until), Some(deadline)) = (g.initial_until, g.rebalance_deadline) {
            let extended = (now + self.config.initial_rebalance_delay).min(deadline);
            if extended > until {
                g.initial_until = Some(extended);
            }
        }
        let rebalance = self.start_rebalance(g);
        Admitted::Wait(rx, rebalance)
    }

    /// A static member restarting (same `group.instance.id`, no member id): it takes its old
    /// place under a new id; the old id is fenced. In a stable group whose protocol would not
    /// change, there is no rebalance: the member (even the leader) gets its old assignment
    /// back once the new id is stored, as Kafka does since KIP-814.
    fn rejoin_static(
        &self,
        g: &mut Group,
        old_id: &str,
        new_id: String,
        a: JoinArgs,
        now: Instant,
    ) -> Admitted {
        let was_leader = g.leader.as_deref() == Some(old_id);
        let Some(old) = g.remove_member(old_id, ErrorCode::FENCED_INSTANCE_ID) else {
            return self.add_member(g, new_id, a, now);
        };
        let inst = a.instance_id.clone().expect("static member");
        g.instances.insert(inst, new_id.clone());
        if was_leader {
            g.leader = Some(new_id.clone());
        }
        g.members.insert(
            new_id.clone(),
            Member {
                id: new_id.clone(),
                instance_id: a.instance_id,
                client_id: a.client_id,
                client_host: a.client_host,
                session_timeout: a.session_timeout,
                rebalance_timeout: a.rebalance_timeout,
                protocols: a.protocols,
                assignment: old.assignment,
                last_heartbeat: now,
                joined_at: old.joined_at,
                join_waiter: None,
                sync_waiter: None,
            },
        );
        tracing::info!(group = %g.id, old = %old_id, new = %new_id, "static member rejoined");
        if g.state == State::Stable && g.select_protocol() == g.protocol {
            let mut reply = current_join(g, &new_id);
            reply.skip_assignment = was_leader;
            return Admitted::AfterStoring(reply);
        }
        let (tx, rx) = oneshot::channel();
        g.members.get_mut(&new_id).expect("inserted").join_waiter = Some(tx);
        let rebalance = self.start_rebalance(g);
        Admitted::Wait(rx, rebalance)
    }

    /// Moves the group to PreparingRebalance; returns the new rebalance's epoch when it
    /// started one (the caller starts its timer).
    fn start_rebalance(&self, g: &mut Group) -> Option<u64> {
        if g.state == State::PreparingRebalance {
            return None;
        }
        let first = g.state == State::Empty;
        let now = Instant::now();
        for m in g.members.values_mut() {
            if let Some(w) = m.sync_waiter.take() {
                m.last_heartbeat = now;
                let _ = w.send(SyncReply::error(ErrorCode::REBALANCE_IN_PROGRESS));
            }
        }
        g.set_state(State::PreparingRebalance);
        g.rebalance_epoch += 1;
        g.rebalance_deadline = Some(now + g.largest_rebalance_timeout());
        let delay = self.config.initial_rebalance_delay;
        g.initial_until = (first && !delay.is_zero()).then(|| now + delay);
        tracing::debug!(group = %g.id, members = g.members.len(), "rebalance started");
        Some(g.rebalance_epoch)
    }

    fn spawn_rebalance_timer(
        self: &Rc<Self>,
        shard: &Rc<Shard>,
        partition: i32,
        group: &GroupRef,
        epoch: u64,
    ) {
        let (me, shard, group) = (self.clone(), shard.clone(), group.clone());
        glommio::spawn_local(async move {
            loop {
                let (deadline, initial) = {
                    let g = group.borrow();
                    if g.rebalance_epoch != epoch || g.state != State::PreparingRebalance {
                        return;
                    }
                    (
                        g.rebalance_deadline.unwrap_or_else(Instant::now),
                        g.initial_until,
                    )
                };
                let now = Instant::now();
                let wake = initial
                    .filter(|t| *t > now)
                    .map_or(deadline, |t| t.min(deadline));
                if wake > now {
                    glommio::timer::sleep(wake - now).await;
                }
                let now = Instant::now();
                {
                    let mut g = group.borrow_mut();
                    if g.rebalance_epoch != epoch || g.state != State::PreparingRebalance {
                        return;
                    }
                    if g.initial_until.is_some_and(|t| now >= t) {
                        g.initial_until = None;
                    }
                }
                if now >= deadline {
                    me.complete_join(&shard, partition, &group);
                    return;
                }
                me.maybe_complete_join(&shard, partition, &group);
            }
        })
        .detach();
    }

    fn maybe_complete_join(self: &Rc<Self>, shard: &Rc<Shard>, partition: i32, group: &GroupRef) {
        let ready = {
            let g = group.borrow();
            g.state == State::PreparingRebalance
                && g.all_joined()
                && g.initial_until.is_none_or(|t| Instant::now() >= t)
        };
        if ready {
            self.complete_join(shard, partition, group);
        }
    }

    /// Ends the join phase: members that did not rejoin are out; the rest get the new
    /// generation, and the leader everyone's metadata.
    fn complete_join(self: &Rc<Self>, shard: &Rc<Shard>, partition: i32, group: &GroupRef) {
        let mut g = group.borrow_mut();
        if g.state != State::PreparingRebalance {
            return;
        }
        let late: Vec<String> = g
            .members
            .values()
            .filter(|m| m.join_waiter.is_none())
            .map(|m| m.id.clone())
            .collect();
        for id in late {
            g.remove_member(&id, ErrorCode::UNKNOWN_MEMBER_ID);
        }
        g.generation += 1;
        g.rebalance_deadline = None;
        g.initial_until = None;
        if g.members.is_empty() {
            g.protocol = None;
            g.leader = None;
            g.set_state(State::Empty);
            tracing::info!(group = %g.id, generation = g.generation, "group empty");
            let value = g.to_value();
            let id = g.id.clone();
            drop(g);
            self.persist_group(shard, partition, id, value);
            return;
        }
        g.protocol = g.select_protocol();
        if g.leader.as_ref().is_none_or(|l| !g.members.contains_key(l)) {
            g.leader = g
                .members
                .values()
                .min_by_key(|m| m.joined_at)
                .map(|m| m.id.clone());
        }
        g.set_state(State::CompletingRebalance);
        let protocol = g.protocol.clone().unwrap_or_default();
        let leader = g.leader.clone().unwrap_or_default();
        let mut everyone: Vec<(u64, String, Option<String>, Bytes)> = g
            .members
            .values()
            .map(|m| {
                (
                    m.joined_at,
                    m.id.clone(),
                    m.instance_id.clone(),
                    m.metadata_for(&protocol),
                )
            })
            .collect();
        everyone.sort_by_key(|e| e.0);
        let everyone: Vec<(String, Option<String>, Bytes)> =
            everyone.into_iter().map(|(_, a, b, c)| (a, b, c)).collect();
        let (generation, protocol_type) = (g.generation, g.protocol_type.clone());
        tracing::info!(group = %g.id, generation, members = everyone.len(), protocol = %protocol, "join completed");
        for m in g.members.values_mut() {
            if let Some(w) = m.join_waiter.take() {
                // Its session runs from the answer: it could not heartbeat while waiting.
                m.last_heartbeat = Instant::now();
                let _ = w.send(JoinReply {
                    error: ErrorCode::NONE,
                    generation,
                    protocol_type: protocol_type.clone(),
                    protocol: Some(protocol.clone()),
                    leader: leader.clone(),
                    member_id: m.id.clone(),
                    members: if m.id == leader {
                        everyone.clone()
                    } else {
                        Vec::new()
                    },
                    skip_assignment: false,
                });
            }
        }
        let timeout = g.largest_rebalance_timeout();
        drop(g);
        self.spawn_sync_timer(shard, partition, group, generation, timeout);
    }

    /// Members that have not sent SyncGroup within the rebalance timeout after the join are
    /// removed and the group rebalances, so a leader that never assigns cannot hold the group
    /// (even while it heartbeats).
    fn spawn_sync_timer(
        self: &Rc<Self>,
        shard: &Rc<Shard>,
        partition: i32,
        group: &GroupRef,
        generation: i32,
        timeout: Duration,
    ) {
        let (me, shard, group) = (self.clone(), shard.clone(), group.clone());
        glommio::spawn_local(async move {
            glommio::timer::sleep(timeout).await;
            let removed = {
                let mut g = group.borrow_mut();
                if g.state != State::CompletingRebalance || g.generation != generation {
                    return;
                }
                let silent: Vec<String> = g
                    .members
                    .values()
                    .filter(|m| m.sync_waiter.is_none())
                    .map(|m| m.id.clone())
                    .collect();
                for id in &silent {
                    tracing::info!(group = %g.id, member = %id, "no SyncGroup within the rebalance timeout");
                    g.remove_member(id, ErrorCode::UNKNOWN_MEMBER_ID);
                }
                !silent.is_empty()
            };
            if removed {
                me.after_removal(&shard, partition, &group);
            }
        })
        .detach();
    }

    // ---- SyncGroup -------------------------------------------------------------------------

    pub async fn sync(
        self: &Rc<Self>,
        shard: &Rc<Shard>,
        partition: i32,
        a: SyncArgs,
    ) -> SyncReply {
        let Some(group) = self.group(&a.group_id) else {
            return SyncReply::error(ErrorCode::UNKNOWN_MEMBER_ID);
        };
        let waiter = {
            let mut g = group.borrow_mut();
            if let Err(code) = check_member(&g, &a.member_id, &a.instance_id, a.generation) {
                return SyncReply::error(code);
            }
            if a.protocol_type
                .as_ref()
                .is_some_and(|t| Some(t) != g.protocol_type.as_ref())
                || a.protocol
                    .as_ref()
                    .is_some_and(|p| Some(p) != g.protocol.as_ref())
            {
                return SyncReply::error(ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
            }
            let reply = |g: &Group, assignment: Bytes| SyncReply {
                error: ErrorCode::NONE,
                protocol_type: g.protocol_type.clone(),
                protocol: g.protocol.clone(),
                assignment,
            };
            g.members
                .get_mut(&a.member_id)
                .expect("checked")
                .last_heartbeat = Instant::now();
            match g.state {
                State::PreparingRebalance => {
                    return SyncReply::error(ErrorCode::REBALANCE_IN_PROGRESS)
                }
                State::Stable => {
                    let assignment = g.members[&a.member_id].assignment.clone();
                    return reply(&g, assignment);
                }
                State::Empty | State::Dead => {
                    return SyncReply::error(ErrorCode::UNKNOWN_MEMBER_ID)
                }
                State::CompletingRebalance => {}
            }
            if g.leader.as_deref() != Some(a.member_id.as_str()) {
                let (tx, rx) = oneshot::channel();
                g.members
                    .get_mut(&a.member_id)
                    .expect("checked")
                    .sync_waiter = Some(tx);
                Some(rx)
            } else {
                let assignments: HashMap<String, Bytes> = a.assignments.into_iter().collect();
                for m in g.members.values_mut() {
                    m.assignment = assignments.get(&m.id).cloned().unwrap_or_default();
                }
                None
            }
        };
        if let Some(rx) = waiter {
            return rx
                .await
                .unwrap_or_else(|_| SyncReply::error(ErrorCode::REBALANCE_IN_PROGRESS));
        }
        // The leader: the assignment is stored before anyone is told.
        let (value, generation) = {
            let g = group.borrow();
            (g.to_value(), g.generation)
        };
        let stored = append(
            shard,
            partition,
            vec![(
                Key::Group {
                    group: a.group_id.clone(),
                }
                .encode(),
                Some(value.encode()),
            )],
        )
        .await;
        let mut g = group.borrow_mut();
        if g.state != State::CompletingRebalance || g.generation != generation {
            return SyncReply::error(ErrorCode::REBALANCE_IN_PROGRESS);
        }
        if let Err(code) = stored {
            tracing::warn!(group = %g.id, %code, "storing the group failed; rebalancing");
            let epoch = self.start_rebalance(&mut g);
            drop(g);
            if let Some(epoch) = epoch {
                self.spawn_rebalance_timer(shard, partition, &group, epoch);
            }
            return SyncReply::error(ErrorCode::COORDINATOR_NOT_AVAILABLE);
        }
        g.set_state(State::Stable);
        let (pt, p) = (g.protocol_type.clone(), g.protocol.clone());
        for m in g.members.values_mut() {
            if let Some(w) = m.sync_waiter.take() {
                m.last_heartbeat = Instant::now();
                let _ = w.send(SyncReply {
                    error: ErrorCode::NONE,
                    protocol_type: pt.clone(),
                    protocol: p.clone(),
                    assignment: m.assignment.clone(),
                });
            }
        }
        tracing::info!(group = %g.id, generation, "group stable");
        SyncReply {
            error: ErrorCode::NONE,
            protocol_type: pt,
            protocol: p,
            assignment: g.members[&a.member_id].assignment.clone(),
        }
    }

    // ---- Heartbeat, LeaveGroup, session expiry ----------------------------------------------

    pub fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: &Option<String>,
        generation: i32,
    ) -> ErrorCode {
        let Some(group) = self.group(group_id) else {
            return ErrorCode::UNKNOWN_MEMBER_ID;
        };
        let mut g = group.borrow_mut();
        if let Err(code) = check_member(&g, member_id, instance_id, generation) {
            return code;
        }
        g.members
            .get_mut(member_id)
            .expect("checked")
            .last_heartbeat = Instant::now();
        match g.state {
            State::PreparingRebalance => ErrorCode::REBALANCE_IN_PROGRESS,
            State::Empty | State::Dead => ErrorCode::UNKNOWN_MEMBER_ID,
            State::CompletingRebalance | State::Stable => ErrorCode::NONE,
        }
    }

    /// Removes the members; returns a code per member.
    pub fn leave(
        self: &Rc<Self>,
        shard: &Rc<Shard>,
        partition: i32,
        group_id: &str,
        members: Vec<(String, Option<String>)>,
    ) -> Vec<ErrorCode> {
        let Some(group) = self.group(group_id) else {
            return members
                .iter()
                .map(|_| ErrorCode::UNKNOWN_MEMBER_ID)
                .collect();
        };
        let mut removed = false;
        let results = {
            let mut g = group.borrow_mut();
            members
                .into_iter()
                .map(|(member_id, instance_id)| {
                    let id = match (&instance_id, member_id.is_empty()) {
                        (Some(inst), true) => match g.instances.get(inst) {
                            Some(id) => id.clone(),
                            None => return ErrorCode::UNKNOWN_MEMBER_ID,
                        },
                        _ => member_id,
                    };
                    match g.members.get(&id) {
                        None => ErrorCode::UNKNOWN_MEMBER_ID,
                        Some(m) if instance_id.is_some() && m.instance_id != instance_id => {
                            ErrorCode::FENCED_INSTANCE_ID
                        }
                        Some(_) => {
                            g.remove_member(&id, ErrorCode::UNKNOWN_MEMBER_ID);
                            tracing::info!(group = %g.id, member = %id, "member left");
                            removed = true;
                            ErrorCode::NONE
                        }
                    }
                })
                .collect()
        };
        if removed {
            self.after_removal(shard, partition, &group);
        }
        results
    }

    /// After members went away: the others rebalance, or the group is empty.
    fn after_removal(self: &Rc<Self>, shard: &Rc<Shard>, partition: i32, group: &GroupRef) {
        let epoch = {
            let mut g = group.borrow_mut();
            match g.state {
                State::Stable | State::CompletingRebalance | State::Empty => {
                    self.start_rebalance(&mut g)
                }
                State::PreparingRebalance | State::Dead => None,
            }
        };
        if let Some(epoch) = epoch {
            self.spawn_rebalance_timer(shard, partition, group, epoch);
        }
        let empty = group.borrow().members.is_empty();
        if empty {
            self.complete_join(shard, partition, group);
        } else {
            self.maybe_complete_join(shard, partition, group);
        }
    }

    fn expire_sessions(self: &Rc<Self>, shard: &Rc<Shard>) {
        let now = Instant::now();
        let groups: Vec<GroupRef> = self.groups.borrow().values().cloned().collect();
        for group in groups {
            let expired = {
                let mut g = group.borrow_mut();
                g.pending.retain(|_, deadline| *deadline > now);
                let expired: Vec<String> = g
                    .members
                    .values()
                    // A member waiting for a JoinGroup or SyncGroup answer is alive (Kafka's
                    // "awaiting a rebalance satisfies the heartbeat"); the rebalance timeout
                    // bounds that wait instead.
                    .filter(|m| {
                        m.join_waiter.is_none()
                            && m.sync_waiter.is_none()
                            && now.duration_since(m.last_heartbeat) > m.session_timeout
                    })
                    .map(|m| m.id.clone())
                    .collect();
                for id in &expired {
                    tracing::info!(group = %g.id, member = %id, "session expired");
                    g.remove_member(id, ErrorCode::UNKNOWN_MEMBER_ID);
                }
                !expired.is_empty()
            };
            if expired {
                let partition = self.partition_of(shard, &group);
                self.after_removal(shard, partition, &group);
            }
        }
    }

    fn partition_of(&self, shard: &Shard, group: &GroupRef) -> i32 {
        let partitions = shard
            .metadata()
            .topic(CONSUMER_OFFSETS_TOPIC)
            .map(|t| t.partitions.len() as i32)
            .unwrap_or(1);
        super::records::coordinator_partition(&group.borrow().id, partitions)
    }

    // ---- Offsets ---------------------------------------------------------------------------

    /// Commits offsets; one code per offset, in order.
    pub async fn commit(
        self: &Rc<Self>,
        shard: &Rc<Shard>,
        partition: i32,
        a: CommitArgs,
    ) -> Vec<ErrorCode> {
        let metadata = shard.metadata();
        let mut codes_out: Vec<ErrorCode> = a
            .offsets
            .iter()
            .map(|(topic, p, _, _, meta)| {
                if metadata.partition(topic, *p).is_none() {
                    ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
                } else if meta
                    .as_ref()
                    .is_some_and(|m| m.len() > self.config.offset_metadata_max_bytes)
                {
                    ErrorCode::OFFSET_METADATA_TOO_LARGE
                } else {
                    ErrorCode::NONE
                }
            })
            .collect();
        let group = if a.generation < 0 && a.member_id.is_empty() {
            let g = self.group_or_create(&a.group_id);
            if !g.borrow().members.is_empty() {
                // A group with members takes commits from its members only.
                return vec![ErrorCode::UNKNOWN_MEMBER_ID; a.offsets.len()];
            }
            g
        } else {
            let Some(g) = self.group(&a.group_id) else {
                return vec![ErrorCode::UNKNOWN_MEMBER_ID; a.offsets.len()];
            };
            let check = {
                let gb = g.borrow();
                check_member(&gb, &a.member_id, &a.instance_id, a.generation).and_then(|()| {
                    if gb.state == State::CompletingRebalance {
                        Err(ErrorCode::REBALANCE_IN_PROGRESS)
                    } else {
                        Ok(())
                    }
                })
            };
            if let Err(code) = check {
                return vec![code; a.offsets.len()];
            }
            g
        };
        let now = now_ms();
        let mut records = Vec::new();
        let mut accepted = Vec::new();
        for (i, (topic, p, offset, epoch, meta)) in a.offsets.iter().enumerate() {
            if codes_out[i] != ErrorCode::NONE {
                continue;
            }
            let value = OffsetValue {
                offset: *offset,
                leader_epoch: *epoch,
                metadata: meta.clone().unwrap_or_default(),
                commit_timestamp_ms: now,
            };
            let key = Key::Offset {
                group: a.group_id.clone(),
                topic: topic.clone(),
                partition: *p,
            };
            records.push((key.encode(), Some(value.encode())));
            accepted.push((i, (topic.clone(), *p), value));
        }
        if records.is_empty() {
            return codes_out;
        }
        match append(shard, partition, records).await {
            Ok(()) => {
                let mut g = group.borrow_mut();
                for (_, tp, value) in accepted {
                    g.offsets.insert(tp, value);
                }
            }
            Err(code) => {
                for (i, _, _) in accepted {
                    codes_out[i] = code;
                }
            }
        }
        codes_out
    }

    /// Committed offsets of `topics` (all of the group's when `None`), by topic.
    pub fn fetch(
        &self,
        group_id: &str,
        topics: Option<Vec<(String, Vec<i32>)>>,
    ) -> CommittedOffsets {
        let group = self.group(group_id);
        let g = group.as_ref().map(|g| g.borrow());
        match topics {
            Some(wanted) => wanted
                .into_iter()
                .map(|(topic, partitions)| {
                    let offsets = partitions
                        .into_iter()
                        .map(|p| {
                            (
                                p,
                                g.as_ref()
                                    .and_then(|g| g.offsets.get(&(topic.clone(), p)).cloned()),
                            )
                        })
                        .collect();
                    (topic, offsets)
                })
                .collect(),
            None => {
                let mut by_topic: HashMap<String, Vec<(i32, Option<OffsetValue>)>> = HashMap::new();
                if let Some(g) = &g {
                    for ((t, p), v) in &g.offsets {
                        by_topic
                            .entry(t.clone())
                            .or_default()
                            .push((*p, Some(v.clone())));
                    }
                }
                let mut out: Vec<_> = by_topic.into_iter().collect();
                out.sort_by(|a, b| a.0.cmp(&b.0));
                for (_, ps) in out.iter_mut() {
                    ps.sort_by_key(|(p, _)| *p);
                }
                out
            }
        }
    }

    // ---- ListGroups, DescribeGroups, DeleteGroups ------------------------------------------

    /// (group, protocol type, state) of this shard's groups.
    pub fn list(&self) -> Vec<(String, String, &'static str)> {
        self.groups
            .borrow()
            .values()
            .map(|g| {
                let g = g.borrow();
                (
                    g.id.clone(),
                    g.protocol_type.clone().unwrap_or_default(),
                    g.state.name(),
                )
            })
            .filter(|(_, _, state)| *state != "Dead")
            .collect()
    }

    pub fn describe(&self, group_id: &str) -> Described {
        let Some(group) = self.group(group_id) else {
            return Described {
                error: ErrorCode::NONE,
                state: "Dead",
                protocol_type: String::new(),
                protocol: String::new(),
                members: Vec::new(),
            };
        };
        let g = group.borrow();
        let stable = matches!(g.state, State::Stable | State::CompletingRebalance);
        let protocol = g.protocol.clone().unwrap_or_default();
        let mut members: Vec<&Member> = g.members.values().collect();
        members.sort_by_key(|m| m.joined_at);
        Described {
            error: ErrorCode::NONE,
            state: g.state.name(),
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            protocol: if stable {
                protocol.clone()
            } else {
                String::new()
            },
            members: members
                .into_iter()
                .map(|m| {
                    (
                        m.id.clone(),
                        m.instance_id.clone(),
                        m.client_id.clone(),
                        m.client_host.clone(),
                        if stable {
                            m.metadata_for(&protocol)
                        } else {
                            Bytes::new()
                        },
                        if g.state == State::Stable {
                            m.assignment.clone()
                        } else {
                            Bytes::new()
                        },
                    )
                })
                .collect(),
        }
    }

    /// Deletes an empty group and its offsets.
    pub async fn delete(
        self: &Rc<Self>,
        shard: &Rc<Shard>,
        partition: i32,
        group_id: &str,
    ) -> ErrorCode {
        let Some(group) = self.group(group_id) else {
            return ErrorCode::GROUP_ID_NOT_FOUND;
        };
        let records = {
            let g = group.borrow();
            if !g.members.is_empty() || g.state != State::Empty {
                return ErrorCode::NON_EMPTY_GROUP;
            }
            let mut records: Vec<(Bytes, Option<Bytes>)> = g
                .offsets
                .keys()
                .map(|(t, p)| {
                    let key = Key::Offset {
                        group: group_id.to_string(),
                        topic: t.clone(),
                        partition: *p,
                    };
                    (key.encode(), None)
                })
                .collect();
            records.push((
                Key::Group {
                    group: group_id.to_string(),
                }
                .encode(),
                None,
            ));
            records
        };
        if let Err(code) = append(shard, partition, records).await {
            return code;
        }
        group.borrow_mut().set_state(State::Dead);
        self.groups.borrow_mut().remove(group_id);
        tracing::info!(group = %group_id, "group deleted");
        ErrorCode::NONE
    }

    fn persist_group(
        self: &Rc<Self>,
        shard: &Rc<Shard>,
        partition: i32,
        id: String,
        value: GroupValue,
    ) {
        let shard = shard.clone();
        glommio::spawn_local(async move {
            let key = Key::Group { group: id.clone() };
            if let Err(code) = append(
                &shard,
                partition,
                vec![(key.encode(), Some(value.encode()))],
            )
            .await
            {
                tracing::warn!(group = %id, %code, "storing the group failed");
            }
        })
        .detach();
    }

    // ---- Loading ----------------------------------------------------------------------------

    /// Rebuilds groups and offsets from one `__consumer_offsets` partition (start-up, or the
    /// partition just created); later records win, a null value deletes.
    pub async fn load(&self, partition: &Rc<Partition>) -> Result<(usize, usize), String> {
        let log = partition.log();
        let end = log.log_end_offset();
        let mut at = log.log_start_offset();
        let (mut offsets, mut groups) = (0usize, 0usize);
        while at < end {
            let read = log
                .read(at, LOAD_READ_BYTES, end)
                .await
                .map_err(|e| e.to_string())?;
            if read.next_offset <= at {
                break;
            }
            let bytes = read.to_bytes().await.map_err(|e| e.to_string())?;
            for batch in split_batches(&bytes).unwrap_or_default() {
                let Ok(records) = decode_records(&batch) else {
                    tracing::warn!(
                        partition = partition.index(),
                        "skipping an unreadable batch in __consumer_offsets"
                    );
                    continue;
                };
                for r in records {
                    let Some(key) = r.key.and_then(|k| Key::decode(k).ok()) else {
                        continue;
                    };
                    match key {
                        Key::Offset {
                            group,
                            topic,
                            partition: p,
                        } => {
                            let g = self.group_or_create(&group);
                            match r.value.map(OffsetValue::decode) {
                                Some(Ok(v)) => {
                                    g.borrow_mut().offsets.insert((topic, p), v);
                                    offsets += 1;
                                }
                                Some(Err(_)) => {}
                                None => {
                                    g.borrow_mut().offsets.remove(&(topic, p));
                                }
                            }
                        }
                        Key::Group { group } => match r.value.map(GroupValue::decode) {
                            Some(Ok(v)) => {
                                self.group_or_create(&group).borrow_mut().restore(v);
                                groups += 1;
                            }
                            Some(Err(_)) => {}
                            None => {
                                self.groups.borrow_mut().remove(&group);
                            }
                        },
                    }
                }
            }
            at = read.next_offset;
        }
        Ok((groups, offsets))
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
        let mut all: Vec<&Member> = g.members.values().collect();
        all.sort_by_key(|m| m.joined_at);
        all.into_iter()
            .map(|m| {
                (
                    m.id.clone(),
                    m.instance_id.clone(),
                    m.metadata_for(&protocol),
                )
            })
            .collect()
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

/// Appends records (key, value or tombstone) to this shard's `__consumer_offsets` partition.
async fn append(
    shard: &Shard,
    partition: i32,
    records: Vec<(Bytes, Option<Bytes>)>,
) -> Result<(), ErrorCode> {
    let Some(p) = shard.partition(CONSUMER_OFFSETS_TOPIC, partition) else {
        return Err(ErrorCode::NOT_COORDINATOR);
    };
    let now = now_ms();
    let records: Vec<NewRecord> = records
        .into_iter()
        .map(|(key, value)| NewRecord {
            key: Some(key),
            value,
            timestamp_ms: now,
            headers: Vec::new(),
        })
        .collect();
    let batch = build_batch(&records, ProducerFields::NONE);
    let epoch = p.leader_epoch();
    let info = p.produce(&batch).await.map_err(|e| {
        tracing::error!(error = %e, "writing to __consumer_offsets failed");
        match e {
            ferrite_shards::Error::NotLeader(_) => ErrorCode::NOT_COORDINATOR,
            _ => ErrorCode::COORDINATOR_NOT_AVAILABLE,
        }
    })?;
    // As Kafka: a commit is answered once every in-sync replica has it.
    match p
        .wait_committed(info.last_offset, epoch, COMMIT_TIMEOUT)
        .await
    {
        Ok(true) => {}
        Ok(false) => return Err(ErrorCode::COORDINATOR_NOT_AVAILABLE),
        Err(_) => return Err(ErrorCode::NOT_COORDINATOR),
    }
    Ok(())
}

/// How long a group write waits for the ISR before the member is told to retry.
const COMMIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
