//! The group state machine without a broker: a coordinator on one real `__consumer_offsets`
//! partition in a temporary directory, driven through its API as the handlers drive it.

use super::*;
use ferrite_shards::log::LogOptions;
use ferrite_shards::partition::replication::Role;
use ferrite_shards::IoMode;
use std::cell::Cell;
use std::future::Future;
use std::sync::Arc;

const GROUP: &str = "g";
const TOPIC: &str = "orders";

/// A shard as the coordinator sees it: one open `__consumer_offsets` partition (index 0 of
/// 1) and one topic, `orders`, with two partitions.
struct TestHost {
    offsets: Rc<Partition>,
    stopping: Cell<bool>,
}

impl GroupHost for TestHost {
    fn offsets_partition(&self, index: i32) -> Option<Rc<Partition>> {
        (index == 0).then(|| self.offsets.clone())
    }

    fn offsets_partition_count(&self) -> i32 {
        1
    }

    fn has_partition(&self, topic: &str, partition: i32) -> bool {
        topic == TOPIC && (0..2).contains(&partition)
    }

    fn is_shutting_down(&self) -> bool {
        self.stopping.get()
    }
}

fn config() -> GroupConfig {
    GroupConfig {
        initial_rebalance_delay: Duration::ZERO,
        min_session_timeout: Duration::from_millis(10),
        max_session_timeout: Duration::from_secs(30),
        offset_metadata_max_bytes: 16,
    }
}

async fn open_offsets(dir: &std::path::Path) -> Rc<Partition> {
    let options = LogOptions {
        config: Default::default(),
        io_mode: IoMode::Buffered,
        writer: Default::default(),
        cache: None,
    };
    let p = Partition::open(
        &dir.join("__consumer_offsets-0"),
        Arc::from("__consumer_offsets"),
        0,
        0,
        options,
    )
    .await
    .expect("open __consumer_offsets-0");
    p.set_role(Role {
        node_id: 0,
        leader: 0,
        partition_epoch: 0,
        replicas: vec![0],
        isr: vec![0],
    });
    p
}

/// Runs `test` with a coordinator (and its host, which must outlive it) on a fresh directory.
fn with_coordinator<F, Fut>(config: GroupConfig, test: F)
where
    F: FnOnce(Rc<Coordinator>, Rc<TestHost>, std::path::PathBuf) -> Fut,
    Fut: Future<Output = ()>,
{
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    ferrite_shards::testing::run_local(|| async move {
        let host = Rc::new(TestHost {
            offsets: open_offsets(&path).await,
            stopping: Cell::new(false),
        });
        let weak: Weak<TestHost> = Rc::downgrade(&host);
        let coordinator = Rc::new(Coordinator::new(config, weak));
        test(coordinator, host.clone(), path).await;
        host.stopping.set(true);
        host.offsets.close().await.unwrap();
    });
}

fn join_args(member_id: &str, version: i16) -> JoinArgs {
    JoinArgs {
        group_id: GROUP.into(),
        member_id: member_id.into(),
        instance_id: None,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::from_static(b"subscription"))],
        session_timeout: Duration::from_secs(10),
        rebalance_timeout: Duration::from_millis(400),
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        version,
    }
}

fn sync_args(member_id: &str, generation: i32, assignments: Vec<(String, Bytes)>) -> SyncArgs {
    SyncArgs {
        group_id: GROUP.into(),
        generation,
        member_id: member_id.into(),
        instance_id: None,
        protocol_type: Some("consumer".into()),
        protocol: Some("range".into()),
        assignments,
    }
}

fn commit(member_id: &str, generation: i32, offset: i64, metadata: &str) -> CommitArgs {
    CommitArgs {
        group_id: GROUP.into(),
        generation,
        member_id: member_id.into(),
        instance_id: None,
        offsets: vec![CommitOffset {
            topic: TOPIC.into(),
            partition: 1,
            offset,
            leader_epoch: 3,
            metadata: Some(metadata.into()),
        }],
    }
}

