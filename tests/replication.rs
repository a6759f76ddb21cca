//! Replication on three brokers and a real ZooKeeper: acks=all through a leader's death, a
//! follower paused out of the ISR and back, and a returning old leader cutting the tail nobody
//! else had. Each replica's log is then read from its files.

mod common;

use common::cluster::{
    bootstrap, isr, leaders, metadata, start_cluster, start_sasl_ssl_cluster, wait_until,
    SESSION_MS,
};
use common::tls::{add_acl_to, add_user_to};
use common::zookeeper::ZooKeeper;
use common::{kcat, kcat_consume, python, records_on_disk, Broker};
use std::time::{Duration, Instant};

/// Quick to drop a silent follower, quick to take it back, quick to restore preferred leaders.
const REPLICATION: &[&str] = &[
    "--set",
    "replica.lag.time.max.ms=2000",
    "--set",
    "leader.imbalance.check.interval.seconds=2",
    "--set",
    "group.initial.rebalance.delay.ms=300",
];

fn create_replicated(broker: &Broker, topic: &str) {
    // Auto-creation uses the broker defaults; an explicit topic needs no admin client here.
    let out = python(
        "confluent_admin_create.py",
        &[&broker.addr, topic, "1", "3", "min.insync.replicas=2"],
    );
    assert!(out.contains("created"), "{out}");
}

fn node_index(leader: i64) -> usize {
    (leader - 1) as usize
}

fn leader_of(broker: &Broker, topic: &str) -> i64 {
    leaders(&metadata(broker, Some(topic)), topic)[&0]
}

