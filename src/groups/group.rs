//! One consumer group's state, as Kafka's classic protocol defines it.
//!
//! Empty → PreparingRebalance (members (re)join) → CompletingRebalance (the leader computes
//! the assignment) → Stable (members heartbeat) → PreparingRebalance again when someone joins,
//! leaves or times out. The decisions are here; waiting and persistence are the coordinator's.
//!
//! Lives on: the shard that owns the group's `__consumer_offsets` partition.

use super::records::{GroupValue, MemberValue, OffsetValue};
use crate::protocol::errors::ErrorCode;
use bytes::Bytes;
use futures::channel::oneshot;
use std::collections::HashMap;
use std::time::{Duration, Instant};

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum State {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl State {
    /// The name Kafka's tools show (DescribeGroups, ListGroups).
    pub fn name(self) -> &'static str {
        match self {
            State::Empty => "Empty",
            State::PreparingRebalance => "PreparingRebalance",
            State::CompletingRebalance => "CompletingRebalance",
            State::Stable => "Stable",
            State::Dead => "Dead",
        }
    }
}

/// A member as the leader's JoinGroup answer lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    /// Its subscription in the chosen protocol.
    pub metadata: Bytes,
}

/// What a JoinGroup gets back.
#[derive(Clone, Debug, Default)]
pub struct JoinReply {
    pub error: ErrorCode,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// For the leader only: every member, in join order.
    pub members: Vec<JoinedMember>,
    /// A static leader rejoining a stable group: the assignment stands, do not compute one
    /// (JoinGroup v9's skipAssignment; older clients get the members and their SyncGroup
    /// receives the stored assignment).
    pub skip_assignment: bool,
}

impl JoinReply {
    pub fn error(error: ErrorCode, member_id: &str) -> JoinReply {
        JoinReply {
            error,
            generation: -1,
            member_id: member_id.to_string(),
            ..JoinReply::default()
        }
    }
}

/// What a SyncGroup gets back.
#[derive(Clone, Debug, Default)]
pub struct SyncReply {
    pub error: ErrorCode,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub assignment: Bytes,
}

impl SyncReply {
    pub fn error(error: ErrorCode) -> SyncReply {
        SyncReply {
            error,
            ..SyncReply::default()
        }
    }
}

pub struct Member {
    pub id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    /// (name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    pub last_heartbeat: Instant,
    /// Joined before the others: the first member becomes the leader.
    pub joined_at: u64,
    pub join_waiter: Option<oneshot::Sender<JoinReply>>,
    pub sync_waiter: Option<oneshot::Sender<SyncReply>>,
}

impl Member {
    pub fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    pub fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|(n, _)| n == protocol)
    }
}

/// One producer's offsets in a transaction not yet ended: the value and its record's position.
pub type PendingOffsets = HashMap<(String, i32), (OffsetValue, i64)>;

pub struct Group {
    pub id: String,
    pub state: State,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub members: HashMap<String, Member>,
    /// group.instance.id → member id, for static members.
    pub instances: HashMap<String, String>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, valid until the deadline.
    pub pending: HashMap<String, Instant>,
    /// Committed offsets by (topic, partition).
    pub offsets: HashMap<(String, i32), OffsetValue>,
    /// Where each committed offset's record is in `__consumer_offsets`: a transaction's offset
    /// replaces a committed one at the transaction's commit only if it was written after it.
    pub offset_positions: HashMap<(String, i32), i64>,
    /// Offsets committed in transactions that have not ended, by producer id: the value and
    /// its record's position.
    pub pending_txn_offsets: HashMap<i64, PendingOffsets>,
    /// Bumped at each rebalance start, so a timer of an older rebalance does nothing.
    pub rebalance_epoch: u64,
    /// A rebalance completes by then at the latest (the members' largest rebalance timeout).
    pub rebalance_deadline: Option<Instant>,
    /// A group's first rebalance waits this long for more members (initial rebalance delay).
    pub initial_until: Option<Instant>,
    pub state_since_ms: i64,
    next_join_order: u64,
}

impl Group {
    /// A committed offset whose record is at `position`.
    pub fn set_offset(&mut self, tp: (String, i32), value: OffsetValue, position: i64) {
        self.offset_positions.insert(tp.clone(), position);
        self.offsets.insert(tp, value);
    }

    pub fn remove_offset(&mut self, tp: &(String, i32)) {
        self.offsets.remove(tp);
        self.offset_positions.remove(tp);
    }