/// One member joins (KIP-394 round included) and syncs: a stable group of one.
async fn stable_single(c: &Rc<Coordinator>) -> (String, i32) {
    let first = c.join(0, join_args("", 9)).await;
    assert_eq!(first.error, ErrorCode::MEMBER_ID_REQUIRED);
    let joined = c.join(0, join_args(&first.member_id, 9)).await;
    assert_eq!(joined.error, ErrorCode::NONE);
    let assignment = vec![(joined.member_id.clone(), Bytes::from_static(b"all"))];
    let synced = c
        .sync(
            0,
            sync_args(&joined.member_id, joined.generation, assignment),
        )
        .await;
    assert_eq!(synced.error, ErrorCode::NONE);
    assert_eq!(synced.assignment, Bytes::from_static(b"all"));
    (joined.member_id, joined.generation)
}

#[test]
fn a_new_member_learns_its_id_first_from_v4_and_joins_at_once_before() {
    with_coordinator(config(), |c, _, _| async move {
        let first = c.join(0, join_args("", 4)).await;
        assert_eq!(first.error, ErrorCode::MEMBER_ID_REQUIRED);
        assert!(
            first.member_id.starts_with("client-"),
            "{}",
            first.member_id
        );
        let joined = c.join(0, join_args(&first.member_id, 4)).await;
        assert_eq!(joined.error, ErrorCode::NONE);
        assert_eq!(joined.generation, 1);
        assert_eq!(joined.leader, first.member_id);
        assert_eq!(joined.members.len(), 1, "the leader gets every member");
        assert_eq!(
            joined.members[0].metadata,
            Bytes::from_static(b"subscription")
        );
        let unknown = c.join(0, join_args("made-up", 4)).await;
        assert_eq!(unknown.error, ErrorCode::UNKNOWN_MEMBER_ID);
    });
    with_coordinator(config(), |c, _, _| async move {
        let joined = c.join(0, join_args("", 3)).await;
        assert_eq!(
            joined.error,
            ErrorCode::NONE,
            "v3 joins without the extra round"
        );
        assert_eq!(joined.generation, 1);
    });
}

#[test]
fn session_timeouts_outside_the_brokers_bounds_are_refused() {
    with_coordinator(config(), |c, _, _| async move {
        for timeout in [Duration::from_millis(5), Duration::from_secs(60)] {
            let mut args = join_args("", 3);
            args.session_timeout = timeout;
            assert_eq!(
                c.join(0, args).await.error,
                ErrorCode::INVALID_SESSION_TIMEOUT
            );
        }
    });
}

#[test]
fn two_members_share_a_generation_and_the_leaders_assignment() {
    // The initial delay is what lets a fleet land in one first generation.
    let delayed = GroupConfig {
        initial_rebalance_delay: Duration::from_millis(100),
        ..config()
    };
    with_coordinator(delayed, |c, _, _| async move {
        let (a, b) = futures::join!(c.join(0, join_args("", 3)), c.join(0, join_args("", 3)));
        assert_eq!((a.error, b.error), (ErrorCode::NONE, ErrorCode::NONE));
        assert_eq!(a.generation, b.generation);
        let (leader, follower) = if a.member_id == a.leader {
            (a, b)
        } else {
            (b, a)
        };
        assert_eq!(leader.members.len(), 2);
        assert!(follower.members.is_empty());
        let assignments = vec![
            (leader.member_id.clone(), Bytes::from_static(b"p0")),
            (follower.member_id.clone(), Bytes::from_static(b"p1")),
        ];
        let (f, l) = futures::join!(
            c.sync(
                0,
                sync_args(&follower.member_id, follower.generation, vec![])
            ),
            c.sync(
                0,
                sync_args(&leader.member_id, leader.generation, assignments)
            ),
        );
        assert_eq!(
            (f.assignment, l.assignment),
            (Bytes::from_static(b"p1"), Bytes::from_static(b"p0"))
        );
        assert_eq!(c.describe(GROUP).state, "Stable");
        assert_eq!(c.describe(GROUP).members.len(), 2);
        let generation = leader.generation;
        assert_eq!(
            c.heartbeat(GROUP, &leader.member_id, &None, generation),
            ErrorCode::NONE
        );
        assert_eq!(
            c.heartbeat(GROUP, &leader.member_id, &None, generation - 1),
            ErrorCode::ILLEGAL_GENERATION,
            "a stale generation"
        );
        assert_eq!(
            c.heartbeat(GROUP, "nobody", &None, generation),
            ErrorCode::UNKNOWN_MEMBER_ID
        );
        let stale_sync = c
            .sync(0, sync_args(&follower.member_id, generation + 1, vec![]))
            .await;
        assert_eq!(stale_sync.error, ErrorCode::ILLEGAL_GENERATION);
    });
}