/// What `acks_all_producer.py` had acknowledged, as (offset, value); no delivery may have failed.
fn acknowledged(out: &std::path::Path) -> Vec<(i64, String)> {
    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
    assert_eq!(result["failed"].as_array().unwrap().len(), 0, "{result}");
    result["acked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a[0].as_i64().unwrap(), a[1].as_str().unwrap().to_string()))
        .collect()
}

/// Stops every broker gracefully and returns each one's records of partition 0.
fn replica_logs(brokers: &mut [Broker], topic: &str) -> Vec<Vec<(i64, String)>> {
    for b in brokers.iter_mut() {
        b.stop();
    }
    brokers
        .iter()
        .map(|b| records_on_disk(&b.data_dir, topic, 0))
        .collect()
}

#[test]
fn acks_all_survives_the_leaders_death_exactly_once_on_every_replica() {
    let zk = ZooKeeper::start();
    let brokers = start_cluster(&zk, REPLICATION);
    let bootstraps = brokers.iter().map(|b| b.addr.clone()).collect();
    survives_the_leaders_death(brokers, bootstraps, &[]);
}

/// The same with SASL_SSL everywhere and the authorizer on: the brokers replicate over SASL_SSL
/// as user `broker` (a super user: a follower that could not log in, or were refused
/// ClusterAction, would never rejoin the ISR), and the producer logs in as alice, who may
/// only Write and Describe the topic. The test's own observer (kcat over PLAINTEXT, principal
/// ANONYMOUS) may do everything on that topic and nothing else.
#[test]
fn acks_all_survives_the_leaders_death_with_sasl_ssl_and_acls_everywhere() {
    let zk = ZooKeeper::start();
    let certs = common::tls::make();
    let store = ["--zookeeper", &zk.connect_string()];
    add_user_to(&store, "alice", "SCRAM-SHA-512", "alice-secret");
    let topic = ["--topic", "durable"];
    for grant in [
        &[
            "--allow-principal",
            "User:alice",
            "--operation",
            "Write",
            "--operation",
            "Describe",
        ][..],
        &["--allow-principal", "User:ANONYMOUS", "--operation", "All"],
    ] {
        add_acl_to(&store, &[grant, &topic[..]].concat());
    }
    let secured = [
        REPLICATION,
        &[
            "--set",
            "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
            "--set",
            "super.users=User:broker",
        ],
    ]
    .concat();
    let cluster = start_sasl_ssl_cluster(&zk, &certs, &secured);
    let (_, registered) = zk.cli(&["get", "/brokers/ids/1"]);
    assert!(
        registered.contains("\"SASL_SSL\":\"SASL_SSL\""),
        "{registered}"
    );
    let login = [
        "security.protocol=SASL_SSL".to_string(),
        "sasl.mechanism=SCRAM-SHA-512".into(),
        "sasl.username=alice".into(),
        "sasl.password=alice-secret".into(),
        format!("ssl.ca.location={}", certs.ca.display()),
    ];
    let login: Vec<&str> = login.iter().map(String::as_str).collect();
    survives_the_leaders_death(cluster.brokers, cluster.sasl_ssl_addrs, &login);
}

/// acks=all through the leader's death: 4,000 values from `acks_all_producer.py` (given
/// `client_settings`, bootstrapping from `bootstraps[i]` for broker i), the leader killed
/// after 1,000, every value then exactly once, in order, on every replica.
fn survives_the_leaders_death(
    mut brokers: Vec<Broker>,
    bootstraps: Vec<String>,
    client_settings: &[&str],
) {
    create_replicated(&brokers[0], "durable");
    let old_leader = leader_of(&brokers[0], "durable");
    let dir = brokers[0].data_dir.parent().unwrap().to_path_buf();
    let progress = dir.join("progress");
    let out = dir.join("acked.json");
    let producer = {
        let mut args = vec![
            bootstraps[(node_index(old_leader) + 1) % 3].clone(),
            "durable".into(),
            "4000".into(),
            progress.to_str().unwrap().to_string(),
            out.to_str().unwrap().to_string(),
        ];
        args.extend(client_settings.iter().map(|s| s.to_string()));
        std::thread::spawn(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            python("acks_all_producer.py", &args)
        })
    };
    let acked_so_far = || {
        std::fs::read_to_string(&progress)
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .unwrap_or(0)
    };
    wait_until(Duration::from_secs(60), "1000 records acknowledged", || {
        acked_so_far() >= 1000
    });
    brokers[node_index(old_leader)].kill9();
    let killed = Instant::now();
    let survivor = (node_index(old_leader) + 1) % 3;
    wait_until(
        Duration::from_millis(SESSION_MS) + Duration::from_secs(10),
        "a new leader",
        || {
            let l = leader_of(&brokers[survivor], "durable");
            l > 0 && l != old_leader
        },
    );
    println!("new leader serving after {:?}", killed.elapsed());
    brokers[node_index(old_leader)].restart();
    let summary = producer.join().unwrap();
    println!("{summary}");
    let acked = acknowledged(&out);
    assert_eq!(acked.len(), 4000);
    wait_until(
        Duration::from_secs(30),
        "all three replicas in sync",
        || isr(&metadata(&brokers[survivor], Some("durable")), "durable", 0) == [1, 2, 3],
    );
    let logs = replica_logs(&mut brokers, "durable");
    for (i, log) in logs.iter().enumerate() {
        // Exactly once and in order: every value once, offsets ascending with the values.
        let values: Vec<&str> = log.iter().map(|(_, v)| v.as_str()).collect();
        let want: Vec<String> = (0..4000).map(|i| format!("m-{i}")).collect();
        assert_eq!(values, want, "broker {}: every value once, in order", i + 1);
        for (o, v) in &acked {
            assert!(
                log.contains(&(*o, v.clone())),
                "broker {}: acked {v} at {o}",
                i + 1
            );
        }
    }
    println!(
        "checked {} acknowledged records on each of 3 replicas",
        acked.len()
    );
}

