//! Three brokers and a real ZooKeeper on 127.0.0.1: registration, the controller election,
//! leaders spread over the brokers, failover of the controller, a broker whose session expires,
//! and ZooKeeper itself going quiet. (Replication comes later; topics here have one replica.)

mod common;

use common::cluster::{
    broker_ids, cluster_args, describe_config, isr, leaders, metadata, partitions, reassign,
    set_config, start_broker_on, start_cluster, wait_until, BROKER, SESSION_MS, TOPIC,
};
use common::zookeeper::ZooKeeper;
use common::{kcat, kcat_consume, wire, Broker};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, BrokerId, ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::time::{Duration, Instant};

fn produce_keyed(broker: &Broker, topic: &str, from: usize, count: usize) {
    let input: String = (from..from + count)
        .map(|i| format!("key-{i}:value-{i}\n"))
        .collect();
    kcat(
        broker,
        &[
            "-P",
            "-t",
            topic,
            "-K",
            ":",
            "-X",
            "message.timeout.ms=20000",
        ],
        Some(input.as_bytes()),
    );
}

fn consume_all(broker: &Broker, topic: &str) -> Vec<String> {
    let mut values = kcat_consume(broker, topic, "%s\n");
    values.sort();
    values
}

fn values(range: std::ops::Range<usize>) -> Vec<String> {
    let mut v: Vec<String> = range.map(|i| format!("value-{i}")).collect();
    v.sort();
    v
}

/// The error code a broker gives ListOffsets for one partition.
fn list_offsets_code(broker: &Broker, topic: &str, partition: i32) -> i16 {
    let mut s = wire::connect(broker);
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_timestamp(-1)])]);
    let resp: ListOffsetsResponse = wire::call(&mut s, ApiKey::ListOffsets, 1, &req);
    resp.topics[0].partitions[0].error_code
}

#[test]
fn three_brokers_register_elect_one_controller_and_spread_leaders() {
    let zk = ZooKeeper::start();
    let brokers = start_cluster(&zk, &[]);
    wait_until(
        Duration::from_secs(20),
        "three brokers and a controller",
        || {
            let md = metadata(&brokers[0], None);
            broker_ids(&md) == [1, 2, 3] && md["controllerid"].as_i64().unwrap_or(-1) > 0
        },
    );
    let dump = zk.four_letter("dump");
    for node in [
        "/brokers/ids/1",
        "/brokers/ids/2",
        "/brokers/ids/3",
        "/controller",
    ] {
        assert!(dump.contains(node), "{node} is an ephemeral znode:\n{dump}");
    }
    // Auto-created with six partitions: two led by each broker.
    produce_keyed(&brokers[1], "spread", 0, 600);
    let md = metadata(&brokers[2], Some("spread"));
    let led = leaders(&md, "spread");
    assert_eq!(led.len(), 6, "{md}");
    for b in 1..=3 {
        assert_eq!(led.values().filter(|&&l| l == b).count(), 2, "{led:?}");
    }
    assert_eq!(consume_all(&brokers[0], "spread"), values(0..600));
    // CreatePartitions: three more, one more led by each broker.
    let out = common::python(
        "confluent_admin_grow.py",
        &[&brokers[0].addr, "spread", "9"],
    );
    assert!(out.contains("grew"), "{out}");
    let grown = leaders(&metadata(&brokers[1], Some("spread")), "spread");
    assert_eq!(grown.len(), 9, "{grown:?}");
    for b in 1..=3 {
        assert_eq!(grown.values().filter(|&&l| l == b).count(), 3, "{grown:?}");
    }
    // A broker that does not lead a partition says so; its leader answers.
    let (&p, &leader) = led.iter().next().unwrap();
    for (i, b) in brokers.iter().enumerate() {
        let code = list_offsets_code(b, "spread", p as i32);
        let want = if i as i64 + 1 == leader { 0 } else { 6 };
        assert_eq!(
            code,
            want,
            "broker {} for partition {p} led by {leader}",
            i + 1
        );
    }
}

