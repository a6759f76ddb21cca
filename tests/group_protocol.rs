//! The group APIs on the wire: Kafka's error codes for bad members, generations, topics and
//! metadata, and timeouts that keep a misbehaving member from stalling its group.

mod common;

use bytes::Bytes;
use common::wire::{call, connect};
use common::{kcat, Broker};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::net::TcpStream;
use std::time::{Duration, Instant};

const NONE: i16 = 0;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const OFFSET_METADATA_TOO_LARGE: i16 = 12;
const ILLEGAL_GENERATION: i16 = 22;
const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
const UNKNOWN_MEMBER_ID: i16 = 25;
const INVALID_SESSION_TIMEOUT: i16 = 26;
const REBALANCE_IN_PROGRESS: i16 = 27;
const NON_EMPTY_GROUP: i16 = 68;
const MEMBER_ID_REQUIRED: i16 = 79;
const FENCED_INSTANCE_ID: i16 = 82;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn group(v: &str) -> GroupId {
    GroupId(s(v))
}

fn broker() -> Broker {
    Broker::start(&[
        "--set",
        "group.initial.rebalance.delay.ms=0",
        "--set",
        "group.min.session.timeout.ms=1000",
        "--set",
        "offset.metadata.max.bytes=16",
    ])
}

fn join_request(g: &str, member: &str, session_ms: i32, rebalance_ms: i32) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(group(g))
        .with_member_id(s(member))
        .with_session_timeout_ms(session_ms)
        .with_rebalance_timeout_ms(rebalance_ms)
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(Bytes::from_static(b"subscription"))])
}

fn join(c: &mut TcpStream, req: &JoinGroupRequest) -> JoinGroupResponse {
    call(c, ApiKey::JoinGroup, 5, req)
}

/// Joins as a new member the v4+ way: MEMBER_ID_REQUIRED first, then with the given id.
fn join_new(c: &mut TcpStream, g: &str, session_ms: i32, rebalance_ms: i32) -> JoinGroupResponse {
    let first = join(c, &join_request(g, "", session_ms, rebalance_ms));
    assert_eq!(first.error_code, MEMBER_ID_REQUIRED);
    assert!(!first.member_id.is_empty(), "the broker names the member");
    join(
        c,
        &join_request(g, &first.member_id, session_ms, rebalance_ms),
    )
}

fn sync(
    c: &mut TcpStream,
    g: &str,
    generation: i32,
    member: &str,
    assignments: &[(&str, &'static [u8])],
) -> SyncGroupResponse {
    let req = SyncGroupRequest::default()
        .with_group_id(group(g))
        .with_generation_id(generation)
        .with_member_id(s(member))
        .with_assignments(
            assignments
                .iter()
                .map(|(m, a)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(s(m))
                        .with_assignment(Bytes::from_static(a))
                })
                .collect(),
        );
    call(c, ApiKey::SyncGroup, 3, &req)
}

fn heartbeat(c: &mut TcpStream, g: &str, generation: i32, member: &str) -> i16 {
    let req = HeartbeatRequest::default()
        .with_group_id(group(g))
        .with_generation_id(generation)
        .with_member_id(s(member));
    call::<_, HeartbeatResponse>(c, ApiKey::Heartbeat, 3, &req).error_code
}

fn commit(
    c: &mut TcpStream,
    g: &str,
    generation: i32,
    member: &str,
    offsets: &[(&str, i32, i64, &str)],
) -> Vec<i16> {
    let topics = offsets
        .iter()
        .map(|(t, p, o, meta)| {
            OffsetCommitRequestTopic::default()
                .with_name(TopicName(s(t)))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(*p)
                    .with_committed_offset(*o)
                    .with_committed_leader_epoch(3)
                    .with_committed_metadata(Some(s(meta)))])
        })
        .collect();
    let req = OffsetCommitRequest::default()
        .with_group_id(group(g))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(s(member))
        .with_topics(topics);
    let resp: OffsetCommitResponse = call(c, ApiKey::OffsetCommit, 7, &req);
    resp.topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect()
}