#[test]
fn a_paused_follower_leaves_the_isr_and_rejoins_after_catching_up() {
    let zk = ZooKeeper::start();
    let mut brokers = start_cluster(&zk, REPLICATION);
    create_replicated(&brokers[0], "paused");
    let leader = leader_of(&brokers[0], "paused");
    let follower = (node_index(leader) + 1) % 3;
    let lines: String = (0..200).map(|i| format!("before-{i}\n")).collect();
    kcat(
        &brokers[0],
        &["-P", "-t", "paused", "-X", "acks=all"],
        Some(lines.as_bytes()),
    );
    brokers[follower].pause();
    let f_id = follower as i64 + 1;
    wait_until(
        Duration::from_secs(10),
        "the paused follower leaves the ISR",
        || {
            !isr(
                &metadata(&brokers[node_index(leader)], Some("paused")),
                "paused",
                0,
            )
            .contains(&f_id)
        },
    );
    // Two in-sync replicas meet min.insync.replicas=2: acks=all goes on.
    let lines: String = (0..200).map(|i| format!("during-{i}\n")).collect();
    kcat(
        &brokers[node_index(leader)],
        &["-P", "-t", "paused", "-X", "acks=all"],
        Some(lines.as_bytes()),
    );
    brokers[follower].resume();
    wait_until(
        Duration::from_secs(20),
        "the follower rejoins the ISR",
        || {
            isr(
                &metadata(&brokers[node_index(leader)], Some("paused")),
                "paused",
                0,
            ) == [1, 2, 3]
        },
    );
    let got = kcat_consume(&brokers[node_index(leader)], "paused", "%s\n");
    let dup = got.iter().filter(|v| v.starts_with("before-")).count();
    assert_eq!(got.len(), 400, "before: {dup}, during: {}", got.len() - dup);
    let logs = replica_logs(&mut brokers, "paused");
    assert!(
        logs.iter().all(|l| l.len() == 400 && *l == logs[0]),
        "identical replicas"
    );
}

#[test]
fn a_returning_old_leader_cuts_the_tail_nobody_else_had() {
    let zk = ZooKeeper::start();
    // Followers stay in the ISR through the short pause below.
    let mut brokers = start_cluster(&zk, &["--set", "replica.lag.time.max.ms=5000"]);
    create_replicated(&brokers[0], "diverged");
    let old = leader_of(&brokers[0], "diverged");
    let l = node_index(old);
    let lines: String = (0..100).map(|i| format!("committed-{i}\n")).collect();
    kcat(
        &brokers[l],
        &["-P", "-t", "diverged", "-X", "acks=all"],
        Some(lines.as_bytes()),
    );
    // The followers stop fetching; the leader takes records only it has (acks=1).
    for f in (0..3).filter(|&i| i != l) {
        brokers[f].pause();
    }
    // A fetch already on its way would still bring the followers what comes next: wait until
    // the leader has answered it (it holds a fetch at most 500 ms).
    std::thread::sleep(Duration::from_millis(1000));
    let tail: String = (0..50).map(|i| format!("unreplicated-{i}\n")).collect();
    kcat(
        &brokers[l],
        &["-P", "-t", "diverged", "-X", "acks=1"],
        Some(tail.as_bytes()),
    );
    // A consumer never sees what is not committed.
    let seen = kcat_consume(&brokers[l], "diverged", "%s\n");
    assert!(seen.iter().all(|v| v.starts_with("committed-")), "{seen:?}");
    brokers[l].kill9();
    for f in (0..3).filter(|&i| i != l) {
        brokers[f].resume();
    }
    let survivor = (l + 1) % 3;
    wait_until(
        Duration::from_millis(SESSION_MS) + Duration::from_secs(10),
        "a follower takes over",
        || {
            let now = leader_of(&brokers[survivor], "diverged");
            now > 0 && now != old
        },
    );
    let lines: String = (0..30).map(|i| format!("new-leader-{i}\n")).collect();
    kcat(
        &brokers[survivor],
        &["-P", "-t", "diverged", "-X", "acks=all"],
        Some(lines.as_bytes()),
    );
    brokers[l].restart();
    wait_until(
        Duration::from_secs(30),
        "the old leader back in the ISR",
        || {
            isr(
                &metadata(&brokers[survivor], Some("diverged")),
                "diverged",
                0,
            ) == [1, 2, 3]
        },
    );
    let log = brokers[l].log();
    assert!(log.contains("diverged tail"), "{log}");
    let logs = replica_logs(&mut brokers, "diverged");
    for (i, log) in logs.iter().enumerate() {
        assert_eq!(log.len(), 130, "broker {}: {log:?}", i + 1);
        assert!(
            log.iter().all(|(_, v)| !v.starts_with("unreplicated-")),
            "broker {}",
            i + 1
        );
        assert_eq!(*log, logs[0], "replicas identical");
    }
}