/// Kafka's metadata per listener: a client on a listener only broker 3 has is told only of
/// broker 3, and a partition led by another broker has no leader for it: LISTENER_NOT_FOUND
/// from Metadata v6, LEADER_NOT_AVAILABLE before.
#[test]
fn a_partition_led_by_a_broker_without_the_clients_listener_is_listener_not_found() {
    let zk = ZooKeeper::start();
    let tmp = tempfile::tempdir().unwrap(); // broker 3's, outliving it
    let mut brokers = vec![
        start_broker_on(&zk.connect_string(), 1, &[]),
        start_broker_on(&zk.connect_string(), 2, &[]),
    ];
    let (plain, external) = (common::free_port(), common::free_port());
    let mut args = cluster_args(&zk.connect_string(), 3);
    for setting in [
        format!("listeners=PLAINTEXT://127.0.0.1:{plain},EXTERNAL://127.0.0.1:{external}"),
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT".into(),
        "inter.broker.listener.name=PLAINTEXT".into(),
    ] {
        args.extend(["--set".to_string(), setting]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    brokers.push(Broker::start_at(&tmp.path().join("data"), plain, &args));
    wait_until(Duration::from_secs(20), "three brokers", || {
        broker_ids(&metadata(&brokers[0], None)) == [1, 2, 3]
    });
    produce_keyed(&brokers[0], "outside", 0, 60);
    let led = leaders(&metadata(&brokers[0], Some("outside")), "outside");
    assert_eq!(led.len(), 6, "{led:?}");
    let mut conn = wire::connect_to(&format!("127.0.0.1:{external}"));
    for version in [0, 5, 6, 12] {
        let topic = MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str("outside"))));
        let md: MetadataResponse = wire::call(
            &mut conn,
            ApiKey::Metadata,
            version,
            &MetadataRequest::default().with_topics(Some(vec![topic])),
        );
        let brokers: Vec<(i32, i32)> = md.brokers.iter().map(|b| (b.node_id.0, b.port)).collect();
        assert_eq!(brokers, [(3, external as i32)], "v{version}");
        let unreachable = if version >= 6 { 72 } else { 5 };
        for p in &md.topics[0].partitions {
            let leader = led[&(p.partition_index as i64)];
            let (code, id) = if leader == 3 {
                (0, 3)
            } else {
                (unreachable, -1)
            };
            assert_eq!(
                (p.error_code, p.leader_id.0),
                (code, id),
                "v{version} partition {} led by {leader}",
                p.partition_index
            );
        }
    }
}

#[test]
fn the_controller_moves_when_it_dies_and_a_returning_broker_leads_again() {
    let zk = ZooKeeper::start();
    let mut brokers = start_cluster(&zk, &[]);
    produce_keyed(&brokers[0], "failover", 0, 300);
    let md = metadata(&brokers[0], Some("failover"));
    let controller = md["controllerid"].as_i64().unwrap();
    let before = leaders(&md, "failover");
    let dead = (controller - 1) as usize;
    let survivor = (dead + 1) % 3;
    brokers[dead].kill9();
    let killed = Instant::now();
    wait_until(
        Duration::from_millis(SESSION_MS) + Duration::from_secs(10),
        "a new controller, and the dead broker's partitions offline",
        || {
            let md = metadata(&brokers[survivor], Some("failover"));
            let now = leaders(&md, "failover");
            let c = md["controllerid"].as_i64().unwrap_or(-1);
            c > 0
                && c != controller
                && before.iter().all(|(p, &l)| {
                    if l == controller {
                        now[p] == -1
                    } else {
                        now[p] == l
                    }
                })
        },
    );
    println!("new controller after {:?}", killed.elapsed());
    // The partitions of the live brokers keep serving.
    let live: Vec<i64> = before
        .iter()
        .filter(|(_, &l)| l != controller)
        .map(|(p, _)| *p)
        .collect();
    for p in &live {
        let input = format!("late-{p}\n");
        kcat(
            &brokers[survivor],
            &["-P", "-t", "failover", "-p", &p.to_string()],
            Some(input.as_bytes()),
        );
    }
    brokers[dead].restart();
    wait_until(
        Duration::from_millis(2 * SESSION_MS) + Duration::from_secs(10),
        "the returning broker leads its partitions again",
        || leaders(&metadata(&brokers[survivor], Some("failover")), "failover") == before,
    );
    let mut want = values(0..300);
    want.extend(live.iter().map(|p| format!("late-{p}")));
    want.sort();
    assert_eq!(consume_all(&brokers[survivor], "failover"), want);
}