/// (offset, leader epoch, metadata) committed for `topic`/0.
fn fetched(c: &mut TcpStream, g: &str, topic: &str) -> (i64, i32, String) {
    let req = OffsetFetchRequest::default()
        .with_group_id(group(g))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(TopicName(s(topic)))
            .with_partition_indexes(vec![0])]));
    let resp: OffsetFetchResponse = call(c, ApiKey::OffsetFetch, 7, &req);
    assert_eq!(resp.error_code, NONE);
    let p = &resp.topics[0].partitions[0];
    assert_eq!(p.error_code, NONE);
    (
        p.committed_offset,
        p.committed_leader_epoch,
        p.metadata
            .as_ref()
            .map(|m| m.to_string())
            .unwrap_or_default(),
    )
}

fn describe(c: &mut TcpStream, g: &str) -> describe_groups_response::DescribedGroup {
    let req = DescribeGroupsRequest::default().with_groups(vec![group(g)]);
    let mut resp: DescribeGroupsResponse = call(c, ApiKey::DescribeGroups, 4, &req);
    resp.groups.remove(0)
}

#[test]
fn a_group_runs_through_its_states_and_bad_requests_get_kafkas_codes() {
    let broker = broker();
    kcat(&broker, &["-P", "-t", "data"], Some(b"x\n"));
    let mut c = connect(&broker);

    assert_eq!(
        join(&mut c, &join_request("g", "", 500, 5000)).error_code,
        INVALID_SESSION_TIMEOUT
    );
    let joined = join_new(&mut c, "g", 2000, 5000);
    assert_eq!(joined.error_code, NONE);
    let (me, generation) = (joined.member_id.to_string(), joined.generation_id);
    assert_eq!(
        (generation, joined.leader.to_string()),
        (1, me.clone()),
        "the first member leads"
    );
    assert_eq!(joined.protocol_name.as_deref(), Some("range"));
    assert_eq!(
        joined.members.len(),
        1,
        "the leader gets every member's metadata"
    );
    assert_eq!(&joined.members[0].metadata[..], b"subscription");

    // Another protocol type cannot join this group.
    let mut other = join_request("g", "", 2000, 5000);
    other.protocol_type = s("connect");
    assert_eq!(
        join(&mut connect(&broker), &other).error_code,
        INCONSISTENT_GROUP_PROTOCOL
    );

    let synced = sync(&mut c, "g", generation, &me, &[(&me, b"my-partitions")]);
    assert_eq!(synced.error_code, NONE);
    assert_eq!(&synced.assignment[..], b"my-partitions");
    assert_eq!(
        sync(&mut c, "g", generation, "nobody", &[]).error_code,
        UNKNOWN_MEMBER_ID
    );

    assert_eq!(heartbeat(&mut c, "g", generation, &me), NONE);
    assert_eq!(
        heartbeat(&mut c, "g", generation, "nobody"),
        UNKNOWN_MEMBER_ID
    );
    assert_eq!(
        heartbeat(&mut c, "g", generation + 5, &me),
        ILLEGAL_GENERATION
    );

    let d = describe(&mut c, "g");
    assert_eq!(
        (d.group_state.as_str(), d.protocol_data.as_str()),
        ("Stable", "range")
    );
    assert_eq!(d.members.len(), 1);
    assert_eq!(d.members[0].client_id.as_str(), "hostile-test");
    assert_eq!(d.members[0].client_host.as_str(), "/127.0.0.1");
    assert_eq!(&d.members[0].member_assignment[..], b"my-partitions");
    let listed: ListGroupsResponse =
        call(&mut c, ApiKey::ListGroups, 4, &ListGroupsRequest::default());
    assert!(listed
        .groups
        .iter()
        .any(|l| l.group_id.as_str() == "g" && l.group_state.as_str() == "Stable"));

    // Commits: per-partition codes, and offsets come back exactly as committed.
    let codes = commit(
        &mut c,
        "g",
        generation,
        &me,
        &[
            ("data", 0, 1, "fine"),
            ("no-such-topic", 0, 1, ""),
            ("data", 0, 1, "seventeen bytes!!"),
        ],
    );
    assert_eq!(
        codes,
        vec![NONE, UNKNOWN_TOPIC_OR_PARTITION, OFFSET_METADATA_TOO_LARGE]
    );
    assert_eq!(fetched(&mut c, "g", "data"), (1, 3, "fine".to_string()));
    assert_eq!(
        commit(&mut c, "g", generation + 1, &me, &[("data", 0, 9, "")]),
        vec![ILLEGAL_GENERATION]
    );
    assert_eq!(
        commit(&mut c, "g", generation, "nobody", &[("data", 0, 9, "")]),
        vec![UNKNOWN_MEMBER_ID]
    );
    assert_eq!(
        commit(&mut c, "g", -1, "", &[("data", 0, 9, "")]),
        vec![UNKNOWN_MEMBER_ID],
        "only members commit to a group with members"
    );
    assert_eq!(
        fetched(&mut c, "g", "data").0,
        1,
        "refused commits change nothing"
    );
    assert_eq!(
        fetched(&mut c, "nobody-group", "data"),
        (-1, -1, String::new())
    );

    let delete = |c: &mut TcpStream| -> i16 {
        let req = DeleteGroupsRequest::default().with_groups_names(vec![group("g")]);
        let resp: DeleteGroupsResponse = call(c, ApiKey::DeleteGroups, 2, &req);
        resp.results[0].error_code
    };
    assert_eq!(delete(&mut c), NON_EMPTY_GROUP);
    let leave = LeaveGroupRequest::default()
        .with_group_id(group("g"))
        .with_members(vec![MemberIdentity::default().with_member_id(s(&me))]);
    let left: LeaveGroupResponse = call(&mut c, ApiKey::LeaveGroup, 3, &leave);
    assert_eq!((left.error_code, left.members[0].error_code), (NONE, NONE));
    assert_eq!(describe(&mut c, "g").group_state.as_str(), "Empty");
    // An empty group takes commits from anyone (standalone consumers use generation -1).
    assert_eq!(
        commit(&mut c, "g", -1, "", &[("data", 0, 1, "again")]),
        vec![NONE]
    );
    assert_eq!(delete(&mut c), NONE);
    assert_eq!(describe(&mut c, "g").group_state.as_str(), "Dead");
    assert_eq!(
        fetched(&mut c, "g", "data"),
        (-1, -1, String::new()),
        "deleting a group deletes its offsets"
    );
}