    /// The producer's transaction ended (`GroupMetadata.completePendingTxnOffsetCommit`): on
    /// commit its offsets replace those written before them; either way they stop pending.
    pub fn complete_transaction(&mut self, producer_id: i64, commit: bool) {
        let Some(pending) = self.pending_txn_offsets.remove(&producer_id) else {
            return;
        };
        if !commit {
            return;
        }
        for (tp, (value, position)) in pending {
            let newer = self
                .offset_positions
                .get(&tp)
                .is_none_or(|&current| current < position);
            if newer {
                self.set_offset(tp, value, position);
            }
        }
    }

    /// Whether a transaction not yet ended holds an offset for `tp` (OffsetFetch's
    /// UNSTABLE_OFFSET_COMMIT for readers that ask for stable offsets).
    pub fn has_pending_offset(&self, tp: &(String, i32)) -> bool {
        self.pending_txn_offsets
            .values()
            .any(|p| p.contains_key(tp))
    }

    /// Every member with its metadata for `protocol`, in the order they joined: what the
    /// leader's JoinGroup answer lists.
    pub fn members_in_join_order(&self, protocol: &str) -> Vec<JoinedMember> {
        let mut all: Vec<&Member> = self.members.values().collect();
        all.sort_by_key(|m| m.joined_at);
        all.into_iter()
            .map(|m| JoinedMember {
                member_id: m.id.clone(),
                instance_id: m.instance_id.clone(),
                metadata: m.metadata_for(protocol),
            })
            .collect()
    }

    pub fn new(id: &str) -> Group {
        Group {
            id: id.to_string(),
            state: State::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: HashMap::new(),
            instances: HashMap::new(),
            pending: HashMap::new(),
            offsets: HashMap::new(),
            offset_positions: HashMap::new(),
            pending_txn_offsets: HashMap::new(),
            rebalance_epoch: 0,
            rebalance_deadline: None,
            initial_until: None,
            state_since_ms: ferrite_shards::types::now_ms(),
            next_join_order: 0,
        }
    }

    pub fn set_state(&mut self, state: State) {
        self.state = state;
        self.state_since_ms = ferrite_shards::types::now_ms();
    }

    pub fn next_order(&mut self) -> u64 {
        self.next_join_order += 1;
        self.next_join_order
    }

    /// Whether a joining member's protocols fit the group (same type, a protocol in common).
    pub fn accepts(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if protocols.is_empty() || protocol_type.is_empty() {
            return false;
        }
        if self.members.is_empty() {
            return true;
        }
        if self.protocol_type.as_deref() != Some(protocol_type) {
            return false;
        }
        protocols
            .iter()
            .any(|(name, _)| self.members.values().all(|m| m.supports(name)))
    }

    /// The protocol every member supports that most members prefer (Kafka's vote).
    pub fn select_protocol(&self) -> Option<String> {
        let candidates: Vec<&String> = self
            .members
            .values()
            .next()?
            .protocols
            .iter()
            .map(|(n, _)| n)
            .filter(|n| self.members.values().all(|m| m.supports(n)))
            .collect();
        let mut votes: HashMap<&String, usize> = HashMap::new();
        for m in self.members.values() {
            if let Some(choice) = m
                .protocols
                .iter()
                .map(|(n, _)| n)
                .find(|n| candidates.contains(n))
            {
                *votes.entry(choice).or_default() += 1;
            }
        }
        candidates
            .iter()
            .max_by_key(|c| {
                (
                    votes.get(*c).copied().unwrap_or(0),
                    std::cmp::Reverse(candidates.iter().position(|x| x == *c)),
                )
            })
            .map(|c| (*c).clone())
    }

    /// Removes a member; says the removal to anyone waiting on it.
    pub fn remove_member(&mut self, id: &str, error: ErrorCode) -> Option<Member> {
        let mut m = self.members.remove(id)?;
        if let Some(inst) = &m.instance_id {
            if self.instances.get(inst).is_some_and(|mid| mid == id) {
                self.instances.remove(inst);
            }
        }
        if let Some(w) = m.join_waiter.take() {
            let _ = w.send(JoinReply::error(error, id));
        }
        if let Some(w) = m.sync_waiter.take() {
            let _ = w.send(SyncReply::error(error));
        }
        if self.leader.as_deref() == Some(id) {
            self.leader = None;
        }
        Some(m)
    }

    /// Removes every member `gone` picks (answering its waiting requests UNKNOWN_MEMBER_ID),
    /// logging `why` for each; true if any went.
    pub fn remove_members_where(&mut self, why: &str, gone: impl Fn(&Member) -> bool) -> bool {
        let ids: Vec<String> = self
            .members
            .values()
            .filter(|m| gone(m))
            .map(|m| m.id.clone())
            .collect();
        for id in &ids {
            tracing::info!(group = %self.id, member = %id, "{why}");
            self.remove_member(id, ErrorCode::UNKNOWN_MEMBER_ID);
        }
        !ids.is_empty()
    }