#[test]
fn an_expired_session_fences_the_broker_until_it_registers_again() {
    let zk = ZooKeeper::start();
    let brokers = start_cluster(&zk, &[]);
    produce_keyed(&brokers[0], "fenced", 0, 120);
    let before = leaders(&metadata(&brokers[0], Some("fenced")), "fenced");
    // Broker 3 falls silent past its session timeout: the cluster takes its leadership away.
    brokers[2].pause();
    // Both halves of leaving: the registration is gone and its partitions have new leaders
    // (the broker list changes first, so waiting on it alone races the controller).
    wait_until(
        Duration::from_millis(SESSION_MS) + Duration::from_secs(10),
        "broker 3 leaves the cluster and leads nothing",
        || {
            let md = metadata(&brokers[0], Some("fenced"));
            broker_ids(&md) == [1, 2] && !leaders(&md, "fenced").values().any(|&l| l == 3)
        },
    );
    brokers[2].resume();
    wait_until(
        Duration::from_millis(2 * SESSION_MS) + Duration::from_secs(10),
        "broker 3 notices it was fenced, registers again and leads its partitions",
        || {
            let md = metadata(&brokers[0], Some("fenced"));
            brokers[2].log().contains("fenced until registered again")
                && broker_ids(&md) == [1, 2, 3]
                && leaders(&md, "fenced") == before
        },
    );
    assert_eq!(consume_all(&brokers[2], "fenced"), values(0..120));
}

#[test]
fn leaders_keep_serving_while_zookeeper_is_unreachable() {
    let mut zk = ZooKeeper::start();
    let brokers = start_cluster(&zk, &[]);
    produce_keyed(&brokers[0], "quiet", 0, 60);
    let before = leaders(&metadata(&brokers[0], Some("quiet")), "quiet");
    zk.pause();
    // Half the session timeout: nobody's session expires, nothing changes.
    produce_keyed(&brokers[1], "quiet", 60, 60);
    assert_eq!(consume_all(&brokers[2], "quiet"), values(0..120));
    std::thread::sleep(Duration::from_millis(SESSION_MS / 4));
    zk.resume();
    std::thread::sleep(Duration::from_secs(1));
    let md = metadata(&brokers[0], Some("quiet"));
    assert_eq!(broker_ids(&md), [1, 2, 3]);
    assert_eq!(leaders(&md, "quiet"), before);
}

#[test]
fn a_missing_chroot_is_created_and_brokers_under_it_see_only_each_other() {
    let zk = ZooKeeper::start();
    let rooted = format!("{}/kafka/prod", zk.connect_string());
    let under_chroot: Vec<Broker> = (1..=2).map(|n| start_broker_on(&rooted, n, &[])).collect();
    let at_root = start_broker_on(&zk.connect_string(), 3, &[]);
    wait_until(
        Duration::from_secs(20),
        "both brokers under the chroot see each other",
        || broker_ids(&metadata(&under_chroot[0], None)) == [1, 2],
    );
    assert_eq!(
        broker_ids(&metadata(&at_root, None)),
        [3],
        "the root is another cluster"
    );
    let sessions = zk.four_letter("dump");
    assert!(
        sessions.contains("/kafka/prod/brokers/ids/1"),
        "registered under the chroot Kafka's way: {sessions}"
    );
    assert!(sessions.contains("/brokers/ids/3"), "{sessions}");
}

#[test]
fn a_chroot_zookeeper_cannot_hold_stops_the_broker_with_a_clear_error() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .args([
            "serve",
            "--zookeeper",
            "127.0.0.1:1/kafka//prod",
            "--data-dir",
        ])
        .arg(tempfile::tempdir().unwrap().path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--zookeeper") && stderr.contains("chroot"),
        "{stderr}"
    );
}

/// IncrementalAlterConfigs on one broker of a ZooKeeper cluster: the configs go to
/// `/config/topics/<t>` (with a `/config/changes` notification) and every broker's view, so
/// every broker reports them (and its shards apply them, as on a single node).
#[test]
fn a_topic_config_altered_on_one_broker_is_in_force_on_every_broker() {
    let zk = ZooKeeper::start();
    let brokers = start_cluster(&zk, &["--set", "num.partitions=3"]);
    kcat(&brokers[0], &["-L", "-t", "shared"], None);
    let retention = |b: &Broker| describe_config(b, TOPIC, "shared", "retention.ms");
    wait_until(Duration::from_secs(10), "the topic on every broker", || {
        brokers.iter().all(|b| retention(b).is_some())
    });
    assert_eq!(
        set_config(&brokers[1], TOPIC, "shared", "retention.ms", "1234567"),
        0
    );
    for b in &brokers {
        wait_until(
            Duration::from_secs(10),
            "every broker reports the change",
            || {
                retention(b).map(|(v, source, _)| (v, source))
                    == Some((Some("1234567".to_string()), 1))
            },
        );
    }
}