/// Kills, pauses and restarts under produce and consume load; then every acknowledged record
/// must be on every replica exactly once, in order, and nothing a consumer saw may be missing.
#[test]
fn random_faults_under_load_lose_nothing_acknowledged_or_seen() {
    let zk = ZooKeeper::start();
    let mut brokers = start_cluster(&zk, REPLICATION);
    create_replicated(&brokers[0], "chaos");
    let dir = brokers[0].data_dir.parent().unwrap().to_path_buf();
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let (progress, acked_out, stop, seen_out) = (
        path("progress"),
        path("acked.json"),
        path("stop"),
        path("seen.json"),
    );
    let bootstrap = bootstrap(&brokers);
    let producer = {
        let (b, p, o) = (bootstrap.clone(), progress.clone(), acked_out.clone());
        // About 25 s of load: the faults below land while it runs.
        std::thread::spawn(move || {
            python("acks_all_producer.py", &[&b, "chaos", "6000", &p, &o, "80"])
        })
    };
    let consumer = {
        let (b, s, o) = (bootstrap.clone(), stop.clone(), seen_out.clone());
        std::thread::spawn(move || python("watching_consumer.py", &[&b, "chaos", &s, &o]))
    };
    // A fixed seed: a failure replays the same faults.
    let mut seed: u64 = 0x5eed_f00d;
    let mut next = |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    let mut faults = Vec::new();
    for _ in 0..6 {
        let victim = next(3) as usize;
        if next(2) == 0 {
            brokers[victim].kill9();
            std::thread::sleep(Duration::from_millis(1500));
            brokers[victim].restart();
            faults.push(format!("kill -9 broker {}", victim + 1));
        } else {
            brokers[victim].pause();
            std::thread::sleep(Duration::from_millis(2500));
            brokers[victim].resume();
            faults.push(format!("pause broker {}", victim + 1));
        }
        // Back to three in-sync replicas before the next fault: one fault at a time.
        wait_until(Duration::from_secs(60), "the ISR whole again", || {
            brokers
                .iter()
                .any(|b| isr(&metadata(b, Some("chaos")), "chaos", 0) == [1, 2, 3])
        });
    }
    let during = std::fs::read_to_string(&progress).unwrap_or_default();
    println!(
        "faults: {faults:?}; {} acknowledged when they ended",
        during.trim()
    );
    println!("{}", producer.join().unwrap());
    std::fs::write(&stop, b"").unwrap();
    println!("{}", consumer.join().unwrap());
    let acked = acknowledged(std::path::Path::new(&acked_out));
    let seen: Vec<(i64, String)> =
        serde_json::from_str::<Vec<(i64, String)>>(&std::fs::read_to_string(&seen_out).unwrap())
            .unwrap();
    wait_until(
        Duration::from_secs(30),
        "all three replicas in sync",
        || {
            brokers
                .iter()
                .any(|b| isr(&metadata(b, Some("chaos")), "chaos", 0) == [1, 2, 3])
        },
    );
    let logs = replica_logs(&mut brokers, "chaos");
    let want: Vec<String> = (0..6000).map(|i| format!("m-{i}")).collect();
    for (i, log) in logs.iter().enumerate() {
        let values: Vec<&str> = log.iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(values, want, "broker {}: every value once, in order", i + 1);
        let on_disk: std::collections::HashSet<&(i64, String)> = log.iter().collect();
        for r in acked.iter().chain(seen.iter()) {
            assert!(
                on_disk.contains(r),
                "broker {}: {r:?} acknowledged or seen, then lost",
                i + 1
            );
        }
    }
    println!(
        "checked {} acknowledged and {} consumed records on each of 3 replicas",
        acked.len(),
        seen.len()
    );
}

