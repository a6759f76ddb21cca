//! Topic creation cannot take the broker down: CreateTopics and CreatePartitions past
//! `topic.partitions.per.shard` are refused with INVALID_PARTITIONS before anything is created,
//! and `max.connections` makes new connections wait rather than fail. (The descriptor budget
//! has its own test binary, `descriptor_limit.rs`, because it lowers the process's limit.)

mod common;

use common::wire::{self, create_topic};
use common::{kcat, Broker};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn grow_topic(broker: &Broker, topic: &str, count: i32) -> (i16, String) {
    let mut s = wire::connect(broker);
    let req = CreatePartitionsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(name(topic))
            .with_count(count)]);
    let resp: CreatePartitionsResponse = wire::call(&mut s, ApiKey::CreatePartitions, 3, &req);
    let r = &resp.results[0];
    (r.error_code, wire::message(&r.error_message))
}

/// The partition directories of `topic` in the data directory.
fn partition_dirs(data_dir: &Path, topic: &str) -> usize {
    let prefix = format!("{topic}-");
    std::fs::read_dir(data_dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .count()
}

const INVALID_PARTITIONS: i16 = 37;

#[test]
fn creations_past_the_per_shard_bound_are_refused_and_leave_nothing() {
    let mut broker = Broker::start(&["--set", "topic.partitions.per.shard=100"]);
    // Two shards of 100: a topic of 201 partitions cannot be placed, one of 200 can.
    let (code, message) = create_topic(&broker, "huge", 201);
    assert_eq!(code, INVALID_PARTITIONS, "{message}");
    assert!(
        message.contains("topic.partitions.per.shard (100)"),
        "{message}"
    );
    assert_eq!(partition_dirs(&broker.data_dir, "huge"), 0);
    // What was refused left no room taken: the whole bound is still there.
    assert_eq!(create_topic(&broker, "half", 100), (0, String::new()));
    let (code, message) = grow_topic(&broker, "half", 65_536);
    assert_eq!(code, INVALID_PARTITIONS, "{message}");
    assert_eq!(partition_dirs(&broker.data_dir, "half"), 100);
    assert_eq!(grow_topic(&broker, "half", 200).0, 0);
    // A request with several topics is checked topic by topic, counting those before it.
    assert_eq!(create_topic(&broker, "one-more", 1).0, INVALID_PARTITIONS);
    assert_eq!(partition_dirs(&broker.data_dir, "one-more"), 0);

    // The broker serves on, and restarts on its data directory.
    kcat(
        &broker,
        &["-P", "-t", "half", "-p", "150", "-X", "acks=all"],
        Some(b"kept\n"),
    );
    assert!(broker.stop().success());
    broker.restart();
    let read = kcat(
        &broker,
        &[
            "-C",
            "-t",
            "half",
            "-p",
            "150",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%s\n",
        ],
        None,
    );
    assert_eq!(String::from_utf8_lossy(&read), "kept\n");
    assert!(!broker.data_dir.join("meta/topics/huge.json").exists());
}

#[test]
fn at_max_connections_a_new_connection_waits_until_one_closes() {
    let broker = Broker::start(&["--set", "max.connections=2"]);
    let mut first = wire::connect(&broker);
    let mut second = wire::connect(&broker);
    for s in [&mut first, &mut second] {
        let _: ApiVersionsResponse =
            wire::call(s, ApiKey::ApiVersions, 0, &ApiVersionsRequest::default());
    }
    // The third is taken by the kernel's backlog but not accepted: no answer.
    let mut third = wire::connect(&broker);
    assert!(
        !answered_within(&mut third, Duration::from_millis(1500)),
        "a third connection was served past max.connections=2"
    );
    // One closes: the waiting one is accepted and answered.
    drop(first);
    assert!(
        answer_arrives(&mut third),
        "the waiting connection was not served after one closed"
    );
    drop(second);
    drop(third);
    // Closed connections give their places back.
    let listing = kcat(&broker, &["-L"], None);
    assert!(String::from_utf8_lossy(&listing).contains("1 brokers"));
    assert!(broker.log().contains("max.connections reached"));
}

/// Whether the answer to the request already sent on `conn` comes within 10 s.
fn answer_arrives(conn: &mut std::net::TcpStream) -> bool {
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    wire::read_frame(conn).is_some()
}

/// Sends ApiVersions on `conn`; whether it is answered within `wait`.
fn answered_within(conn: &mut std::net::TcpStream, wait: Duration) -> bool {
    conn.set_read_timeout(Some(wait)).unwrap();
    conn.write_all(&wire::frame(
        ApiKey::ApiVersions,
        0,
        7,
        &ApiVersionsRequest::default(),
    ))
    .unwrap();
    wire::read_frame(conn).is_some()
}

#[test]
fn at_a_listeners_max_connections_its_new_connections_wait_and_the_others_are_served() {
    let tmp = tempfile::tempdir().unwrap();
    let (plain, limited) = (common::free_port(), common::free_port());
    let listeners =
        format!("listeners=PLAINTEXT://127.0.0.1:{plain},LIMITED://127.0.0.1:{limited}");
    let broker = Broker::start_at(
        &tmp.path().join("data"),
        plain,
        &[
            "--set",
            &listeners,
            "--set",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,LIMITED:PLAINTEXT",
            "--set",
            "listener.name.limited.max.connections=1",
        ],
    );
    let limited_addr = format!("127.0.0.1:{limited}");
    let mut first = wire::connect_to(&limited_addr);
    assert!(answered_within(&mut first, Duration::from_secs(10)));
    // The second on the limited listener waits, unanswered; the other listener serves on.
    let mut second = wire::connect_to(&limited_addr);
    assert!(
        !answered_within(&mut second, Duration::from_millis(1500)),
        "a second connection was served past listener.name.limited.max.connections=1"
    );
    for _ in 0..3 {
        let mut other = wire::connect(&broker);
        assert!(answered_within(&mut other, Duration::from_secs(10)));
    }
    // The first closes: the waiting one is accepted and answered.
    drop(first);
    assert!(
        answer_arrives(&mut second),
        "the waiting connection was not served after the first closed"
    );
    assert!(broker
        .log()
        .contains("the listener's max.connections reached"));
}

#[test]
fn a_listener_max_connections_that_is_not_a_count_stops_the_broker_at_start() {
    let message = common::serve_refused(&["--set", "listener.name.plaintext.max.connections=many"]);
    assert!(
        message.contains("listener.name.plaintext.max.connections") && message.contains("many"),
        "{message}"
    );
}

#[test]
fn a_creation_a_shard_cannot_open_is_undone_everywhere() {
    let mut broker = Broker::start(&[]);
    // A stray file where partition 5's directory would go: that partition cannot open, the
    // other seven can.
    let stray = broker.data_dir.join("blocked-5");
    std::fs::write(&stray, b"not a partition").unwrap();
    let (code, message) = create_topic(&broker, "blocked", 8);
    assert_eq!(code, 56, "KAFKA_STORAGE_ERROR: {message}");
    assert_eq!(
        partition_dirs(&broker.data_dir, "blocked"),
        1,
        "only the stray file is left"
    );
    assert!(!broker.data_dir.join("meta/topics/blocked.json").exists());
    let listing = String::from_utf8_lossy(&kcat(&broker, &["-L"], None)).to_string();
    assert!(!listing.contains("\"blocked\""), "{listing}");

    // Growing a topic that way is undone too: it keeps its partitions and its records.
    assert_eq!(create_topic(&broker, "grows", 2).0, 0);
    kcat(
        &broker,
        &["-P", "-t", "grows", "-p", "1", "-X", "acks=all"],
        Some(b"before\n"),
    );
    std::fs::write(broker.data_dir.join("grows-3"), b"stray").unwrap();
    assert_eq!(grow_topic(&broker, "grows", 6).0, 56);
    assert_eq!(
        partition_dirs(&broker.data_dir, "grows"),
        3,
        "2 and the stray file"
    );

    // Restarted, the broker has neither half-made change; with the stray files gone, the
    // same requests succeed.
    assert!(broker.stop().success());
    broker.restart();
    std::fs::remove_file(&stray).unwrap();
    std::fs::remove_file(broker.data_dir.join("grows-3")).unwrap();
    assert_eq!(create_topic(&broker, "blocked", 8).0, 0);
    assert_eq!(grow_topic(&broker, "grows", 6).0, 0);
    let read = kcat(
        &broker,
        &[
            "-C",
            "-t",
            "grows",
            "-p",
            "1",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%s\n",
        ],
        None,
    );
    assert_eq!(String::from_utf8_lossy(&read), "before\n");
}

const THROTTLING_QUOTA_EXCEEDED: i16 = 89;

/// CreateTopics at `version`: each topic's error code, and the throttle time.
fn create_topics_at(broker: &Broker, version: i16, topics: &[(&str, i32)]) -> (Vec<i16>, i32) {
    let mut s = wire::connect(broker);
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(
            topics
                .iter()
                .map(|(t, n)| {
                    CreatableTopic::default()
                        .with_name(name(t))
                        .with_num_partitions(*n)
                        .with_replication_factor(1)
                })
                .collect(),
        );
    let resp: CreateTopicsResponse = wire::call(&mut s, ApiKey::CreateTopics, version, &req);
    let codes = resp.topics.iter().map(|t| t.error_code).collect();
    (codes, resp.throttle_time_ms)
}

#[test]
fn the_controller_mutation_quota_refuses_changes_once_a_client_has_spent_it() {
    // 20 partitions a second, a bucket of 11 s: 220.
    let broker = Broker::start(&["--set", "quota.controller.mutation.rate=20"]);
    // One change larger than the bucket goes through, and empties it (220 - 260 = -40: 2 s).
    let (codes, throttle_ms) = create_topics_at(&broker, 6, &[("large", 260)]);
    assert_eq!(codes, vec![0]);
    assert!((1500..=2000).contains(&throttle_ms), "{throttle_ms}");
    // Then v6 (which can carry the error) is refused, topic by topic, creating nothing; the
    // DeleteTopics v5 and CreatePartitions v3 the same.
    let (codes, throttle_ms) = create_topics_at(&broker, 6, &[("next", 1), ("and-next", 1)]);
    assert_eq!(codes, vec![THROTTLING_QUOTA_EXCEEDED; 2]);
    assert!(throttle_ms > 0);
    let mut s = wire::connect(&broker);
    let req = DeleteTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topic_names(vec![name("large")]);
    let resp: DeleteTopicsResponse = wire::call(&mut s, ApiKey::DeleteTopics, 5, &req);
    assert_eq!(resp.responses[0].error_code, THROTTLING_QUOTA_EXCEEDED);
    assert!(resp.throttle_time_ms > 0);
    assert_eq!(
        grow_topic(&broker, "large", 300).0,
        THROTTLING_QUOTA_EXCEEDED
    );
    assert_eq!(partition_dirs(&broker.data_dir, "large"), 260);
    assert_eq!(partition_dirs(&broker.data_dir, "next"), 0);
    // An older version cannot be refused: it is served and told to wait.
    let (codes, throttle_ms) = create_topics_at(&broker, 5, &[("older", 1)]);
    assert_eq!(codes, vec![0]);
    assert!(throttle_ms > 0);
    // Once the bucket has refilled, changes are allowed again.
    std::thread::sleep(Duration::from_millis(throttle_ms as u64 + 100));
    let (codes, _) = create_topics_at(&broker, 6, &[("next", 1)]);
    assert_eq!(codes, vec![0]);
    // Auto-creation is never charged.
    kcat(&broker, &["-L", "-t", "auto-created"], None);
}

/// Kafka's `max.connections.per.ip`: a connection past its address's limit is closed as soon
/// as it is accepted (not kept waiting as at `max.connections`), a closed one gives its place
/// back, an override raises one address's limit, and 0 without overrides stops the broker at
/// start.
#[test]
fn past_max_connections_per_ip_a_new_connection_is_closed_at_once() {
    use std::io::Read;
    let served = |s: &mut std::net::TcpStream| {
        let _: ApiVersionsResponse =
            wire::call(s, ApiKey::ApiVersions, 0, &ApiVersionsRequest::default());
    };
    let closed_at_once = |broker: &Broker| {
        let mut s = wire::connect(broker);
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = s.write_all(&wire::frame(
            ApiKey::ApiVersions,
            0,
            7,
            &ApiVersionsRequest::default(),
        ));
        let mut byte = [0u8; 1];
        match s.read(&mut byte) {
            Ok(0) => true,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
            Ok(_) => false,
        }
    };
    // Broker::start's readiness probe may still hold a place for a moment: a connection is
    // taken once it is answered.
    let answered = |broker: &Broker| {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let mut s = wire::connect(broker);
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            s.write_all(&wire::frame(
                ApiKey::ApiVersions,
                0,
                8,
                &ApiVersionsRequest::default(),
            ))
            .unwrap();
            if wire::read_frame(&mut s).is_some() {
                return s;
            }
            assert!(std::time::Instant::now() < deadline, "never answered");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let broker = Broker::start(&["--set", "max.connections.per.ip=2"]);
    let first = answered(&broker);
    let mut second = answered(&broker);
    assert!(closed_at_once(&broker), "a third connection from 127.0.0.1");
    drop(first);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut third = loop {
        // The broker sees the close a moment after the client does.
        std::thread::sleep(Duration::from_millis(100));
        let mut s = wire::connect(&broker);
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(&wire::frame(
            ApiKey::ApiVersions,
            0,
            8,
            &ApiVersionsRequest::default(),
        ))
        .unwrap();
        if wire::read_frame(&mut s).is_some() || std::time::Instant::now() > deadline {
            break s;
        }
    };
    served(&mut third);
    served(&mut second);
    assert!(broker.log().contains("max.connections.per.ip reached"));
    drop(broker);

    let broker = Broker::start(&[
        "--set",
        "max.connections.per.ip=1",
        "--set",
        "max.connections.per.ip.overrides=127.0.0.1:3",
    ]);
    let _held: Vec<_> = (0..3).map(|_| answered(&broker)).collect();
    assert!(closed_at_once(&broker), "a fourth past the override of 3");
    drop(broker);

    let stderr = common::serve_refused(&["--set", "max.connections.per.ip=0"]);
    assert!(
        stderr.contains("max.connections.per.ip.overrides must be set"),
        "{stderr}"
    );
}

/// A consumer's Fetch of partition 0 of `topic` from the start, up to `max_bytes`.
fn fetch_partition_0(topic: &str, max_bytes: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_bytes(max_bytes)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_partition_max_bytes(max_bytes)])])
}

