//! Sarama 1.22.1 (Debian's golang-github-shopify-sarama-dev), Go's most used Kafka client,
//! against the real broker: at the newest protocol setting it knows (V2_2_0_0) and at the
//! oldest setting at which each step is possible. The client is tests/clients/sarama/main.go;
//! the constants below say which request versions each setting makes Sarama send (read from
//! its source). Every expectation is what Kafka 3.9 answers those requests with.

mod common;

use common::go::{self, Background};
use common::{kcat, Broker};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitStatus;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// V2_2_0_0, the highest Sarama 1.22 knows: Metadata v5, Produce v3 (record batches v2),
/// Fetch v4, ListOffsets v1, FindCoordinator v0, JoinGroup v1, SyncGroup, Heartbeat and
/// LeaveGroup v0, OffsetFetch v1, OffsetCommit v1 (v2 when Consumer.Offsets.Retention is
/// set), CreateTopics v2, DeleteTopics v1, CreatePartitions v0, DescribeConfigs v0,
/// ListGroups v0, DescribeGroups v0, DeleteGroups v0; DescribeTopics Metadata v5, ListTopics
/// Metadata v0.
const NEWEST: &str = "2.2.0";
/// V0_8_2_0, Sarama's MinVersion: Metadata v0, Produce v0 (message sets, magic 0), Fetch v0,
/// ListOffsets v0. No lz4, no consumer groups, no ClusterAdmin.
const OLDEST: &str = "0.8.2.0";
/// V0_10_0_0, the oldest that allows lz4: Metadata v1, Produce v2 (message sets, magic 1,
/// with timestamps and relative offsets in compressed sets), Fetch v2, ListOffsets v0.
const OLDEST_LZ4: &str = "0.10.0.0";
/// V0_10_2_0, the oldest sarama.ConsumerGroup accepts: Metadata v1, Fetch v3, ListOffsets v1,
/// FindCoordinator v0, JoinGroup v1, SyncGroup/Heartbeat/LeaveGroup v0, OffsetFetch v1,
/// OffsetCommit v1.
const OLDEST_GROUPS: &str = "0.10.2.0";
/// V0_10_0_0, the oldest ClusterAdmin accepts (it asks for the controller): DescribeTopics
/// (Metadata v0), ListConsumerGroups (ListGroups v0), DescribeConsumerGroups (FindCoordinator
/// v0, DescribeGroups v0), ListConsumerGroupOffsets (OffsetFetch v1).
const OLDEST_ADMIN: &str = "0.10.0.0";
/// V0_10_1_0: CreateTopics v0 (which has no validate-only field) and DeleteTopics v0.
const OLDEST_CREATE_TOPICS: &str = "0.10.1.0";
/// V0_11_0_0: CreateTopics v1 (validate-only), and DescribeConfigs v0 for ListTopics and
/// DescribeConfig.
const OLDEST_CONFIGS: &str = "0.11.0.0";
/// V1_0_0_0: CreatePartitions v0.
const OLDEST_CREATE_PARTITIONS: &str = "1.0.0";
/// V1_1_0_0: DeleteGroups v0 (Broker.DeleteGroups: 1.22's ClusterAdmin does not wrap it).
const OLDEST_DELETE_GROUPS: &str = "1.1.0";

/// Kafka error codes the tests expect.
const UNKNOWN_TOPIC_OR_PARTITION: i64 = 3;
const TOPIC_ALREADY_EXISTS: i64 = 36;
const UNSUPPORTED_COMPRESSION_TYPE: i64 = 76;

/// Above the client's own 20 s bound, so its message ("timed out after ...") is what shows.
const RUN_TIMEOUT: Duration = Duration::from_secs(30);
const WAIT: Duration = Duration::from_secs(20);
/// How long a consumer keeps reading after it has what it waited for: duplicates show up.
const LINGER: Duration = Duration::from_millis(500);

const GROUP_SETTINGS: &[&str] = &["--set", "group.initial.rebalance.delay.ms=300"];

// ---------------------------------------------------------------------------------------------
// Produce with every codec, read back with kcat and with Sarama.

#[test]
fn sarama_newest_produces_every_codec_and_reads_it_back() {
    produce_and_read_back(NEWEST, &["none", "gzip", "snappy", "lz4"], true);
}

#[test]
fn sarama_oldest_produces_message_sets_v0_and_reads_them_back() {
    produce_and_read_back(OLDEST, &["none", "gzip", "snappy"], false);
}

#[test]
fn sarama_0_10_0_produces_message_sets_v1_with_lz4_and_reads_them_back() {
    produce_and_read_back(OLDEST_LZ4, &["none", "gzip", "snappy", "lz4"], true);
}

/// Sarama 1.22 puts zstd batches in Produce v3 at every setting (it never sends v7, the first
/// version allowed zstd); Kafka 3.9 answers each partition UNSUPPORTED_COMPRESSION_TYPE
/// (ProduceRequest.validateRecords) and stores nothing.
#[test]
fn sarama_newest_zstd_produce_is_refused_as_kafka_refuses_it() {
    let broker = Broker::start(&["--set", "num.partitions=3"]);
    let sarama = Sarama::at(&broker, NEWEST);
    let msgs = messages("zstd", 10);
    let ran = sarama.run(
        &produce_args("codec-zstd", "zstd", None),
        Some(stdin_of(&msgs)),
    );
    assert!(
        !ran.status.success(),
        "zstd over Produce v3 was accepted\n{ran}"
    );
    assert_eq!(
        ran.lines.len(),
        msgs.len(),
        "one outcome per message\n{ran}"
    );
    for line in &ran.lines {
        assert_eq!(
            line["code"].as_i64(),
            Some(UNSUPPORTED_COMPRESSION_TYPE),
            "each message refused as Kafka refuses zstd below Produce v7\n{ran}"
        );
    }
    assert_eq!(
        kcat_records(&broker, "codec-zstd"),
        vec![],
        "nothing stored"
    );
}