/// `/config/brokers/<default>` reaches every broker; `/config/brokers/<id>` only that one, and
/// wins there. Each broker alters only its own id (Kafka's rule: the admin client sends a
/// broker's resource to that broker).
#[test]
fn broker_configs_at_the_cluster_default_reach_every_broker_and_a_brokers_own_only_it() {
    let zk = ZooKeeper::start();
    let brokers = start_cluster(&zk, &["--set", "num.partitions=3"]);
    kcat(&brokers[0], &["-L", "-t", "defaults"], None);
    let retention = |b: &Broker| {
        describe_config(b, TOPIC, "defaults", "retention.ms").map(|(v, source, _)| (v, source))
    };
    wait_until(Duration::from_secs(10), "the topic on every broker", || {
        brokers.iter().all(|b| retention(b).is_some())
    });
    let is = |v: &str, source: i8| Some((Some(v.to_string()), source));
    assert_eq!(
        set_config(&brokers[1], BROKER, "", "log.retention.ms", "1234567"),
        0
    );
    for b in &brokers {
        wait_until(
            Duration::from_secs(10),
            "every broker has the default",
            || retention(b) == is("1234567", 3),
        );
    }
    assert_eq!(
        set_config(&brokers[2], BROKER, "3", "log.retention.ms", "7654321"),
        0
    );
    wait_until(Duration::from_secs(10), "broker 3 has its own", || {
        retention(&brokers[2]) == is("7654321", 2)
    });
    let (value, source, synonyms) =
        describe_config(&brokers[2], BROKER, "3", "log.retention.ms").unwrap();
    assert_eq!((value.as_deref(), source), (Some("7654321"), 2));
    assert_eq!(synonyms, [2, 3], "its own value, then the cluster default");
    for b in &brokers[..2] {
        assert_eq!(
            retention(b),
            is("1234567", 3),
            "broker 3's value is its own"
        );
    }
    // Kafka's refusals: another broker's id, a static setting.
    assert_eq!(
        set_config(&brokers[0], BROKER, "3", "log.retention.ms", "1"),
        42,
        "INVALID_REQUEST"
    );
    assert_eq!(
        set_config(&brokers[0], BROKER, "", "num.partitions", "5"),
        40,
        "INVALID_CONFIG"
    );
    assert_eq!(retention(&brokers[2]), is("7654321", 2));
}

/// The replica list of one partition, in order, as kcat reports it.
fn replicas(md: &serde_json::Value, topic: &str, partition: i64) -> Vec<i64> {
    partitions(md, topic)
        .filter(|p| p["partition"] == partition)
        .flat_map(|p| p["replicas"].as_array().unwrap().iter())
        .map(|r| r["id"].as_i64().unwrap())
        .collect()
}

/// (replicas, adding, removing) of the partitions `b` lists as being reassigned.
fn ongoing(b: &Broker) -> Vec<(Vec<i32>, Vec<i32>, Vec<i32>)> {
    use kafka_protocol::messages::{
        ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
    };
    let mut conn = wire::connect(b);
    let answer: ListPartitionReassignmentsResponse = wire::call(
        &mut conn,
        ApiKey::ListPartitionReassignments,
        0,
        &ListPartitionReassignmentsRequest::default().with_topics(None),
    );
    let ids = |v: &[BrokerId]| v.iter().map(|b| b.0).collect::<Vec<_>>();
    answer
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| {
            (
                ids(&p.replicas),
                ids(&p.adding_replicas),
                ids(&p.removing_replicas),
            )
        })
        .collect()
}