/// A connection holds one descriptor, its socket, whatever it does: its reader and writer
/// share it, and its zero-copy fetches splice through pipes its shard lends, 32 at most per
/// shard. (A connection held two idle, and four once it had fetched.)
#[test]
fn a_connection_costs_one_descriptor_and_fetches_share_their_shards_pipes() {
    const CONNECTIONS: usize = 200;
    const PIPE_DESCRIPTORS: usize = 2 * 32 * 2; // two shards' pipes, two ends each
    let broker = Broker::start(&["--cores", "2"]);
    let records: String = (0..200).map(|i| format!("record-{i}\n")).collect();
    kcat(
        &broker,
        &["-P", "-t", "fds", "-p", "0"],
        Some(records.as_bytes()),
    );
    let open = || {
        std::fs::read_dir(format!("/proc/{}/fd", broker.pid()))
            .unwrap()
            .count()
    };
    // kcat has exited, but the broker may not have closed its side yet: count from the moment
    // it has (a count taken earlier includes a descriptor that goes away under the test).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while broker.metric("ferrite_connections_open") > 0.0 {
        assert!(
            std::time::Instant::now() < deadline,
            "kcat's connection never closed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Its socket is closed by the ring a moment after the connection ends: wait for the count
    // to hold still.
    let mut before = open();
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let now = open();
        if now == before {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "descriptors never settled"
        );
        before = now;
    }
    let mut connections: Vec<_> = (0..CONNECTIONS).map(|_| wire::connect(&broker)).collect();
    for c in &mut connections {
        let _: ApiVersionsResponse =
            wire::call(c, ApiKey::ApiVersions, 0, &ApiVersionsRequest::default());
    }
    let idle = open() - before;
    assert!(
        (CONNECTIONS..CONNECTIONS + 8).contains(&idle),
        "{CONNECTIONS} idle connections hold {idle} descriptors"
    );
    let fetch = fetch_partition_0("fds", 1 << 20);
    for c in &mut connections {
        let r: FetchResponse = wire::call(c, ApiKey::Fetch, 11, &fetch);
        let p = &r.responses[0].partitions[0];
        assert_eq!(p.error_code, 0);
        assert_eq!(p.high_watermark, 200);
        assert!(p.records.as_ref().is_some_and(|b| !b.is_empty()));
    }
    let fetched = open() - before;
    assert!(
        fetched <= CONNECTIONS + PIPE_DESCRIPTORS + 8,
        "{CONNECTIONS} connections hold {fetched} descriptors after fetching"
    );
    // The ranges went out by splice: the shards opened pipes, and copied nothing for want of one.
    let pipes = broker.metric("ferrite_splice_pipes_open");
    assert!((1.0..=64.0).contains(&pipes), "{pipes} pipes open");
    assert_eq!(broker.metric("ferrite_splice_pipe_busy_bytes_total"), 0.0);
}