/// Zstd batches written by a client that may (kcat, Produce v7+) reach Sarama over Fetch v4:
/// Kafka 3.9 refuses that only when the topic's compression.type is zstd, not for the
/// default compression.type=producer.
#[test]
fn sarama_newest_reads_zstd_batches_written_by_kcat() {
    let broker = Broker::start(&[]);
    let msgs = messages("zstd", 20);
    let args = ["-P", "-t", "zstd", "-p", "0", "-K", "\t", "-z", "zstd"];
    kcat(&broker, &args, Some(&stdin_of(&msgs)));
    let written = kcat_records(&broker, "zstd");
    assert_eq!(written.len(), msgs.len(), "kcat wrote every message");
    let consumed = Sarama::at(&broker, NEWEST).consume("zstd", None, "oldest", msgs.len());
    assert_consumed("Sarama reading zstd", &records(&consumed), &written);
}

/// Produces keyed, empty-keyed and keyless messages with each codec into a fresh topic, then
/// reads each topic back with kcat and with Sarama's consumer at the same setting: every
/// message once, each partition in produce order, keys kept (and timestamps, from 0.10 on).
fn produce_and_read_back(version: &'static str, codecs: &[&str], timestamps: bool) {
    let broker = Broker::start(&["--set", "num.partitions=3"]);
    let sarama = Sarama::at(&broker, version);
    let base = timestamps.then(|| now_ms() - 60_000);
    for codec in codecs {
        let topic = format!("codec-{codec}");
        let msgs = messages(codec, 30);
        let produced = sarama.produce(&topic, codec, &msgs, base);
        check_produced(&produced, &msgs, codec);
        let what = format!("kcat reading what Sarama {version} wrote with {codec}");
        assert_consumed(&what, &kcat_records(&broker, &topic), &produced);
        let consumed = sarama.consume(&topic, None, "oldest", msgs.len());
        let what = format!("Sarama {version} reading what it wrote with {codec}");
        assert_consumed(&what, &records(&consumed), &produced);
        if let Some(base) = base {
            assert_timestamps(&what, &consumed, &msgs, base);
        }
    }
}

/// Each produced message acknowledged with the key and value it was sent with, and each
/// partition's offsets 0, 1, 2, ... in the order the messages were sent (a fresh topic).
fn check_produced(produced: &[Record], msgs: &[Msg], codec: &str) {
    let sent: Vec<(Option<&str>, &str)> = msgs
        .iter()
        .map(|m| (m.key.as_deref(), m.value.as_str()))
        .collect();
    let acked: Vec<(Option<&str>, &str)> = produced
        .iter()
        .map(|r| (r.key.as_deref(), r.value.as_str()))
        .collect();
    assert_eq!(acked, sent, "{codec}: every message acknowledged, in order");
    for (partition, offsets) in offsets_by_partition(produced) {
        let expected: Vec<i64> = (0..offsets.len() as i64).collect();
        assert_eq!(
            offsets, expected,
            "{codec}: partition {partition} offsets in send order"
        );
    }
}