/// The node that coordinates `group` now, by FindCoordinator.
fn coordinator(broker: &Broker, group: &str) -> i32 {
    use kafka_protocol::messages::{ApiKey, FindCoordinatorRequest, FindCoordinatorResponse};
    use kafka_protocol::protocol::StrBytes;
    let mut s = common::wire::connect(broker);
    let req = FindCoordinatorRequest::default()
        .with_key(StrBytes::from_string(group.to_string()))
        .with_key_type(0);
    let resp: FindCoordinatorResponse =
        common::wire::call(&mut s, ApiKey::FindCoordinator, 2, &req);
    if resp.error_code != 0 {
        return -1;
    }
    resp.node_id.0
}

/// Committed offsets live in the replicated `__consumer_offsets`: when the coordinator's broker
/// dies, the group's new coordinator (the new leader of its partition) has them.
#[test]
fn a_groups_commits_survive_its_coordinators_death() {
    let zk = ZooKeeper::start();
    let mut brokers = start_cluster(&zk, REPLICATION);
    create_replicated(&brokers[0], "grouped");
    let lines = common::numbered_lines;
    let consume = |via: &Broker, count: usize| -> Vec<String> {
        common::kcat_group_consume(via, "failover-group", "grouped", count)
    };
    let want =
        |from: usize, to: usize| -> Vec<String> { (from..to).map(|i| format!("m{i}")).collect() };
    kcat(
        &brokers[0],
        &["-P", "-t", "grouped", "-X", "acks=all"],
        Some(&lines(0, 30)),
    );
    assert_eq!(consume(&brokers[0], 30), want(0, 30));
    let old = coordinator(&brokers[0], "failover-group");
    assert!(old > 0);
    brokers[node_index(old as i64)].kill9();
    let survivor = node_index(old as i64 + 1) % 3;
    wait_until(
        Duration::from_millis(SESSION_MS) + Duration::from_secs(10),
        "another coordinator",
        || {
            let c = coordinator(&brokers[survivor], "failover-group");
            c > 0 && c != old
        },
    );
    kcat(
        &brokers[survivor],
        &["-P", "-t", "grouped", "-X", "acks=all"],
        Some(&lines(30, 40)),
    );
    assert_eq!(
        consume(&brokers[survivor], 10),
        want(30, 40),
        "the new coordinator resumes the group after its commits"
    );
}

/// acks=all sent straight to `broker` for partition 0 of `topic`: the partition's error code.
fn produce_acks_all(broker: &Broker, topic: &str, value: &str) -> i16 {
    use bytes::Bytes;
    use ferrite_shards::batch::build::{build_batch, NewRecord, ProducerFields};
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let batch = build_batch(
        &[NewRecord {
            value: Some(Bytes::from(value.to_string())),
            timestamp_ms: 1,
            ..Default::default()
        }],
        ProducerFields::NONE,
    );
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(1000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(batch))])]);
    let mut s = common::wire::connect(broker);
    let resp: ProduceResponse = common::wire::call(&mut s, ApiKey::Produce, 7, &req);
    resp.responses[0].partition_responses[0].error_code
}