/// A client that stops reading cannot hold its connection for ever: once its socket has taken
/// nothing for `connections.max.idle.ms`, the broker closes the connection (Kafka closes a
/// channel with no progress for that long), and the splice pipe its fetch borrowed with it.
#[test]
fn a_client_that_stops_reading_is_closed_after_connections_max_idle_ms() {
    let broker = Broker::start(&["--set", "connections.max.idle.ms=2000"]);
    // 12 MiB in one partition: more than the two sockets' buffers and a pipe hold.
    let record = format!("{}\n", "r".repeat(1023));
    let records = record.repeat(12 * 1024);
    kcat(
        &broker,
        &["-P", "-t", "unread", "-p", "0"],
        Some(records.as_bytes()),
    );
    let open_connections = || broker.metric("ferrite_connections_open");
    let mut stuck = wire::connect(&broker);
    let small: libc::c_int = 4096;
    // SAFETY: setsockopt reads an int from a pointer valid for the call.
    unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&stuck),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &small as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    let fetch = fetch_partition_0("unread", 64 << 20);
    stuck
        .write_all(&wire::frame(ApiKey::Fetch, 11, 1, &fetch))
        .unwrap();
    // The metrics scrape is a connection too, closed before the figure is read.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(open_connections(), 1.0, "the stuck client is connected");
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while open_connections() > 0.0 {
        assert!(
            std::time::Instant::now() < deadline,
            "a client that read nothing for 15 s is still connected"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    drop(stuck);
}