/// A reassignment whose new replica cannot catch up (its broker is stopped) stays in progress,
/// listed with what it adds and removes, and a cancel puts the original replicas back.
#[test]
fn a_reassignment_stuck_on_a_silent_broker_is_listed_and_a_cancel_reverts_it() {
    let zk = ZooKeeper::start();
    let brokers = start_cluster(&zk, &[]);
    produce_keyed(&brokers[0], "stuck", 0, 30);
    let md = metadata(&brokers[0], Some("stuck"));
    let original = replicas(&md, "stuck", 0);
    assert_eq!(original.len(), 1, "one replica by default");
    let home = original[0] as i32;
    let silent = [1, 2, 3].into_iter().find(|&b| b != home).unwrap();
    // Asked through the partition's own broker: the silent one cannot answer.
    let asker = &brokers[(home - 1) as usize];
    brokers[(silent - 1) as usize].pause();
    assert_eq!(reassign(asker, "stuck", Some(vec![silent])), 0);
    assert_eq!(
        ongoing(asker),
        [(vec![silent, home], vec![silent], vec![home])]
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        ongoing(asker).len(),
        1,
        "the silent replica cannot join the ISR"
    );
    assert_eq!(
        leaders(&metadata(asker, Some("stuck")), "stuck")[&0],
        home as i64,
        "the leader stays until the target is in sync"
    );
    assert_eq!(reassign(asker, "stuck", None), 0, "cancelled");
    assert!(ongoing(asker).is_empty());
    assert_eq!(
        reassign(asker, "stuck", None),
        85,
        "NO_REASSIGNMENT_IN_PROGRESS"
    );
    brokers[(silent - 1) as usize].resume();
    wait_until(
        Duration::from_secs(10),
        "the original replica set again",
        || {
            let md = metadata(asker, Some("stuck"));
            replicas(&md, "stuck", 0) == [home as i64] && isr(&md, "stuck", 0) == [home as i64]
        },
    );
    assert_eq!(consume_all(asker, "stuck").len(), 30);
}

/// A reassignment asked the old way, by writing `/admin/reassign_partitions` as Kafka's tools
/// did before KIP-455, is carried out by the controller, which removes the znode.
#[test]
fn a_reassignment_written_to_admin_reassign_partitions_is_carried_out() {
    let zk = ZooKeeper::start();
    let brokers = start_cluster(&zk, &[]);
    produce_keyed(&brokers[0], "asked", 0, 30);
    let home = replicas(&metadata(&brokers[0], Some("asked")), "asked", 0)[0];
    let other = [1, 2, 3].into_iter().find(|&b| b != home).unwrap();
    let request = format!(
        r#"{{"version":1,"partitions":[{{"topic":"asked","partition":0,"replicas":[{other}]}}]}}"#
    );
    let (created, out) = zk.cli(&["create", "/admin/reassign_partitions", &request]);
    assert!(created, "{out}");
    wait_until(Duration::from_secs(20), "partition 0 moved", || {
        let md = metadata(&brokers[0], Some("asked"));
        replicas(&md, "asked", 0) == [other] && isr(&md, "asked", 0) == [other]
    });
    let (_, out) = zk.cli(&["stat", "/admin/reassign_partitions"]);
    assert!(
        out.contains("does not exist"),
        "the controller removed it: {out}"
    );
    assert_eq!(consume_all(&brokers[0], "asked").len(), 30);
}