/// A leader paused past its session timeout is replaced; when it runs again it acknowledges
/// no acks=all write (it is fenced, then a follower), and it rejoins as a follower.
#[test]
fn a_leader_whose_session_expired_acknowledges_nothing() {
    // Over SASL_SSL between brokers: the fenced leader's followers log in again to whoever
    // leads now.
    let zk = ZooKeeper::start();
    let certs = common::tls::make();
    let mut brokers = start_sasl_ssl_cluster(
        &zk,
        &certs,
        &[
            "--set",
            "replica.lag.time.max.ms=2000",
            "--set",
            "auto.leader.rebalance.enable=false",
        ],
    )
    .brokers;
    create_replicated(&brokers[0], "zombie");
    let lines: String = (0..50).map(|i| format!("before-{i}\n")).collect();
    kcat(
        &brokers[0],
        &["-P", "-t", "zombie", "-X", "acks=all"],
        Some(lines.as_bytes()),
    );
    let old = leader_of(&brokers[0], "zombie");
    let l = node_index(old);
    let survivor = (l + 1) % 3;
    brokers[l].pause();
    wait_until(
        Duration::from_millis(SESSION_MS) + Duration::from_secs(10),
        "another leader",
        || {
            let now = leader_of(&brokers[survivor], "zombie");
            now > 0 && now != old
        },
    );
    brokers[l].resume();
    let until = Instant::now() + Duration::from_secs(2);
    let mut refused = 0;
    while Instant::now() < until {
        let code = produce_acks_all(&brokers[l], "zombie", "zombie-write");
        assert_ne!(code, 0, "the old leader acknowledged an acks=all write");
        refused += 1;
    }
    println!("{refused} acks=all writes to the old leader refused");
    wait_until(
        Duration::from_secs(30),
        "the old leader back in the ISR",
        || isr(&metadata(&brokers[survivor], Some("zombie")), "zombie", 0) == [1, 2, 3],
    );
    let logs = replica_logs(&mut brokers, "zombie");
    for (i, log) in logs.iter().enumerate() {
        assert_eq!(log.len(), 50, "broker {}: {log:?}", i + 1);
        assert!(
            log.iter().all(|(_, v)| v.starts_with("before-")),
            "broker {}",
            i + 1
        );
    }
}

#[test]
fn delete_records_on_the_leader_moves_every_replicas_log_start() {
    use kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsTopic,
    };
    use kafka_protocol::messages::{ApiKey, DeleteRecordsRequest, DeleteRecordsResponse};
    let zk = ZooKeeper::start();
    let mut brokers = start_cluster(&zk, REPLICATION);
    create_replicated(&brokers[0], "trimmed");
    let leader = leader_of(&brokers[0], "trimmed");
    let lines: String = (0..40).map(|i| format!("r{i}\n")).collect();
    kcat(
        &brokers[node_index(leader)],
        &["-P", "-t", "trimmed", "-p", "0", "-X", "acks=all"],
        Some(lines.as_bytes()),
    );
    let mut conn = common::wire::connect(&brokers[node_index(leader)]);
    let body = DeleteRecordsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(kafka_protocol::messages::TopicName("trimmed".into()))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(0)
                .with_offset(25)])]);
    let answer: DeleteRecordsResponse =
        common::wire::call(&mut conn, ApiKey::DeleteRecords, 2, &body);
    let p = &answer.topics[0].partitions[0];
    assert_eq!((p.error_code, p.low_watermark), (0, 25));
    // A follower asked is not the leader.
    let follower = (node_index(leader) + 1) % 3;
    let mut other = common::wire::connect(&brokers[follower]);
    let refused: DeleteRecordsResponse =
        common::wire::call(&mut other, ApiKey::DeleteRecords, 2, &body);
    assert_eq!(
        refused.topics[0].partitions[0].error_code, 6,
        "NOT_LEADER_OR_FOLLOWER"
    );
    // The answer came once every in-sync replica had moved its log start (Kafka's
    // DelayedDeleteRecords), so each has it stored already.
    for b in &brokers {
        let file = b.data_dir.join("trimmed-0/log-start-offset");
        let stored = std::fs::read_to_string(&file).unwrap_or_default();
        assert_eq!(stored.lines().nth(1), Some("25"), "{}", file.display());
    }
    // So a new leader serves from 25 as well.
    brokers[node_index(leader)].kill9();
    wait_until(
        Duration::from_millis(SESSION_MS) + Duration::from_secs(10),
        "a new leader",
        || {
            let l = leader_of(&brokers[follower], "trimmed");
            l > 0 && l != leader
        },
    );
    let offsets = kcat_consume(&brokers[follower], "trimmed", "%o\n");
    let want: Vec<String> = (25..40).map(|o| o.to_string()).collect();
    assert_eq!(offsets, want);
}

