//! A consumer task as a member of a consumer group, with the classic group protocol: find the
//! coordinator, join (the leader assigns the partitions, see `assignor`), sync, read each
//! assigned partition from its committed offset while a thread heartbeats, and at the end
//! commit the positions and leave.
//!
//! Rebalances are eager: a member told REBALANCE_IN_PROGRESS commits its positions before it
//! joins again, and a new generation only begins once every member has rejoined (or left, or
//! been expired), so a partition's next owner starts where the last one stopped.
//!
//! Broker errors are counted by code in the run's stats. Only the protocol's own signals
//! (MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS) and a coordinator still loading go uncounted,
//! and each is retried a bounded number of times.

use crate::assignor;
use crate::client::Conn;
use crate::consumer::{Consumer, Tally};
use crate::stats::Stats;
use anyhow::{anyhow, bail, Result};
use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, FindCoordinatorRequest, GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest,
    OffsetCommitRequest, OffsetFetchRequest, SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const PROTOCOL_TYPE: &str = "consumer";
/// FindCoordinator's key type for a group.
const GROUP_KEY_TYPE: i8 = 0;
/// Within the broker defaults of group.min/max.session.timeout.ms (6 s to 30 min).
const SESSION_TIMEOUT_MS: i32 = 10_000;
/// A third of the session, as Kafka's clients default to.
const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(SESSION_TIMEOUT_MS as u64 / 3);
/// How often the heartbeat thread looks whether it should stop.
const HEARTBEAT_STOP_POLL: Duration = Duration::from_millis(20);
/// How long a rebalance waits for members to rejoin: a JoinGroup may block this long, so it
/// stays below the connection's 60 s read timeout.
const REBALANCE_TIMEOUT_MS: i32 = 30_000;
/// Generations one member goes through in a run before it gives up on the group.
const GENERATIONS_MAX: u32 = 100;
/// Attempts at one request while the coordinator loads or the protocol asks again; past
/// this the last code is counted and the member stops.
const ATTEMPTS_MAX: u32 = 100;
const RETRY_WAIT: Duration = Duration::from_millis(100);
/// How often a member without partitions looks for a rebalance or the end of the run.
const IDLE_WAIT: Duration = Duration::from_millis(100);

// The Kafka error codes the membership reacts to.
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;
const ILLEGAL_GENERATION: i16 = 22;
const UNKNOWN_MEMBER_ID: i16 = 25;
const REBALANCE_IN_PROGRESS: i16 = 27;
const MEMBER_ID_REQUIRED: i16 = 79;

/// How a membership step ended when it did not simply succeed.
enum Step<T> {
    Done(T),
    /// The group moved on (a rebalance, or it forgot this member): join again.
    Rejoin,
    /// The broker refused for good (counted): this member stops.
    GiveUp,
}

/// What JoinGroup told this member about its generation.
struct Joined {
    leader: bool,
    protocol_name: Option<StrBytes>,
    /// Every member's (id, subscription); the leader's answer only.
    members: Vec<(String, Bytes)>,
}

/// Runs one consumer task as a member of `group` until the run ends.
pub fn run(consumer: &Consumer, group: &str) -> Result<()> {
    let stats = &consumer.stats;
    let Some(coordinator) = find_coordinator(&consumer.cfg.bootstrap, group, stats)? else {
        return Ok(());
    };
    let mut member = Member {
        conn: Conn::connect(&coordinator)?,
        coordinator,
        group: group.to_string(),
        topic: consumer.cfg.topic.clone(),
        member_id: String::new(),
        generation: -1,
        stats,
    };
    let mut tally = Tally::new(consumer.cfg.size);
    let read = member.generations(consumer, &mut tally);
    tally.finish(stats);
    // Leave after an error too, so the others need not wait out this member's session.
    let left = member.leave();
    read.and(left)
}