/// Client quotas altered through one broker are kept where Kafka keeps them
/// (`/config/clients/<c>`, `/config/users/<u>/clients/<c>`) and every broker describes them.
#[test]
fn client_quotas_altered_on_one_broker_are_in_zookeeper_and_on_every_broker() {
    use common::quotas::{alter, describe};
    let zk = ZooKeeper::start();
    let brokers = start_cluster(&zk, &[]);
    let limited = [("client-id", Some("zk-limited"))];
    assert_eq!(
        alter(
            &brokers[0],
            &limited,
            &[("producer_byte_rate", 2e6, false)],
            false
        ),
        0
    );
    let both = [("user", None), ("client-id", Some("app 1"))];
    assert_eq!(
        alter(
            &brokers[1],
            &both,
            &[("consumer_byte_rate", 3e6, false)],
            false
        ),
        0
    );
    wait_until(Duration::from_secs(10), "broker 3 describes both", || {
        describe(&brokers[2], &[], false).1.len() == 2
    });
    let (_, out) = zk.cli(&["get", "/config/clients/zk-limited"]);
    assert!(out.contains(r#""producer_byte_rate":"2000000""#), "{out}");
    let (_, out) = zk.cli(&["get", "/config/users/<default>/clients/app%201"]);
    assert!(out.contains(r#""consumer_byte_rate":"3000000""#), "{out}");
    // A user's znode holds its SCRAM credentials too (as Kafka writes them): a quota change
    // keeps them, and they are not quotas.
    let scram = r#"{"version":1,"config":{"SCRAM-SHA-256":"salt=c2FsdA==,stored_key=a2V5,server_key=a2V5,iterations=4096"}}"#;
    let (created, out) = zk.cli(&["create", "/config/users/carol", scram]);
    assert!(created, "{out}");
    let carol = [("user", Some("carol"))];
    assert_eq!(
        alter(
            &brokers[0],
            &carol,
            &[("request_percentage", 50.0, false)],
            false
        ),
        0
    );
    let (_, out) = zk.cli(&["get", "/config/users/carol"]);
    assert!(
        out.contains("SCRAM-SHA-256") && out.contains(r#""request_percentage":"50""#),
        "{out}"
    );
    wait_until(
        Duration::from_secs(10),
        "broker 2 describes carol's quota alone",
        || {
            let (_, entries) = describe(&brokers[1], &[("user", 0, Some("carol"))], true);
            entries.values().map(|v| v.len()).collect::<Vec<_>>() == [1]
        },
    );
}

/// AlterUserScramCredentials through one broker writes Kafka's `/config/users/<name>` and every
/// broker describes the user.
#[test]
fn scram_users_altered_on_one_broker_are_in_zookeeper_and_on_every_broker() {
    use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
    use kafka_protocol::messages::{
        AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
        DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
    };
    let zk = ZooKeeper::start();
    let brokers = start_cluster(&zk, &[]);
    let mut conn = wire::connect(&brokers[0]);
    let body = AlterUserScramCredentialsRequest::default().with_upsertions(vec![
        ScramCredentialUpsertion::default()
            .with_name(StrBytes::from_static_str("frank"))
            .with_mechanism(2)
            .with_iterations(4096)
            .with_salt(bytes::Bytes::from_static(b"salty"))
            .with_salted_password(bytes::Bytes::from_static(&[9; 64])),
    ]);
    let answer: AlterUserScramCredentialsResponse =
        wire::call(&mut conn, ApiKey::AlterUserScramCredentials, 0, &body);
    assert_eq!(answer.results[0].error_code, 0, "{answer:?}");
    let (_, znode) = zk.cli(&["get", "/config/users/frank"]);
    assert!(
        znode.contains(r#""SCRAM-SHA-512":"salt=c2FsdHk=,stored_key="#),
        "{znode}"
    );
    wait_until(Duration::from_secs(10), "broker 3 describes frank", || {
        let mut conn = wire::connect(&brokers[2]);
        let answer: DescribeUserScramCredentialsResponse = wire::call(
            &mut conn,
            ApiKey::DescribeUserScramCredentials,
            0,
            &DescribeUserScramCredentialsRequest::default().with_users(None),
        );
        answer.results.len() == 1
            && answer.results[0].user.as_str() == "frank"
            && answer.results[0].credential_infos[0].iterations == 4096
    });
}

#[test]
fn acls_created_on_one_broker_are_kafkas_znodes_and_in_force_on_every_broker() {
    use kafka_protocol::messages::create_acls_request::AclCreation;
    use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
    use kafka_protocol::messages::{
        CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
        DescribeAclsRequest, DescribeAclsResponse, MetadataRequest, MetadataResponse,
    };
    let zk = ZooKeeper::start();
    // Plaintext clients are User:ANONYMOUS. Brokers 1 and 2 make it a super user, so it may
    // change ACLs there; broker 3 does not, so a DENY for everyone is in force for it there
    // (super users pass even a DENY).
    let authorizer = [
        "--set",
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
        "--set",
        "allow.everyone.if.no.acl.found=true",
    ];
    let super_anonymous = [&authorizer[..], &["--set", "super.users=User:ANONYMOUS"]].concat();
    let brokers = [
        start_broker_on(&zk.connect_string(), 1, &super_anonymous),
        start_broker_on(&zk.connect_string(), 2, &super_anonymous),
        start_broker_on(&zk.connect_string(), 3, &authorizer),
    ];
    kcat(&brokers[0], &["-P", "-t", "guarded"], Some(b"one\n"));
    let s = |v: &str| StrBytes::from_string(v.to_string());
    let creation = |kind: i8, name: &str, pattern: i8, op: i8, permission: i8| {
        AclCreation::default()
            .with_resource_type(kind)
            .with_resource_name(s(name))
            .with_resource_pattern_type(pattern)
            .with_principal(s("User:*"))
            .with_host(s("*"))
            .with_operation(op)
            .with_permission_type(permission)
    };
    let mut conn = wire::connect(&brokers[0]);
    // Topic guarded: DENY Describe to everyone (LITERAL); group app-: ALLOW Read (PREFIXED).
    let answer: CreateAclsResponse = wire::call(
        &mut conn,
        ApiKey::CreateAcls,
        3,
        &CreateAclsRequest::default().with_creations(vec![
            creation(2, "guarded", 3, 8, 2),
            creation(3, "app-", 4, 3, 3),
        ]),
    );
    assert!(
        answer.results.iter().all(|r| r.error_code == 0),
        "{answer:?}"
    );
    let (_, literal) = zk.cli(&["get", "/kafka-acl/Topic/guarded"]);
    assert!(
        literal.contains(r#"{"version":1,"acls":[{"principal":"User:*","permissionType":"Deny","operation":"Describe","host":"*"}]}"#),
        "{literal}"
    );
    let (_, prefixed) = zk.cli(&["get", "/kafka-acl-extended/prefixed/Group/app-"]);
    assert!(prefixed.contains(r#""operation":"Read""#), "{prefixed}");
    // The change notifications, as Kafka's own brokers decode them (ZkData.scala's
    // LiteralAclChangeStore and ExtendedAclChangeStore: the type by its Java enum name).
    let (_, literal_change) = zk.cli(&["get", "/kafka-acl-changes/acl_changes_0000000000"]);
    assert!(literal_change.contains("TOPIC:guarded"), "{literal_change}");
    let (_, extended_change) =
        zk.cli(&["get", "/kafka-acl-extended-changes/acl_changes_0000000000"]);
    assert!(
        extended_change.contains(
            r#"{"version":1,"resourceType":"GROUP","name":"app-","patternType":"PREFIXED"}"#
        ),
        "{extended_change}"
    );
    // Broker 3 sees both and enforces the DENY: its Metadata leaves the topic out.
    let guarded_visible = |b: &Broker| {
        let mut conn = wire::connect(b);
        let md: MetadataResponse = wire::call(
            &mut conn,
            ApiKey::Metadata,
            12,
            &MetadataRequest::default().with_topics(None),
        );
        md.topics
            .iter()
            .any(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == "guarded"))
    };
    wait_until(Duration::from_secs(10), "broker 3 hides the topic", || {
        !guarded_visible(&brokers[2])
    });
    assert!(guarded_visible(&brokers[0]), "a super user sees everything");
    let mut conn3 = wire::connect(&brokers[1]);
    let described: DescribeAclsResponse = wire::call(
        &mut conn3,
        ApiKey::DescribeAcls,
        1,
        &DescribeAclsRequest::default()
            .with_resource_type_filter(1)
            .with_resource_name_filter(None)
            .with_pattern_type_filter(1)
            .with_principal_filter(None)
            .with_host_filter(None)
            .with_operation(1)
            .with_permission_type(1),
    );
    assert_eq!(described.resources.len(), 2, "{described:?}");
    // Deleted through broker 2: the znode goes and broker 3 shows the topic again.
    let deleted: DeleteAclsResponse = wire::call(
        &mut conn3,
        ApiKey::DeleteAcls,
        3,
        &DeleteAclsRequest::default().with_filters(vec![DeleteAclsFilter::default()
            .with_resource_type_filter(2)
            .with_resource_name_filter(Some(s("guarded")))
            .with_pattern_type_filter(3)
            .with_principal_filter(None)
            .with_host_filter(None)
            .with_operation(1)
            .with_permission_type(1)]),
    );
    assert_eq!(
        deleted.filter_results[0].matching_acls.len(),
        1,
        "{deleted:?}"
    );
    let (_, gone) = zk.cli(&["stat", "/kafka-acl/Topic/guarded"]);
    assert!(gone.contains("does not exist"), "{gone}");
    wait_until(
        Duration::from_secs(10),
        "broker 3 shows the topic again",
        || guarded_visible(&brokers[2]),
    );
    // `ferrite acl` on the ZooKeeper writes the same znodes, and the brokers apply them.
    common::tls::add_acl_to(
        &["--zookeeper", &zk.connect_string()],
        &[
            "--deny-principal",
            "User:*",
            "--operation",
            "Describe",
            "--topic",
            "guarded",
        ],
    );
    wait_until(
        Duration::from_secs(10),
        "broker 3 hides the topic again",
        || !guarded_visible(&brokers[2]),
    );
}