#[test]
fn elect_leaders_moves_leadership_back_to_the_preferred_replica() {
    let zk = ZooKeeper::start();
    let mut settings = REPLICATION.to_vec();
    settings.extend(["--set", "auto.leader.rebalance.enable=false"]);
    let mut brokers = start_cluster(&zk, &settings);
    create_replicated(&brokers[0], "elected");
    let preferred = leader_of(&brokers[0], "elected");
    brokers[node_index(preferred)].kill9();
    let other = (node_index(preferred) + 1) % 3;
    wait_until(
        Duration::from_millis(SESSION_MS) + Duration::from_secs(10),
        "a new leader",
        || {
            let l = leader_of(&brokers[other], "elected");
            l > 0 && l != preferred
        },
    );
    brokers[node_index(preferred)].restart();
    wait_until(
        Duration::from_secs(30),
        "the preferred replica back in sync",
        || isr(&metadata(&brokers[other], Some("elected")), "elected", 0).len() == 3,
    );
    assert_ne!(
        leader_of(&brokers[other], "elected"),
        preferred,
        "no automatic rebalance"
    );
    // Asked through a broker that is neither the leader nor, necessarily, the controller.
    let out = python(
        "confluent_elect_leaders.py",
        &[&brokers[other].addr, "elected"],
    );
    assert!(out.contains("elected"), "{out}");
    wait_until(
        Duration::from_secs(10),
        "every broker sees the preferred leader",
        || brokers.iter().all(|b| leader_of(b, "elected") == preferred),
    );
    let out = python(
        "confluent_elect_leaders.py",
        &[&brokers[other].addr, "elected"],
    );
    assert!(out.contains("ELECTION_NOT_NEEDED"), "{out}");
    // Produce and read through the restored leader.
    kcat(
        &brokers[other],
        &["-P", "-t", "elected", "-X", "acks=all"],
        Some(b"after\n"),
    );
    assert_eq!(
        kcat_consume(&brokers[other], "elected", "%s\n"),
        vec!["after"]
    );
}

/// AlterPartitionReassignments through kafka-python moves a partition from two brokers to the
/// third and one of the two while acks=all records arrive: every acknowledged record is read
/// back (the script checks), both target replicas hold the partition on disk, and the broker
/// that left deletes its copy.
#[test]
fn a_reassignment_under_acks_all_load_moves_the_partition_and_loses_nothing() {
    // Over SASL_SSL between brokers: the newcomer copies the partition as user `broker`.
    let zk = ZooKeeper::start();
    let certs = common::tls::make();
    let brokers = start_sasl_ssl_cluster(&zk, &certs, REPLICATION).brokers;
    let out = python("kafka_python_reassign.py", &[&brokers[0].addr]);
    let line = out.lines().rev().find(|l| l.starts_with('{')).expect(&out);
    println!("{line}");
    let moved: serde_json::Value = serde_json::from_str(line).unwrap();
    let ids = |key: &str| -> Vec<i64> {
        moved[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect()
    };
    let (original, target) = (ids("original"), ids("target"));
    let left = original
        .iter()
        .find(|b| !target.contains(b))
        .copied()
        .unwrap();
    wait_until(
        Duration::from_secs(10),
        "the broker that left deletes its copy",
        || !brokers[node_index(left)].data_dir.join("moving-0").exists(),
    );
    for &b in &target {
        let dir = brokers[node_index(b)].data_dir.join("moving-0");
        assert!(dir.exists(), "broker {b} holds the partition: {out}");
    }
    assert!(brokers[node_index(left)].log().contains("partition closed"));
}