#[test]
fn a_member_that_does_not_rejoin_within_the_rebalance_timeout_is_dropped() {
    with_coordinator(config(), |c, _, _| async move {
        let (old, generation) = stable_single(&c).await;
        // A second member's join starts a rebalance; the first never rejoins.
        let mut newcomer = join_args("", 3);
        newcomer.rebalance_timeout = Duration::from_millis(300);
        let started = Instant::now();
        let joined = c.join(0, newcomer).await;
        assert_eq!(joined.error, ErrorCode::NONE);
        assert!(
            started.elapsed() >= Duration::from_millis(250),
            "waited out the timeout"
        );
        assert_eq!(joined.generation, generation + 1);
        assert_eq!(joined.leader, joined.member_id, "the newcomer leads alone");
        assert_eq!(joined.members.len(), 1);
        assert_eq!(
            c.heartbeat(GROUP, &old, &None, generation),
            ErrorCode::UNKNOWN_MEMBER_ID
        );
    });
}

#[test]
fn a_silent_member_is_removed_after_its_session_timeout() {
    with_coordinator(config(), |c, _, _| async move {
        let mut args = join_args("", 3);
        args.session_timeout = Duration::from_millis(100);
        let joined = c.join(0, args).await;
        let assignment = vec![(joined.member_id.clone(), Bytes::new())];
        c.sync(
            0,
            sync_args(&joined.member_id, joined.generation, assignment),
        )
        .await;
        glommio::timer::sleep(Duration::from_millis(50)).await;
        c.expire_sessions();
        assert_eq!(c.describe(GROUP).members.len(), 1, "within its session");
        glommio::timer::sleep(Duration::from_millis(150)).await;
        c.expire_sessions();
        glommio::timer::sleep(Duration::from_millis(20)).await;
        let d = c.describe(GROUP);
        assert_eq!((d.state, d.members.len()), ("Empty", 0));
    });
}

#[test]
fn a_static_member_returning_gets_its_place_back_without_a_rebalance() {
    with_coordinator(config(), |c, _, _| async move {
        let mut args = join_args("", 9);
        args.instance_id = Some("host-1".into());
        let joined = c.join(0, args).await;
        assert_eq!(
            joined.error,
            ErrorCode::NONE,
            "static members skip MEMBER_ID_REQUIRED"
        );
        let assignment = vec![(joined.member_id.clone(), Bytes::from_static(b"mine"))];
        c.sync(
            0,
            sync_args(&joined.member_id, joined.generation, assignment),
        )
        .await;
        // The process restarts: same instance id, no member id.
        let mut again = join_args("", 9);
        again.instance_id = Some("host-1".into());
        let back = c.join(0, again).await;
        assert_eq!(back.error, ErrorCode::NONE);
        assert_ne!(back.member_id, joined.member_id);
        assert_eq!(back.generation, joined.generation, "no rebalance");
        assert!(
            back.skip_assignment,
            "the static leader keeps the assignment"
        );
        assert_eq!(c.describe(GROUP).state, "Stable");
        let fenced = c.heartbeat(
            GROUP,
            &joined.member_id,
            &Some("host-1".into()),
            joined.generation,
        );
        assert_eq!(
            fenced,
            ErrorCode::FENCED_INSTANCE_ID,
            "the old id is fenced"
        );
        let mut sync = sync_args(&back.member_id, back.generation, vec![]);
        sync.instance_id = Some("host-1".into());
        assert_eq!(
            c.sync(0, sync).await.assignment,
            Bytes::from_static(b"mine")
        );
    });
}