#[test]
fn a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout() {
    let broker = broker();
    let mut a = connect(&broker);
    let first = join_new(&mut a, "slow", 10_000, 1500);
    assert_eq!(
        sync(&mut a, "slow", 1, &first.member_id, &[]).error_code,
        NONE
    );

    // A second member joins; the first never rejoins (it stops heartbeating and joining).
    let addr = broker.addr.clone();
    let started = Instant::now();
    let second = std::thread::spawn(move || {
        let mut b = TcpStream::connect(addr).unwrap();
        b.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        join_new(&mut b, "slow", 10_000, 1500)
    });
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        heartbeat(&mut a, "slow", 1, &first.member_id),
        REBALANCE_IN_PROGRESS,
        "the first member is told to rejoin"
    );
    let joined = second.join().unwrap();
    let waited = started.elapsed();
    assert_eq!(joined.error_code, NONE);
    assert_eq!(
        (joined.generation_id, joined.members.len()),
        (2, 1),
        "the silent member was dropped"
    );
    assert_eq!(joined.leader, joined.member_id);
    assert!(
        waited >= Duration::from_millis(1400),
        "the rebalance waited its timeout ({waited:?})"
    );
    assert_eq!(
        heartbeat(&mut a, "slow", 1, &first.member_id),
        UNKNOWN_MEMBER_ID
    );
}

