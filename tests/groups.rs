//! Consumer groups with real clients: confluent-kafka (librdkafka), kafka-python and kcat.

mod common;

use common::{kcat, python, Broker};

/// Short delays so the tests do not wait on Kafka's production defaults.
const GROUP_SETTINGS: &[&str] = &["--set", "group.initial.rebalance.delay.ms=300"];

#[test]
fn confluent_group_splits_rebalances_and_resumes_after_restart() {
    let mut broker = Broker::start(GROUP_SETTINGS);
    let state = broker.data_dir.with_extension("groups-state.json");
    let state = state.to_str().unwrap();
    let out = python("confluent_groups.py", &["run", &broker.addr, state]);
    assert!(out.contains("groups ok"), "{out}");
    // A crash, not a clean stop: acknowledged commits are on disk, not only in memory.
    broker.kill9();
    broker.restart();
    let out = python("confluent_groups.py", &["resume", &broker.addr, state]);
    assert!(out.contains("resume ok"), "{out}");
}

#[test]
fn a_static_member_restarting_gets_its_partitions_back_without_a_rebalance() {
    let broker = Broker::start(GROUP_SETTINGS);
    let out = python("confluent_static_member.py", &[&broker.addr]);
    assert!(out.contains("static membership ok"), "{out}");
}

#[test]
fn kafka_python_consumers_in_a_group() {
    let broker = Broker::start(GROUP_SETTINGS);
    let out = python("kafka_python_group.py", &[&broker.addr]);
    assert!(out.contains("kafka-python group ok"), "{out}");
}

/// kcat's balanced consumer (`-G`) reads a topic in a group, commits on exit, and the next
/// run in the same group reads only what came after.
#[test]
fn kcat_balanced_consumer_resumes_from_committed_offsets() {
    let broker = Broker::start(&["--set", "num.partitions=3"]);
    let lines = common::numbered_lines;
    let consume = |count: usize| -> Vec<String> {
        let mut got = common::kcat_group_consume(&broker, "kcat-group", "balanced", count);
        got.sort();
        got
    };
    let expected = |from: usize, to: usize| -> Vec<String> {
        let mut v: Vec<String> = (from..to).map(|i| format!("m{i}")).collect();
        v.sort();
        v
    };
    // -p -1 with no key spreads messages over the partitions (librdkafka's random partitioner).
    kcat(&broker, &["-P", "-t", "balanced"], Some(&lines(0, 30)));
    assert_eq!(consume(30), expected(0, 30));
    kcat(&broker, &["-P", "-t", "balanced"], Some(&lines(30, 40)));
    assert_eq!(
        consume(10),
        expected(30, 40),
        "the second run resumes after the commits"
    );
}