#[test]
fn commits_follow_kafkas_rules_and_come_back_after_a_reload() {
    with_coordinator(config(), |c, host, _| async move {
        // An empty group takes commits from anyone (generation -1, no member id).
        assert_eq!(
            c.commit(0, commit("", -1, 42, "m")).await,
            [ErrorCode::NONE]
        );
        let mut unknown = commit("", -1, 1, "m");
        unknown.offsets[0].topic = "missing".into();
        assert_eq!(
            c.commit(0, unknown).await,
            [ErrorCode::UNKNOWN_TOPIC_OR_PARTITION]
        );
        assert_eq!(
            c.commit(0, commit("", -1, 1, "metadata far too long"))
                .await,
            [ErrorCode::OFFSET_METADATA_TOO_LARGE]
        );
        let (member, generation) = stable_single(&c).await;
        assert_eq!(
            c.commit(0, commit("", -1, 7, "m")).await,
            [ErrorCode::UNKNOWN_MEMBER_ID],
            "a group with members takes commits from its members only"
        );
        assert_eq!(
            c.commit(0, commit(&member, generation + 1, 7, "m")).await,
            [ErrorCode::ILLEGAL_GENERATION]
        );
        assert_eq!(
            c.commit(0, commit(&member, generation, 43, "n")).await,
            [ErrorCode::NONE]
        );
        let fetched = c.fetch(GROUP, Some(vec![(TOPIC.into(), vec![1, 0])]), false);
        let offsets = &fetched[0].1;
        assert!(matches!(&offsets[0].1, Fetched::Committed(Some(v)) if v.offset == 43));
        assert_eq!(
            offsets[1].1,
            Fetched::Committed(None),
            "partition 0 has no commit"
        );
        // A coordinator reading the same partition afresh finds the group and its offsets.
        let weak: Weak<TestHost> = Rc::downgrade(&host);
        let fresh = Coordinator::new(config(), weak);
        let (groups, offsets) = fresh.load(&host.offsets).await.unwrap();
        assert!(
            groups >= 1 && offsets >= 1,
            "{groups} groups, {offsets} offsets"
        );
        let reloaded = fresh.fetch(GROUP, None, false);
        let Fetched::Committed(Some(value)) = reloaded[0].1[0].1.clone() else {
            panic!("no offset after the reload: {reloaded:?}");
        };
        assert_eq!(
            (value.offset, value.leader_epoch, value.metadata.as_str()),
            (43, 3, "n")
        );
        assert_eq!(
            fresh.describe(GROUP).members.len(),
            1,
            "the stored member is back"
        );
    });
}

#[test]
fn only_an_empty_group_is_deleted_and_its_offsets_go_with_it() {
    with_coordinator(config(), |c, host, _| async move {
        let (member, generation) = stable_single(&c).await;
        assert_eq!(
            c.commit(0, commit(&member, generation, 5, "")).await,
            [ErrorCode::NONE]
        );
        assert_eq!(c.delete(0, GROUP).await, ErrorCode::NON_EMPTY_GROUP);
        assert_eq!(c.leave(0, GROUP, vec![(member, None)]), [ErrorCode::NONE]);
        glommio::timer::sleep(Duration::from_millis(20)).await;
        assert_eq!(c.describe(GROUP).state, "Empty");
        assert_eq!(c.delete(0, GROUP).await, ErrorCode::NONE);
        assert_eq!(c.delete(0, GROUP).await, ErrorCode::GROUP_ID_NOT_FOUND);
        let weak: Weak<TestHost> = Rc::downgrade(&host);
        let fresh = Coordinator::new(config(), weak);
        fresh.load(&host.offsets).await.unwrap();
        assert!(
            fresh.fetch(GROUP, None, false).is_empty(),
            "the tombstones won"
        );
        assert_eq!(fresh.describe(GROUP).state, "Dead");
    });
}