/// The coordinator's address, or `None` when the broker refused (counted).
fn find_coordinator(bootstrap: &str, group: &str, stats: &Stats) -> Result<Option<String>> {
    let mut conn = Conn::connect(bootstrap)?;
    let version = conn.versions.of(ApiKey::FindCoordinator)?;
    let key = StrBytes::from_string(group.to_string());
    let mut code = 0;
    for _ in 0..ATTEMPTS_MAX {
        let request = FindCoordinatorRequest::default().with_key_type(GROUP_KEY_TYPE);
        let request = if version >= 4 {
            request.with_coordinator_keys(vec![key.clone()])
        } else {
            request.with_key(key.clone())
        };
        let resp = conn.call(&request)?;
        let (host, port) = if version >= 4 {
            let c = resp.coordinators.first().ok_or_else(|| {
                anyhow!("FindCoordinator for {group}: no coordinator in the answer")
            })?;
            code = c.error_code;
            (c.host.to_string(), c.port)
        } else {
            code = resp.error_code;
            (resp.host.to_string(), resp.port)
        };
        match code {
            0 => return Ok(Some(format!("{host}:{port}"))),
            COORDINATOR_LOAD_IN_PROGRESS | COORDINATOR_NOT_AVAILABLE => {
                std::thread::sleep(RETRY_WAIT)
            }
            _ => break,
        }
    }
    stats.error(code, 1);
    Ok(None)
}

/// This task's membership: a connection to the coordinator and who it is in which generation.
struct Member<'a> {
    conn: Conn,
    coordinator: String,
    group: String,
    topic: String,
    /// Empty until the coordinator names this member.
    member_id: String,
    generation: i32,
    stats: &'a Stats,
}