    pub fn largest_rebalance_timeout(&self) -> Duration {
        self.members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or(Duration::from_secs(60))
    }

    pub fn all_joined(&self) -> bool {
        self.members.values().all(|m| m.join_waiter.is_some())
    }

    /// The group as stored in `__consumer_offsets`.
    pub fn to_value(&self) -> GroupValue {
        let mut members: Vec<&Member> = self.members.values().collect();
        members.sort_by_key(|m| m.joined_at);
        GroupValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: self.protocol.clone(),
            leader: self.leader.clone(),
            state_timestamp_ms: self.state_since_ms,
            members: members
                .into_iter()
                .map(|m| MemberValue {
                    member_id: m.id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout.as_millis() as i32,
                    session_timeout_ms: m.session_timeout.as_millis() as i32,
                    subscription: self
                        .protocol
                        .as_deref()
                        .map(|p| m.metadata_for(p))
                        .unwrap_or_default(),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    /// Restores a group from `__consumer_offsets` at start-up. Restored members keep their
    /// places and get a full session timeout from now to heartbeat again.
    pub fn restore(&mut self, v: GroupValue) {
        let now = Instant::now();
        self.generation = v.generation;
        self.protocol_type = (!v.protocol_type.is_empty()).then_some(v.protocol_type);
        self.protocol = v.protocol.clone();
        self.leader = v.leader;
        self.members.clear();
        self.instances.clear();
        for m in v.members {
            if let Some(inst) = &m.group_instance_id {
                self.instances.insert(inst.clone(), m.member_id.clone());
            }
            let order = self.next_order();
            let protocols = match &v.protocol {
                Some(p) => vec![(p.clone(), m.subscription.clone())],
                None => Vec::new(),
            };
            self.members.insert(
                m.member_id.clone(),
                Member {
                    id: m.member_id,
                    instance_id: m.group_instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    session_timeout: Duration::from_millis(m.session_timeout_ms.max(0) as u64),
                    rebalance_timeout: Duration::from_millis(m.rebalance_timeout_ms.max(0) as u64),
                    protocols,
                    assignment: m.assignment,
                    last_heartbeat: now,
                    joined_at: order,
                    join_waiter: None,
                    sync_waiter: None,
                },
            );
        }
        self.set_state(if self.members.is_empty() {
            State::Empty
        } else {
            State::Stable
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, protocols: &[&str]) -> Member {
        Member {
            id: id.into(),
            instance_id: None,
            client_id: "c".into(),
            client_host: "h".into(),
            session_timeout: Duration::from_secs(10),
            rebalance_timeout: Duration::from_secs(30),
            protocols: protocols
                .iter()
                .map(|p| (p.to_string(), Bytes::new()))
                .collect(),
            assignment: Bytes::new(),
            last_heartbeat: Instant::now(),
            joined_at: 0,
            join_waiter: None,
            sync_waiter: None,
        }
    }

    #[test]
    fn the_protocol_is_chosen_by_vote_among_those_all_support() {
        let mut g = Group::new("g");
        g.protocol_type = Some("consumer".into());
        g.members
            .insert("a".into(), member("a", &["range", "roundrobin"]));
        g.members
            .insert("b".into(), member("b", &["roundrobin", "range", "sticky"]));
        g.members
            .insert("c".into(), member("c", &["roundrobin", "range"]));
        assert_eq!(g.select_protocol().as_deref(), Some("roundrobin"));
        assert!(g.accepts("consumer", &[("range".into(), Bytes::new())]));
        assert!(
            !g.accepts("consumer", &[("sticky".into(), Bytes::new())]),
            "not all support it"
        );
        assert!(
            !g.accepts("connect", &[("range".into(), Bytes::new())]),
            "other type"
        );
    }

    #[test]
    fn removing_a_member_tells_its_waiters() {
        let mut g = Group::new("g");
        let mut m = member("a", &["range"]);
        let (tx, mut rx) = oneshot::channel();
        m.join_waiter = Some(tx);
        m.instance_id = Some("i".into());
        g.instances.insert("i".into(), "a".into());
        g.members.insert("a".into(), m);
        g.leader = Some("a".into());
        g.remove_member("a", ErrorCode::UNKNOWN_MEMBER_ID);
        assert_eq!(
            rx.try_recv().unwrap().unwrap().error,
            ErrorCode::UNKNOWN_MEMBER_ID
        );
        assert!(g.instances.is_empty() && g.leader.is_none());
    }
}