fn assert_timestamps(what: &str, consumed: &[Value], msgs: &[Msg], base: i64) {
    for m in consumed {
        let value = m["value"].as_str().unwrap();
        let index = msgs.iter().position(|s| s.value == value).unwrap() as i64;
        assert_eq!(
            m["timestamp"].as_i64(),
            Some(base + index),
            "{what}: the create time of {value} kept"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Consume one partition from the oldest offset, an offset, and the newest offset.

#[test]
fn sarama_newest_consumes_a_partition_from_oldest_an_offset_and_newest() {
    consume_positions(NEWEST);
}

#[test]
fn sarama_oldest_consumes_a_partition_from_oldest_an_offset_and_newest() {
    consume_positions(OLDEST);
}

/// Partition 1 of three holds ten records (written by kcat); Sarama reads all of them from
/// the oldest offset, the last three from offset 7, and from the newest offset only the five
/// written after it started.
fn consume_positions(version: &'static str) {
    let broker = Broker::start(&["--set", "num.partitions=3"]);
    let sarama = Sarama::at(&broker, version);
    let produce = |from: usize, to: usize| {
        let lines: String = (from..to).map(|i| format!("k{i}\tv{i}\n")).collect();
        let args = ["-P", "-t", "positions", "-p", "1", "-K", "\t"];
        kcat(&broker, &args, Some(lines.as_bytes()));
    };
    let expected = |from: usize, to: usize| -> Vec<Record> {
        (from..to)
            .map(|i| Record::new(1, i as i64, Some(&format!("k{i}")), &format!("v{i}")))
            .collect()
    };
    produce(0, 10);
    let oldest = sarama.consume("positions", Some("1"), "oldest", 10);
    assert_eq!(records(&oldest), expected(0, 10), "from the oldest offset");
    let from_7 = sarama.consume("positions", Some("1"), "7", 3);
    assert_eq!(records(&from_7), expected(7, 10), "from offset 7");

    let mut tail = sarama.spawn(&consume_args("positions", Some("1"), "newest", 5));
    go::wait_until(&mut [&mut tail], WAIT, "the consumer is ready", |l| {
        parsed(l[0]).iter().any(|v| v["event"] == "ready")
    });
    produce(10, 15);
    let tail = parsed(&expect_success(tail.finish(RUN_TIMEOUT)));
    assert_eq!(
        records(&events(&tail, "msg")),
        expected(10, 15),
        "from the newest offset: only what came after"
    );
}

// ---------------------------------------------------------------------------------------------
// Consumer groups.

#[test]
fn sarama_newest_group_of_two_splits_the_partitions() {
    group_of_two_splits_the_partitions(NEWEST, Some("1h"));
}

#[test]
fn sarama_oldest_group_of_two_splits_the_partitions() {
    group_of_two_splits_the_partitions(OLDEST_GROUPS, None);
}

#[test]
fn sarama_newest_group_member_resumes_from_committed_offsets() {
    member_resumes_from_committed_offsets(NEWEST, Some("1h"));
}

#[test]
fn sarama_oldest_group_member_resumes_from_committed_offsets() {
    member_resumes_from_committed_offsets(OLDEST_GROUPS, None);
}

/// Two sarama.ConsumerGroup members in separate processes share a four-partition topic: once
/// they hold two partitions each, 40 records are written; each member reads only its own
/// partitions, together they read every record exactly once, and after both have left the
/// group's committed offsets are at the end of every partition.
/// `retention` is Consumer.Offsets.Retention: set, Sarama commits with OffsetCommit v2.
fn group_of_two_splits_the_partitions(version: &'static str, retention: Option<&str>) {
    let broker = Broker::start(GROUP_SETTINGS);
    create_topic(&broker, "split", 4);
    let sarama = Sarama::at(&broker, version);
    let args = member_args("splitters", "split", retention, None);
    let mut first = sarama.spawn(&args);
    let mut second = sarama.spawn(&args);
    go::wait_until(
        &mut [&mut first, &mut second],
        WAIT,
        "both members hold two partitions of one generation",
        |l| split_claims(&parsed(l[0]), &parsed(l[1])).is_some(),
    );
    let claims = split_claims(&parsed(first.lines()), &parsed(second.lines())).unwrap();
    let mut all = Vec::new();
    for p in 0..4 {
        all.extend(produce_to_partition(&broker, "split", p, 10));
    }
    go::wait_until(
        &mut [&mut first, &mut second],
        WAIT,
        "40 records consumed",
        |l| events(&parsed(l[0]), "msg").len() + events(&parsed(l[1]), "msg").len() >= 40,
    );
    std::thread::sleep(LINGER);
    let first = parsed(&expect_success(first.finish(RUN_TIMEOUT)));
    let second = parsed(&expect_success(second.finish(RUN_TIMEOUT)));
    for (member, (lines, claimed)) in [(&first, &claims[0]), (&second, &claims[1])]
        .into_iter()
        .enumerate()
    {
        let read: BTreeSet<i32> = records(&events(lines, "msg"))
            .iter()
            .map(|r| r.partition)
            .collect();
        assert!(
            read.is_subset(claimed),
            "member {member} read partitions {read:?}, holding {claimed:?}"
        );
    }
    let mut together = records(&events(&first, "msg"));
    together.extend(records(&events(&second, "msg")));
    assert_consumed("the two members together", &together, &all);
    let at_the_end: BTreeMap<i32, i64> = (0..4).map(|p| (p, 10)).collect();
    assert_eq!(committed(&second), at_the_end, "committed after both left");
}

/// The two members' current claims, when both hold a share of the same generation that
/// together is the whole four-partition topic.
fn split_claims(first: &[Value], second: &[Value]) -> Option<[BTreeSet<i32>; 2]> {
    let current = |lines: &[Value]| -> Option<(i64, BTreeSet<i32>)> {
        let last = lines
            .iter()
            .rev()
            .find(|v| v["event"] == "assigned" || v["event"] == "released")?;
        if last["event"] != "assigned" {
            return None;
        }
        let claims = last["claims"].as_object()?.values().next()?;
        let partitions = claims
            .as_array()?
            .iter()
            .map(|p| p.as_i64().unwrap() as i32);
        Some((last["generation"].as_i64()?, partitions.collect()))
    };
    let (gen_a, a) = current(first)?;
    let (gen_b, b) = current(second)?;
    let whole: BTreeSet<i32> = a.union(&b).copied().collect();
    let split = gen_a == gen_b && !a.is_empty() && !b.is_empty() && a.is_disjoint(&b);
    (split && whole == (0..4).collect()).then_some([a, b])
}

/// A member reads 12 of the 30 records of a two-partition topic, commits them and exits; a
/// new member process in the same group starts on each partition exactly where the commits
/// say: it reads every remaining record and none of the first 12.
fn member_resumes_from_committed_offsets(version: &'static str, retention: Option<&str>) {
    let broker = Broker::start(GROUP_SETTINGS);
    create_topic(&broker, "resume", 2);
    let all: Vec<Record> = (0..2)
        .flat_map(|p| produce_to_partition(&broker, "resume", p, 15))
        .collect();
    let sarama = Sarama::at(&broker, version);
    let args = member_args("resumers", "resume", retention, Some(12));
    let first = sarama.ok(&args, None);
    let taken = records(&events(&first, "msg"));
    assert_eq!(taken.len(), 12, "the first member stops at its limit");
    let next = first_unread(&taken);
    for (p, offsets) in offsets_by_partition(&taken) {
        let expected: Vec<i64> = (0..offsets.len() as i64).collect();
        assert_eq!(
            offsets, expected,
            "partition {p} read from its start, in order"
        );
    }
    let expected_commits: BTreeMap<i32, i64> = (0..2)
        .map(|p| (p, next.get(&p).copied().unwrap_or(-1)))
        .collect();
    assert_eq!(
        committed(&first),
        expected_commits,
        "the first member committed what it read (-1: nothing committed)"
    );

    let mut second = sarama.spawn(&member_args("resumers", "resume", retention, None));
    go::wait_until(&mut [&mut second], WAIT, "the other 18 records", |l| {
        events(&parsed(l[0]), "msg").len() >= 18
    });
    std::thread::sleep(LINGER);
    let second = parsed(&expect_success(second.finish(RUN_TIMEOUT)));
    let resumed = records(&events(&second, "msg"));
    let remaining: Vec<Record> = all
        .iter()
        .filter(|r| r.offset >= next.get(&r.partition).copied().unwrap_or(0))
        .cloned()
        .collect();
    assert_consumed(
        "the second member: from the commits on, nothing re-read, nothing skipped",
        &resumed,
        &remaining,
    );
    let at_the_end: BTreeMap<i32, i64> = (0..2).map(|p| (p, 15)).collect();
    assert_eq!(
        committed(&second),
        at_the_end,
        "committed after the second left"
    );
}

/// Per partition, the offset after the last record read.
fn first_unread(read: &[Record]) -> BTreeMap<i32, i64> {
    let mut next = BTreeMap::new();
    for r in read {
        let n = next.entry(r.partition).or_insert(0);
        *n = (*n).max(r.offset + 1);
    }
    next
}

fn member_args(
    group: &str,
    topic: &str,
    retention: Option<&str>,
    limit: Option<usize>,
) -> Vec<String> {
    let mut args = vec!["group-member", "-group", group, "-topic", topic];
    if let Some(r) = retention {
        args.extend(["-retention", r]);
    }
    let mut args: Vec<String> = args.into_iter().map(String::from).collect();
    if let Some(n) = limit {
        args.extend(["-limit".to_string(), n.to_string()]);
    }
    args
}

/// The "committed" lines a member printed after leaving: partition → offset.
fn committed(lines: &[Value]) -> BTreeMap<i32, i64> {
    events(lines, "committed")
        .iter()
        .map(|c| {
            let p = c["partition"].as_i64().unwrap() as i32;
            (p, c["offset"].as_i64().unwrap())
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// ClusterAdmin.

#[test]
fn sarama_newest_admin_creates_describes_grows_and_deletes_topics() {
    topic_admin(&TopicAdminVersions {
        validate_only: NEWEST,
        create: NEWEST,
        describe: NEWEST,
        create_partitions: NEWEST,
        delete: NEWEST,
    });
}

#[test]
fn sarama_oldest_admin_creates_describes_grows_and_deletes_topics() {
    topic_admin(&TopicAdminVersions {
        validate_only: OLDEST_CONFIGS,
        create: OLDEST_CREATE_TOPICS,
        describe: OLDEST_ADMIN,
        create_partitions: OLDEST_CREATE_PARTITIONS,
        delete: OLDEST_CREATE_TOPICS,
    });
}

#[test]
fn sarama_newest_admin_lists_topics_and_describes_their_configs() {
    config_admin(NEWEST, NEWEST);
}

#[test]
fn sarama_oldest_admin_lists_topics_and_describes_their_configs() {
    config_admin(OLDEST_CREATE_TOPICS, OLDEST_CONFIGS);
}

/// ClusterAdmin.DeleteRecords (DeleteRecords v0, at any setting from V0_11_0_0): the log start
/// moves, and a consumer from the beginning starts there.
/// ClusterAdmin.DescribeCluster: Sarama 1.22 first finds the controller (Metadata v1+, which
/// names it), then asks it for Metadata v0, which has no controller field, so it reports -1
/// whatever the broker; the brokers and their addresses are what it describes.
#[test]
fn sarama_newest_admin_describes_the_cluster() {
    let broker = Broker::start(&[]);
    let sarama = Sarama::at(&broker, NEWEST);
    let described = sarama
        .admin("describe-cluster", &[])
        .expect("describe cluster");
    assert_eq!(
        described,
        vec![json!({"broker": 0, "addr": broker.addr, "controller": -1})]
    );
}

#[test]
fn sarama_newest_admin_deletes_records() {
    let broker = Broker::start(&["--set", "num.partitions=2"]);
    let lines: String = (0..30).map(|i| format!("r{i}\n")).collect();
    kcat(
        &broker,
        &["-P", "-t", "trimmed", "-p", "0"],
        Some(lines.as_bytes()),
    );
    let sarama = Sarama::at(&broker, NEWEST);
    let done = sarama.admin(
        "delete-records",
        &["-topic", "trimmed", "-partition-ids", "0=12,1=-1"],
    );
    assert_eq!(done, Ok(vec![json!({"deleted": "trimmed"})]));
    let read = kcat(
        &broker,
        &[
            "-C",
            "-t",
            "trimmed",
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%o\n",
        ],
        None,
    );
    let first = String::from_utf8_lossy(&read)
        .lines()
        .next()
        .map(str::to_string);
    assert_eq!(first.as_deref(), Some("12"));
}

/// ClusterAdmin.AlterConfig (AlterConfigs v0): the topic's whole config set is replaced, as
/// DescribeConfig then reports. (Sarama 1.22 turns a refusal into a plain error without its
/// code, so refusals are checked with the other clients.)
#[test]
fn sarama_newest_admin_alters_a_topics_configs() {
    let broker = Broker::start(&[]);
    kcat(&broker, &["-L", "-t", "altered"], None);
    let sarama = Sarama::at(&broker, NEWEST);
    let done = sarama.admin(
        "alter-config",
        &["-topic", "altered", "-config", "retention.ms=7200000"],
    );
    assert_eq!(done, Ok(vec![json!({"altered": "altered"})]));
    let entries = sarama
        .admin("describe-config", &["-topic", "altered"])
        .expect("describe config");
    let retention = entries
        .iter()
        .find(|e| e["name"] == "retention.ms")
        .unwrap();
    assert_eq!(retention["value"], "7200000");
    assert_eq!(retention["default"], false);
}

/// Dynamic broker configs: this broker's own through confluent-kafka, the cluster default
/// (resource name "", which confluent-kafka and kafka-python cannot name) through Sarama's
/// AlterConfig, which sends it to the controller. Each phase of the Python script checks the
/// values, their sources and their effect; the last phase runs again after a restart.
#[test]
fn broker_configs_altered_per_broker_and_at_the_cluster_default_are_in_force_and_kept() {
    let mut broker = Broker::start(&["--set", "log.retention.check.interval.ms=500"]);
    let script = "confluent_broker_configs.py";
    let out = common::python(script, &[&broker.addr, "per-broker"]);
    assert!(out.contains("per-broker ok"), "{out}");
    let sarama = Sarama::at(&broker, NEWEST);
    let set_default = |configs: &[&str]| {
        let mut args = vec!["-broker", ""];
        for c in configs {
            args.extend(["-config", c]);
        }
        sarama.admin("alter-broker-config", &args)
    };
    assert_eq!(
        set_default(&["message.max.bytes=3000000", "log.retention.ms=1000"]),
        Ok(vec![json!({"altered": ""})])
    );
    let described: BTreeMap<String, Value> = sarama
        .admin("describe-broker-config", &["-broker", ""])
        .expect("describe the cluster default")
        .into_iter()
        .map(|e| (e["name"].as_str().unwrap().to_string(), e["value"].clone()))
        .collect();
    assert_eq!(
        described,
        BTreeMap::from([
            ("log.retention.ms".to_string(), json!("1000")),
            ("message.max.bytes".to_string(), json!("3000000")),
        ]),
        "the cluster default describes only its own settings"
    );
    let out = common::python(script, &[&broker.addr, "cluster-default"]);
    assert!(out.contains("cluster default ok"), "{out}");
    // AlterConfigs replaces the whole set: message.max.bytes leaves the default.
    assert!(set_default(&["log.retention.ms=86400000"]).is_ok());
    let out = common::python(script, &[&broker.addr, "replaced"]);
    assert!(out.contains("replaced ok"), "{out}");
    assert!(broker.stop().success());
    broker.restart();
    let out = common::python(script, &[&broker.addr, "replaced"]);
    assert!(out.contains("replaced ok"), "kept across a restart: {out}");
}

#[test]
fn sarama_newest_admin_lists_describes_and_deletes_consumer_groups() {
    group_admin(NEWEST, NEWEST);
}

#[test]
fn sarama_oldest_admin_lists_describes_and_deletes_consumer_groups() {
    group_admin(OLDEST_ADMIN, OLDEST_DELETE_GROUPS);
}

/// The setting each topic step runs at.
struct TopicAdminVersions {
    validate_only: &'static str,
    create: &'static str,
    describe: &'static str,
    create_partitions: &'static str,
    delete: &'static str,
}

/// Validate-only creation creates nothing; creation makes three partitions with a leader
/// each, a second creation is TOPIC_ALREADY_EXISTS, growth makes five, deletion leaves an
/// unknown topic. Auto-creation is off, so that describing a missing topic (Metadata v0
/// included) does not create it.
fn topic_admin(v: &TopicAdminVersions) {
    let broker = Broker::start(&["--set", "auto.create.topics.enable=false"]);
    let at = |version: &'static str| Sarama::at(&broker, version);
    let describe = || describe_topic(&at(v.describe), "grown");
    let create = |version: &'static str, validate: bool| {
        let mut args = vec!["-topic", "grown", "-partitions", "3"];
        args.extend(["-config", "retention.ms=3600000"]);
        if validate {
            args.push("-validate-only");
        }
        at(version).admin("create-topic", &args)
    };

    create(v.validate_only, true).expect("validate-only creation");
    assert_eq!(
        describe()["error"],
        UNKNOWN_TOPIC_OR_PARTITION,
        "validate-only"
    );

    create(v.create, false).expect("creation");
    assert_partitions(&describe(), 3);
    let again = create(v.create, false).expect_err("a second creation");
    assert_eq!(again, TOPIC_ALREADY_EXISTS, "a second creation");

    // No validate-only growth: 1.22's ClusterAdmin.CreatePartitions drops its validateOnly
    // argument (the request always says false), so it would grow the topic on any broker.
    at(v.create_partitions)
        .admin(
            "create-partitions",
            &["-topic", "grown", "-partitions", "5"],
        )
        .expect("growth");
    assert_partitions(&describe(), 5);

    at(v.delete)
        .admin("delete-topic", &["-topic", "grown"])
        .expect("deletion");
    assert_eq!(describe()["error"], UNKNOWN_TOPIC_OR_PARTITION, "deleted");
}

fn describe_topic(sarama: &Sarama, topic: &str) -> Value {
    let lines = sarama
        .admin("describe-topics", &["-topic", topic])
        .expect("describe topics");
    assert_eq!(lines.len(), 1, "one topic described: {lines:?}");
    assert_eq!(lines[0]["topic"], topic);
    lines[0].clone()
}

/// Partitions 0..count, each led by a broker that is its only replica and in sync.
fn assert_partitions(topic: &Value, count: i64) {
    assert_eq!(topic["error"], 0, "{topic}");
    let partitions = topic["partitions"].as_array().expect("partitions");
    let ids: Vec<i64> = partitions
        .iter()
        .map(|p| p["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, (0..count).collect::<Vec<_>>(), "{topic}");
    for p in partitions {
        let leader = p["leader"].as_i64().unwrap();
        assert!(leader >= 0, "{p}");
        assert_eq!(p["error"], 0, "{p}");
        assert_eq!(p["replicas"], json!([leader]), "{p}");
        assert_eq!(p["isr"], json!([leader]), "{p}");
    }
}

/// ListTopics gives the topic's partitions, replication factor and (only) the configs it was
/// created with; DescribeConfig gives those as set and the others as defaults.
fn config_admin(create_version: &'static str, version: &'static str) {
    let broker = Broker::start(&[]);
    let mut args = vec!["-topic", "configured", "-partitions", "3"];
    args.extend([
        "-config",
        "retention.ms=3600000",
        "-config",
        "cleanup.policy=compact",
    ]);
    Sarama::at(&broker, create_version)
        .admin("create-topic", &args)
        .expect("creation");
    let sarama = Sarama::at(&broker, version);

    let topics = sarama.admin("list-topics", &[]).expect("list topics");
    let listed = topics
        .iter()
        .find(|t| t["topic"] == "configured")
        .unwrap_or_else(|| panic!("the topic is listed: {topics:?}"));
    assert_eq!(
        pick(listed, &["partitions", "replication", "configs"]),
        json!({
            "partitions": 3,
            "replication": 1,
            "configs": {"retention.ms": "3600000", "cleanup.policy": "compact"},
        }),
        "listed with only the configs it was created with as non-default"
    );

    let entries = sarama
        .admin("describe-config", &["-topic", "configured"])
        .expect("describe config");
    let entry = |name: &str| -> Value {
        let e = entries.iter().find(|e| e["name"] == name);
        let e = e.unwrap_or_else(|| panic!("{name} described: {entries:?}"));
        pick(e, &["value", "default"])
    };
    let expected = [
        (
            "retention.ms",
            json!({"value": "3600000", "default": false}),
        ),
        (
            "cleanup.policy",
            json!({"value": "compact", "default": false}),
        ),
        (
            "compression.type",
            json!({"value": "producer", "default": true}),
        ),
    ];
    for (name, expected) in expected {
        assert_eq!(entry(name), expected, "{name}");
    }
    assert_eq!(entry("segment.bytes")["default"], true, "segment.bytes");
    for e in &entries {
        let flags = pick(e, &["read_only", "sensitive"]);
        assert_eq!(
            flags,
            json!({"read_only": false, "sensitive": false}),
            "{e}"
        );
    }
}

/// A live member makes the group listed, and described as Stable with that member, its
/// subscription and its assignment; once it has left, the offsets it committed are listed
/// and the group is Empty; deleted, it is no longer listed and has no offsets.
/// `version` runs the list and describe calls, `delete_version` the deletion; the member
/// runs at the newest setting.
fn group_admin(version: &'static str, delete_version: &'static str) {
    let broker = Broker::start(GROUP_SETTINGS);
    create_topic(&broker, "watched", 2);
    for p in 0..2 {
        produce_to_partition(&broker, "watched", p, 3);
    }
    let admin = Sarama::at(&broker, version);
    let entry = json!({"group": "watchers", "protocol_type": "consumer"});
    let listed = || {
        let groups = admin.list_groups();
        (groups.contains(&entry), groups)
    };

    let args = member_args("watchers", "watched", Some("1h"), None);
    let mut member = Sarama::at(&broker, NEWEST).spawn(&args);
    go::wait_until(&mut [&mut member], WAIT, "the member read all six", |l| {
        events(&parsed(l[0]), "msg").len() >= 6
    });
    let assigned = events(&parsed(member.lines()), "assigned");
    let (found, groups) = listed();
    assert!(found, "listed while the member is in it: {groups:?}");
    assert_described_with_member(
        &admin.describe_group("watchers"),
        &assigned[assigned.len() - 1],
    );

    expect_success(member.finish(RUN_TIMEOUT));
    assert_eq!(
        admin.group_offsets("watchers", "watched"),
        [3, 3],
        "what the member committed"
    );
    let left = admin.describe_group("watchers");
    assert_eq!(
        pick(&left, &["error", "state"]),
        json!({"error": 0, "state": "Empty"})
    );
    assert!(
        left["members"].as_array().is_none_or(|m| m.is_empty()),
        "{left}"
    );

    let deleted = Sarama::at(&broker, delete_version)
        .admin("delete-group", &["-group", "watchers"])
        .expect("delete group");
    assert_eq!(deleted, [json!({"group": "watchers", "error": 0})]);
    let (found, groups) = listed();
    assert!(!found, "listed after its deletion: {groups:?}");
    assert_eq!(
        admin.group_offsets("watchers", "watched"),
        [-1, -1],
        "offsets after deletion"
    );
}

/// A Stable "range" consumer group whose only member is the one that printed `assigned`:
/// its id, client id and host, subscription and assignment.
fn assert_described_with_member(group: &Value, assigned: &Value) {
    let summary = pick(group, &["error", "state", "protocol_type", "protocol"]);
    let stable =
        json!({"error": 0, "state": "Stable", "protocol_type": "consumer", "protocol": "range"});
    assert_eq!(summary, stable, "{group}");
    let members = group["members"].as_array().expect("members");
    assert_eq!(members.len(), 1, "{group}");
    let m = &members[0];
    let expected = json!({
        "member_id": assigned["member"],
        "client_id": "ferrite-sarama-test",
        "subscribed": ["watched"],
        "assignment": {"watched": [0, 1]},
    });
    assert_eq!(
        pick(m, &["member_id", "client_id", "subscribed", "assignment"]),
        expected
    );
    let host = m["client_host"].as_str().unwrap();
    assert!(host.contains("127.0.0.1"), "the member's host: {host}");
}

/// The `fields` of the object `v`, as an object (a missing field is null).
fn pick(v: &Value, fields: &[&str]) -> Value {
    let picked = fields.iter().map(|f| (f.to_string(), v[*f].clone()));
    Value::Object(picked.collect())
}

// ---------------------------------------------------------------------------------------------
// Running the client.

/// The client at one protocol setting against one broker.
struct Sarama<'a> {
    broker: &'a Broker,
    version: &'static str,
}

/// A finished run: its JSON lines, exit status and log.
struct Ran {
    args: Vec<String>,
    status: ExitStatus,
    lines: Vec<Value>,
    stderr: String,
}

impl std::fmt::Display for Ran {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let lines: Vec<String> = self.lines.iter().map(|l| l.to_string()).collect();
        write!(
            f,
            "--- sarama-client {} ({}) ---\nstdout:\n{}\nstderr:\n{}",
            self.args.join(" "),
            self.status,
            lines.join("\n"),
            self.stderr
        )
    }
}

impl<'a> Sarama<'a> {
    fn at(broker: &'a Broker, version: &'static str) -> Sarama<'a> {
        Sarama { broker, version }
    }

    /// `args` (subcommand first) with the broker and this setting added.
    fn full_args(&self, args: &[String]) -> Vec<String> {
        let mut full = args.to_vec();
        let at = ["-brokers", &self.broker.addr, "-version", self.version];
        full.extend(at.iter().map(|s| s.to_string()));
        full
    }

    fn run(&self, args: &[String], stdin: Option<Vec<u8>>) -> Ran {
        let args = self.full_args(args);
        let out = go::run("sarama", &args, stdin, RUN_TIMEOUT);
        let stdout = String::from_utf8_lossy(&out.stdout);
        Ran {
            lines: stdout.lines().map(parse_line).collect(),
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            args,
        }
    }

    /// Runs to completion; panics with its output unless it succeeded.
    fn ok(&self, args: &[String], stdin: Option<Vec<u8>>) -> Vec<Value> {
        let ran = self.run(args, stdin);
        assert!(
            ran.status.success(),
            "Sarama {} failed\n{ran}",
            self.version
        );
        ran.lines
    }

    fn spawn(&self, args: &[String]) -> Background {
        Background::spawn("sarama", &self.full_args(args))
    }

    /// Sends `msgs` in one SyncProducer.SendMessages; their acknowledgements, in order.
    fn produce(&self, topic: &str, codec: &str, msgs: &[Msg], ts: Option<i64>) -> Vec<Record> {
        let lines = self.ok(&produce_args(topic, codec, ts), Some(stdin_of(msgs)));
        records(&lines)
    }

    /// The messages a Consumer reads from `offset` ("oldest", "newest" or a number) until it
    /// has `count` and `LINGER` has passed.
    fn consume(
        &self,
        topic: &str,
        partitions: Option<&str>,
        offset: &str,
        count: usize,
    ) -> Vec<Value> {
        let lines = self.ok(&consume_args(topic, partitions, offset, count), None);
        events(&lines, "msg")
    }

    fn list_groups(&self) -> Vec<Value> {
        self.admin("list-groups", &[]).expect("list groups")
    }

    fn describe_group(&self, group: &str) -> Value {
        let lines = self.admin("describe-groups", &["-group", group]);
        let lines = lines.expect("describe groups");
        assert_eq!(lines.len(), 1, "one group described: {lines:?}");
        lines[0].clone()
    }

    /// The group's committed offsets of partitions 0 and 1 of `topic` (-1: none).
    fn group_offsets(&self, group: &str, topic: &str) -> Vec<i64> {
        let args = ["-group", group, "-topic", topic, "-partition-ids", "0,1"];
        let lines = self.admin("list-group-offsets", &args);
        let lines = lines.expect("list group offsets");
        let offset = |l: &Value| {
            assert_eq!(l["error"], 0, "{l}");
            l["offset"].as_i64().unwrap()
        };
        lines.iter().map(offset).collect()
    }

    /// One admin call: its result lines, or the Kafka error code it failed with.
    fn admin(&self, op: &str, args: &[&str]) -> Result<Vec<Value>, i64> {
        let mut full = vec!["admin".to_string(), op.to_string()];
        full.extend(args.iter().map(|s| s.to_string()));
        let ran = self.run(&full, None);
        if ran.status.success() {
            return Ok(ran.lines);
        }
        let code = ran.lines.iter().find_map(|l| l["code"].as_i64());
        match code {
            Some(code) if code >= 0 => Err(code),
            _ => panic!("Sarama {} admin {op} failed\n{ran}", self.version),
        }
    }
}

fn produce_args(topic: &str, codec: &str, timestamps: Option<i64>) -> Vec<String> {
    let mut args: Vec<String> = ["produce", "-topic", topic, "-codec", codec]
        .map(String::from)
        .to_vec();
    if let Some(ts) = timestamps {
        args.extend(["-timestamps".to_string(), ts.to_string()]);
    }
    args
}

fn consume_args(topic: &str, partitions: Option<&str>, offset: &str, count: usize) -> Vec<String> {
    let mut args: Vec<String> = ["consume", "-topic", topic, "-offset", offset]
        .map(String::from)
        .to_vec();
    if let Some(p) = partitions {
        args.extend(["-partitions".to_string(), p.to_string()]);
    }
    let linger = format!("{}ms", LINGER.as_millis());
    args.extend([
        "-count".to_string(),
        count.to_string(),
        "-linger".to_string(),
        linger,
    ]);
    args
}

fn expect_success(f: go::Finished) -> Vec<String> {
    assert!(
        f.status.success(),
        "the client failed: {}\nstdout:\n{}\nstderr:\n{}",
        f.status,
        f.lines.join("\n"),
        f.stderr
    );
    f.lines
}

fn parse_line(line: &str) -> Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"))
}

fn parsed(lines: &[String]) -> Vec<Value> {
    lines.iter().map(|l| parse_line(l)).collect()
}

fn events(lines: &[Value], event: &str) -> Vec<Value> {
    lines
        .iter()
        .filter(|v| v["event"] == event)
        .cloned()
        .collect()
}

/// Setup through the newest admin call (CreateTopics v2), so that the steps under test do
/// not depend on auto-creation.
fn create_topic(broker: &Broker, topic: &str, partitions: usize) {
    let partitions = partitions.to_string();
    Sarama::at(broker, NEWEST)
        .admin(
            "create-topic",
            &["-topic", topic, "-partitions", &partitions],
        )
        .expect("creating the topic");
}

// ---------------------------------------------------------------------------------------------
// Records.

/// A message to send: `key` None is a null key.
struct Msg {
    key: Option<String>,
    value: String,
}

/// `count` messages `{tag}-{i}`: every other one keyed (k0..k4), one with an empty key, the
/// rest with a null key.
fn messages(tag: &str, count: usize) -> Vec<Msg> {
    (0..count)
        .map(|i| Msg {
            key: match i {
                3 => Some(String::new()),
                i if i % 2 == 0 => Some(format!("k{}", i % 5)),
                _ => None,
            },
            value: format!("{tag}-{i}"),
        })
        .collect()
}

/// The client's (and kcat's `-K '\t'`) input: "key\tvalue" lines, "value" alone for a null key.
fn stdin_of(msgs: &[Msg]) -> Vec<u8> {
    msgs.iter()
        .map(|m| match &m.key {
            Some(k) => format!("{k}\t{}\n", m.value),
            None => format!("{}\n", m.value),
        })
        .collect::<String>()
        .into_bytes()
}

/// A record where it was stored.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Record {
    partition: i32,
    offset: i64,
    key: Option<String>,
    value: String,
}

impl Record {
    fn new(partition: i32, offset: i64, key: Option<&str>, value: &str) -> Record {
        let key = key.map(String::from);
        let value = value.to_string();
        Record {
            partition,
            offset,
            key,
            value,
        }
    }
}

/// Records from the client's message or acknowledgement lines.
fn records(lines: &[Value]) -> Vec<Record> {
    lines
        .iter()
        .map(|v| {
            let field = |name: &str| {
                v[name]
                    .as_i64()
                    .unwrap_or_else(|| panic!("no {name} in {v}"))
            };
            Record::new(
                field("partition") as i32,
                field("offset"),
                v["key"].as_str(),
                v["value"].as_str().unwrap(),
            )
        })
        .collect()
}

/// `count` records "p{partition}-{i}" written to one partition by kcat.
fn produce_to_partition(broker: &Broker, topic: &str, partition: i32, count: i64) -> Vec<Record> {
    let lines: String = (0..count).map(|i| format!("p{partition}-{i}\n")).collect();
    let p = partition.to_string();
    kcat(
        broker,
        &["-P", "-t", topic, "-p", &p],
        Some(lines.as_bytes()),
    );
    (0..count)
        .map(|i| Record::new(partition, i, None, &format!("p{partition}-{i}")))
        .collect()
}

/// Every record of `topic` as kcat reads it (librdkafka 2.0: Fetch v11).
fn kcat_records(broker: &Broker, topic: &str) -> Vec<Record> {
    common::kcat_consume(broker, topic, "%p\t%o\t%K\t%k\t%s\n")
        .iter()
        .map(|line| {
            let f: Vec<&str> = line.splitn(5, '\t').collect();
            let key = (f[2] != "-1").then_some(f[3]);
            Record::new(f[0].parse().unwrap(), f[1].parse().unwrap(), key, f[4])
        })
        .collect()
}

fn offsets_by_partition(records: &[Record]) -> BTreeMap<i32, Vec<i64>> {
    let mut by = BTreeMap::<i32, Vec<i64>>::new();
    for r in records {
        by.entry(r.partition).or_default().push(r.offset);
    }
    by
}

/// `consumed` (in the order it arrived) holds exactly `expected`: every record once, with its
/// key and value, and each partition's records in offset order.
fn assert_consumed(what: &str, consumed: &[Record], expected: &[Record]) {
    let by_partition = |records: &[Record]| {
        let mut by = BTreeMap::<i32, Vec<Record>>::new();
        for r in records {
            by.entry(r.partition).or_default().push(r.clone());
        }
        by
    };
    let mut want = by_partition(expected);
    want.values_mut().for_each(|v| v.sort());
    assert_eq!(by_partition(consumed), want, "{what}");
}

fn now_ms() -> i64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    now.as_millis() as i64
}