impl Member<'_> {
    fn group_id(&self) -> GroupId {
        GroupId(StrBytes::from_string(self.group.clone()))
    }

    fn member_id(&self) -> StrBytes {
        StrBytes::from_string(self.member_id.clone())
    }

    /// Joins, syncs and reads, generation after generation, until the run ends.
    fn generations(&mut self, consumer: &Consumer, tally: &mut Tally) -> Result<()> {
        let deadline = consumer.deadline();
        for _ in 0..GENERATIONS_MAX {
            if consumer.finished(deadline) {
                return Ok(());
            }
            let joined = match self.join()? {
                Step::Done(j) => j,
                Step::Rejoin => continue,
                Step::GiveUp => return Ok(()),
            };
            let partitions = match self.sync(&joined, &consumer.layout.partitions)? {
                Step::Done(p) => p,
                Step::Rejoin => continue,
                Step::GiveUp => return Ok(()),
            };
            let from = match self.committed(&partitions, &consumer.start)? {
                Step::Done(f) => f,
                Step::Rejoin => continue,
                Step::GiveUp => return Ok(()),
            };
            match self.read(consumer, tally, &from, deadline)? {
                Step::Done(()) | Step::GiveUp => return Ok(()),
                Step::Rejoin => continue,
            }
        }
        bail!(
            "group {}: more than {GENERATIONS_MAX} generations in one run",
            self.group
        )
    }

    /// A code that ends this generation: counted, and answered as Kafka's clients do.
    fn ended_by<T>(&mut self, code: i16) -> Step<T> {
        self.stats.error(code, 1);
        match code {
            UNKNOWN_MEMBER_ID => {
                self.member_id.clear();
                Step::Rejoin
            }
            ILLEGAL_GENERATION | COORDINATOR_NOT_AVAILABLE | NOT_COORDINATOR => Step::Rejoin,
            _ => Step::GiveUp,
        }
    }

    /// JoinGroup until this member is in a generation.
    fn join(&mut self) -> Result<Step<Joined>> {
        let metadata = assignor::subscription(&self.topic)?;
        let mut code = 0;
        for _ in 0..ATTEMPTS_MAX {
            let request = JoinGroupRequest::default()
                .with_group_id(self.group_id())
                .with_session_timeout_ms(SESSION_TIMEOUT_MS)
                .with_rebalance_timeout_ms(REBALANCE_TIMEOUT_MS)
                .with_member_id(self.member_id())
                .with_protocol_type(StrBytes::from_static_str(PROTOCOL_TYPE))
                .with_protocols(vec![JoinGroupRequestProtocol::default()
                    .with_name(StrBytes::from_static_str(assignor::NAME))
                    .with_metadata(metadata.clone())]);
            let resp = self.conn.call(&request)?;
            code = resp.error_code;
            match code {
                0 => {
                    self.member_id = resp.member_id.to_string();
                    self.generation = resp.generation_id;
                    return Ok(Step::Done(Joined {
                        leader: resp.leader == resp.member_id,
                        protocol_name: resp.protocol_name,
                        members: resp
                            .members
                            .into_iter()
                            .map(|m| (m.member_id.to_string(), m.metadata))
                            .collect(),
                    }));
                }
                // KIP-394: the coordinator names the member, which joins again under that id.
                MEMBER_ID_REQUIRED => self.member_id = resp.member_id.to_string(),
                REBALANCE_IN_PROGRESS => {}
                COORDINATOR_LOAD_IN_PROGRESS => std::thread::sleep(RETRY_WAIT),
                _ => return Ok(self.ended_by(code)),
            }
        }
        self.stats.error(code, 1);
        Ok(Step::GiveUp)
    }

    /// SyncGroup: the leader hands out the assignment; every member learns its partitions.
    fn sync(&mut self, joined: &Joined, partitions: &[i32]) -> Result<Step<Vec<i32>>> {
        let assignments = if joined.leader {
            assignor::assign(&self.topic, partitions, &joined.members)?
        } else {
            Vec::new()
        };
        let request = SyncGroupRequest::default()
            .with_group_id(self.group_id())
            .with_generation_id(self.generation)
            .with_member_id(self.member_id())
            .with_assignments(
                assignments
                    .into_iter()
                    .map(|(id, a)| {
                        SyncGroupRequestAssignment::default()
                            .with_member_id(StrBytes::from_string(id))
                            .with_assignment(a)
                    })
                    .collect(),
            );
        let request = if self.conn.versions.of(ApiKey::SyncGroup)? >= 5 {
            request
                .with_protocol_type(Some(StrBytes::from_static_str(PROTOCOL_TYPE)))
                .with_protocol_name(joined.protocol_name.clone())
        } else {
            request
        };
        let resp = self.conn.call(&request)?;
        match resp.error_code {
            0 => Ok(Step::Done(assignor::assigned(
                &resp.assignment,
                &self.topic,
            )?)),
            REBALANCE_IN_PROGRESS => Ok(Step::Rejoin),
            code => Ok(self.ended_by(code)),
        }
    }

    /// Where each assigned partition starts: its committed offset, or `start` where nothing
    /// was committed. A partition whose offset the coordinator refused (counted) is left out.
    fn committed(
        &mut self,
        partitions: &[i32],
        start: &HashMap<i32, i64>,
    ) -> Result<Step<HashMap<i32, i64>>> {
        if partitions.is_empty() {
            return Ok(Step::Done(HashMap::new()));
        }
        let request = OffsetFetchRequest::default()
            .with_group_id(self.group_id())
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(TopicName(StrBytes::from_string(self.topic.clone())))
                .with_partition_indexes(partitions.to_vec())]));
        for _ in 0..ATTEMPTS_MAX {
            let resp = self.conn.call(&request)?;
            match resp.error_code {
                0 => {}
                COORDINATOR_LOAD_IN_PROGRESS => {
                    std::thread::sleep(RETRY_WAIT);
                    continue;
                }
                code => return Ok(self.ended_by(code)),
            }
            let mut from = HashMap::new();
            for p in resp.topics.into_iter().flat_map(|t| t.partitions) {
                if p.error_code != 0 {
                    self.stats.error(p.error_code, 1);
                    continue;
                }
                let offset = if p.committed_offset >= 0 {
                    p.committed_offset
                } else {
                    *start.get(&p.partition_index).ok_or_else(|| {
                        anyhow!("no start offset for partition {}", p.partition_index)
                    })?
                };
                from.insert(p.partition_index, offset);
            }
            return Ok(Step::Done(from));
        }
        self.stats.error(COORDINATOR_LOAD_IN_PROGRESS, 1);
        Ok(Step::GiveUp)
    }

    /// Reads this generation's partitions until the run or this member's backlog ends
    /// (commit; `Done`), the group rebalances (commit; `Rejoin`) or the heartbeat says the
    /// member was lost.
    fn read(
        &mut self,
        consumer: &Consumer,
        tally: &mut Tally,
        from: &HashMap<i32, i64>,
        deadline: Option<Instant>,
    ) -> Result<Step<()>> {
        let mut partitions: Vec<i32> = from.keys().copied().collect();
        partitions.sort_unstable();
        let mut reading = consumer.open(&partitions, from)?;
        let heartbeat = Heartbeat::start(
            &self.coordinator,
            HeartbeatRequest::default()
                .with_group_id(self.group_id())
                .with_generation_id(self.generation)
                .with_member_id(self.member_id()),
        )?;
        // Reading a backlog, a member whose partitions are read leaves, and its partitions
        // (already at their end) go to the others. Otherwise a member with no partitions
        // stays, in case a rebalance gives it some.
        let backlog = consumer.cfg.end_offsets.is_some();
        loop {
            let through = reading.all_done() && (backlog || !reading.is_empty());
            if consumer.finished(deadline) || through {
                let code = heartbeat.finish()?;
                if code != 0 && code != REBALANCE_IN_PROGRESS {
                    self.stats.error(code, 1);
                }
                self.commit(reading.positions())?;
                return Ok(Step::Done(()));
            }
            if heartbeat.ended() {
                return match heartbeat.finish()? {
                    REBALANCE_IN_PROGRESS => {
                        self.commit(reading.positions())?;
                        Ok(Step::Rejoin)
                    }
                    code => Ok(self.ended_by(code)),
                };
            }
            if reading.is_empty() {
                std::thread::sleep(IDLE_WAIT);
                continue;
            }
            consumer.poll(&mut reading, tally)?;
        }
    }

    /// OffsetCommit of the positions (the next offset to read); refusals are counted.
    fn commit(&mut self, positions: &HashMap<i32, i64>) -> Result<()> {
        if positions.is_empty() {
            return Ok(());
        }
        let mut partitions: Vec<(i32, i64)> = positions.iter().map(|(p, o)| (*p, *o)).collect();
        partitions.sort_unstable();
        let request = OffsetCommitRequest::default()
            .with_group_id(self.group_id())
            .with_generation_id_or_member_epoch(self.generation)
            .with_member_id(self.member_id())
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(StrBytes::from_string(self.topic.clone())))
                .with_partitions(
                    partitions
                        .into_iter()
                        .map(|(p, offset)| {
                            OffsetCommitRequestPartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(offset)
                        })
                        .collect(),
                )]);
        let resp = self.conn.call(&request)?;
        for p in resp.topics.into_iter().flat_map(|t| t.partitions) {
            if p.error_code != 0 {
                self.stats.error(p.error_code, 1);
            }
        }
        Ok(())
    }

    /// LeaveGroup, so the others rebalance now rather than after this member's session.
    fn leave(&mut self) -> Result<()> {
        if self.member_id.is_empty() {
            return Ok(());
        }
        let request = LeaveGroupRequest::default().with_group_id(self.group_id());
        let request = if self.conn.versions.of(ApiKey::LeaveGroup)? >= 3 {
            request.with_members(vec![
                MemberIdentity::default().with_member_id(self.member_id())
            ])
        } else {
            request.with_member_id(self.member_id())
        };
        let resp = self.conn.call(&request)?;
        let codes =
            std::iter::once(resp.error_code).chain(resp.members.iter().map(|m| m.error_code));
        for code in codes.filter(|c| *c != 0) {
            self.stats.error(code, 1);
        }
        self.member_id.clear();
        Ok(())
    }
}

/// Heartbeats for one generation from a thread of its own, on its own connection to the
/// coordinator, until stopped or until the coordinator answers with an error code.
struct Heartbeat {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<i16>>>,
}

impl Heartbeat {
    fn start(coordinator: &str, request: HeartbeatRequest) -> Result<Heartbeat> {
        let mut conn = Conn::connect(coordinator)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || -> Result<i16> {
            loop {
                let next = Instant::now() + HEARTBEAT_INTERVAL;
                while Instant::now() < next {
                    if stopped.load(Ordering::Relaxed) {
                        return Ok(0);
                    }
                    std::thread::sleep(HEARTBEAT_STOP_POLL);
                }
                let code = conn.call(&request)?.error_code;
                if code != 0 {
                    return Ok(code);
                }
            }
        });
        Ok(Heartbeat {
            stop,
            thread: Some(thread),
        })
    }

    /// The coordinator ended the heartbeats (or the connection failed).
    fn ended(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Stops the heartbeats; the code that ended them (0 when stopped here).
    fn finish(mut self) -> Result<i16> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| anyhow!("a heartbeat thread panicked"))?,
            None => Ok(0),
        }
    }
}

impl Drop for Heartbeat {
    /// A member that fails mid-generation stops its heartbeats too.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