#[test]
fn a_leader_that_never_syncs_cannot_hold_the_group() {
    let broker = broker();
    let mut leader = connect(&broker);
    let mut follower = connect(&broker);
    // Both join the same generation: the leader first, then the follower triggers a rebalance
    // the leader joins again.
    let l = join_new(&mut leader, "stuck", 1500, 10_000);
    let leader_id = l.member_id.to_string();
    assert_eq!(
        sync(&mut leader, "stuck", 1, &leader_id, &[]).error_code,
        NONE
    );
    let addr = broker.addr.clone();
    let follower_join = std::thread::spawn(move || join_new(&mut follower, "stuck", 1500, 10_000));
    std::thread::sleep(Duration::from_millis(200));
    let again = join(
        &mut leader,
        &join_request("stuck", &leader_id, 1500, 10_000),
    );
    assert_eq!((again.error_code, again.generation_id), (NONE, 2));
    let f = follower_join.join().unwrap();
    assert_eq!(f.generation_id, 2);
    // The leader never sends SyncGroup; the follower's SyncGroup waits, and is released when
    // the leader's session runs out.
    let mut follower = TcpStream::connect(addr).unwrap();
    follower
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let started = Instant::now();
    let synced = sync(&mut follower, "stuck", 2, &f.member_id, &[]);
    assert_eq!(synced.error_code, REBALANCE_IN_PROGRESS);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "released by the 1.5 s session timeout"
    );
    let d = describe(&mut leader, "stuck");
    assert!(
        d.members.iter().all(|m| m.member_id.as_str() != leader_id),
        "the silent leader is out"
    );
}

#[test]
fn a_static_member_id_is_fenced_once_its_instance_rejoins() {
    let broker = broker();
    let mut c = connect(&broker);
    let with_instance = |member: &str| {
        join_request("static", member, 2000, 5000).with_group_instance_id(Some(s("instance-1")))
    };
    let first = join(&mut c, &with_instance(""));
    assert_eq!(
        first.error_code, NONE,
        "static members need no MEMBER_ID_REQUIRED round"
    );
    assert_eq!(
        sync(
            &mut c,
            "static",
            1,
            &first.member_id,
            &[(&first.member_id, b"a")]
        )
        .error_code,
        NONE
    );
    let second = join(&mut c, &with_instance(""));
    assert_eq!(second.error_code, NONE);
    assert_ne!(second.member_id, first.member_id);
    assert_eq!(second.generation_id, 1, "no rebalance");
    let req = HeartbeatRequest::default()
        .with_group_id(group("static"))
        .with_generation_id(1)
        .with_member_id(first.member_id.clone())
        .with_group_instance_id(Some(s("instance-1")));
    let old: HeartbeatResponse = call(&mut c, ApiKey::Heartbeat, 3, &req);
    assert_eq!(old.error_code, FENCED_INSTANCE_ID);
    let synced = sync(&mut c, "static", 1, &second.member_id, &[]);
    assert_eq!(
        (synced.error_code, &synced.assignment[..]),
        (NONE, &b"a"[..]),
        "the old assignment is kept"
    );
}

#[test]
fn a_leader_that_heartbeats_but_never_syncs_is_dropped_at_the_rebalance_timeout() {
    let broker = broker();
    let mut leader = connect(&broker);
    let l = join_new(&mut leader, "busy", 3000, 2000);
    let leader_id = l.member_id.to_string();
    assert_eq!(
        sync(&mut leader, "busy", 1, &leader_id, &[]).error_code,
        NONE
    );
    let addr = broker.addr.clone();
    let follower = std::thread::spawn(move || {
        let mut f = TcpStream::connect(addr).unwrap();
        f.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let joined = join_new(&mut f, "busy", 3000, 2000);
        let started = Instant::now();
        let synced = sync(&mut f, "busy", joined.generation_id, &joined.member_id, &[]);
        (synced.error_code, started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(200));
    let again = join(&mut leader, &join_request("busy", &leader_id, 3000, 2000));
    assert_eq!((again.error_code, again.generation_id), (NONE, 2));
    // The leader keeps its session alive but never assigns.
    let until = Instant::now() + Duration::from_secs(4);
    let mut last = NONE;
    while Instant::now() < until && last == NONE {
        last = heartbeat(&mut leader, "busy", 2, &leader_id);
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(
        last, UNKNOWN_MEMBER_ID,
        "the leader is removed for not syncing"
    );
    let (code, waited) = follower.join().unwrap();
    assert_eq!(code, REBALANCE_IN_PROGRESS);
    assert!(
        waited < Duration::from_secs(4),
        "released at the 2 s rebalance timeout, after {waited:?}"
    );
}
