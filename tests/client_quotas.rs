//! Client quotas (AlterClientQuotas, DescribeClientQuotas) with Kafka's rules, kept across a
//! restart, and enforced: a confluent-kafka producer over its `producer_byte_rate` converges to
//! it and is told throttle times, while an unthrottled one beside it keeps its rate.

mod common;

use common::quotas::{alter, describe};
use common::{python, Broker};
use std::collections::BTreeMap;

const INVALID_REQUEST: i16 = 42;
const UNSUPPORTED_VERSION: i16 = 35;

fn values(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn entity(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|p| p.to_string()).collect()
}

#[test]
fn client_quotas_follow_kafkas_rules_and_are_kept_across_a_restart() {
    let mut broker = Broker::start(&[]);
    let b = &broker;
    let loader = [("client-id", Some("loader"))];
    assert_eq!(
        alter(b, &loader, &[("producer_byte_rate", 5e6, false)], false),
        0
    );
    assert_eq!(
        alter(
            b,
            &[("client-id", None)],
            &[("consumer_byte_rate", 1e6, false)],
            false
        ),
        0
    );
    let both = [("user", Some("alice")), ("client-id", Some("loader"))];
    assert_eq!(
        alter(b, &both, &[("request_percentage", 12.5, false)], false),
        0
    );
    // Kafka's refusals, each changing nothing.
    for (what, code) in [
        (
            alter(b, &loader, &[("no_such_quota", 1.0, false)], false),
            INVALID_REQUEST,
        ),
        (
            alter(b, &loader, &[("producer_byte_rate", 1.5, false)], false),
            INVALID_REQUEST,
        ),
        (
            alter(b, &[], &[("producer_byte_rate", 1.0, false)], false),
            INVALID_REQUEST,
        ),
        (
            alter(
                b,
                &[("client-id", Some(""))],
                &[("producer_byte_rate", 1.0, false)],
                false,
            ),
            INVALID_REQUEST,
        ),
        (
            alter(
                b,
                &[("group", Some("g"))],
                &[("producer_byte_rate", 1.0, false)],
                false,
            ),
            INVALID_REQUEST,
        ),
    ] {
        assert_eq!(what, code);
    }
    assert_eq!(
        alter(b, &loader, &[("producer_byte_rate", 1.0, false)], true),
        0,
        "validate only"
    );

    // The client-id entities; the user and client-id one is removed below.
    let client_ids = BTreeMap::from([
        (
            entity(&["client-id=loader"]),
            values(&[("producer_byte_rate", 5e6)]),
        ),
        (
            entity(&["client-id=<default>"]),
            values(&[("consumer_byte_rate", 1e6)]),
        ),
    ]);
    let (code, all) = describe(b, &[], false);
    assert_eq!(code, 0);
    let mut expected = client_ids.clone();
    expected.insert(
        entity(&["user=alice", "client-id=loader"]),
        values(&[("request_percentage", 12.5)]),
    );
    assert_eq!(all, expected);
    // Exact, default and any components; strict leaves out entities with other parts.
    let (_, exact) = describe(b, &[("client-id", 0, Some("loader"))], true);
    assert_eq!(
        exact.keys().collect::<Vec<_>>(),
        [&entity(&["client-id=loader"])]
    );
    let (_, exact_loose) = describe(b, &[("client-id", 0, Some("loader"))], false);
    assert_eq!(
        exact_loose.len(),
        2,
        "not strict: the user and client-id entity too"
    );
    let (_, default) = describe(b, &[("client-id", 1, None)], true);
    assert_eq!(
        default.keys().collect::<Vec<_>>(),
        [&entity(&["client-id=<default>"])]
    );
    let (_, users) = describe(b, &[("user", 2, None)], false);
    assert_eq!(
        users.keys().collect::<Vec<_>>(),
        [&entity(&["user=alice", "client-id=loader"])]
    );
    assert_eq!(
        describe(b, &[("client-id", 2, None), ("client-id", 2, None)], false).0,
        INVALID_REQUEST
    );
    assert_eq!(
        describe(b, &[("group", 2, None)], false).0,
        UNSUPPORTED_VERSION
    );
    assert_eq!(
        describe(b, &[("client-id", 0, None)], false).0,
        INVALID_REQUEST
    );

    // remove takes a key away; an entity with none left is gone.
    assert_eq!(
        alter(b, &both, &[("request_percentage", 0.0, true)], false),
        0
    );
    assert!(broker.stop().success());
    broker.restart();
    let (_, kept) = describe(&broker, &[], false);
    assert_eq!(kept, client_ids);
}

/// The produce quota test: a producer with `producer_byte_rate` = 5 MB/s sends as fast as it
/// can for 10 s while another, without a quota, sends beside it. Kafka's measure lets a new
/// client send 10 s of its quota at once, and until 10 s have passed each throttle lets one
/// more request in, so over the first 10 s the expected rate is the quota plus some 10–15%
/// (measured: 5.72 MB/s); ±20% is asked.
#[test]
fn a_producer_over_its_byte_rate_converges_to_it_while_another_keeps_its_rate() {
    let broker = Broker::start(&["--set", "num.partitions=2"]);
    const QUOTA: f64 = 5_000_000.0;
    assert_eq!(
        alter(
            &broker,
            &[("client-id", Some("limited"))],
            &[("producer_byte_rate", QUOTA, false)],
            false
        ),
        0
    );
    let run = |client: &str, seconds: &str| {
        let out = python(
            "confluent_quota_producer.py",
            &[&broker.addr, client, seconds, &format!("topic-{client}")],
        );
        let line = out
            .lines()
            .rev()
            .find(|l| l.starts_with('{'))
            .expect(&out)
            .to_string();
        serde_json::from_str::<serde_json::Value>(&line).unwrap()
    };
    let alone = run("free-alone", "3");
    let (limited, free) = std::thread::scope(|scope| {
        let limited = scope.spawn(|| run("limited", "10"));
        // 3 s is enough to see its rate, and keeps the disk it fills small.
        let free = scope.spawn(|| run("free", "3"));
        (limited.join().unwrap(), free.join().unwrap())
    });
    println!("alone {alone}\nlimited {limited}\nfree {free}");
    let rate = limited["rate"].as_f64().unwrap();
    assert!(
        (0.8 * QUOTA..=1.2 * QUOTA).contains(&rate),
        "the limited producer ran at {rate:.0} B/s, its quota is {QUOTA}"
    );
    assert!(limited["throttled"].as_u64().unwrap() > 0, "{limited}");
    assert!(
        limited["max_throttle_ms"].as_f64().unwrap() > 0.0,
        "{limited}"
    );
    assert_eq!(free["throttled"].as_u64().unwrap(), 0, "{free}");
    let (free_rate, alone_rate) = (
        free["rate"].as_f64().unwrap(),
        alone["rate"].as_f64().unwrap(),
    );
    assert!(
        free_rate >= 2.0 * QUOTA && free_rate >= 0.5 * alone_rate,
        "the unthrottled producer ran at {free_rate:.0} B/s beside it, {alone_rate:.0} alone"
    );
    let (_, metrics) = common::http_get(&broker.metrics_addr, "/metrics");
    assert!(
        metrics.contains("ferrite_client_quota_throttled_responses_total{type=\"Produce\"}"),
        "{metrics}"
    );
}

/// `consumer_byte_rate`: a throttled fetch answers no data with the throttle time (Kafka's
/// `getThrottledResponse`), so a consumer limited to 1 MB/s reads about 10 s of its quota (what
/// Kafka's measure lets a new client take at once) in 6 s and is told to wait, while an
/// unlimited one reads the whole 20 MB backlog.
#[test]
fn a_consumer_over_its_byte_rate_gets_throttled_fetches_while_another_reads_everything() {
    let broker = Broker::start(&[]);
    const QUOTA: f64 = 1_000_000.0;
    assert_eq!(
        alter(
            &broker,
            &[("client-id", Some("slow-reader"))],
            &[("consumer_byte_rate", QUOTA, false)],
            false
        ),
        0
    );
    let out = python(
        "confluent_quota_consumer.py",
        &["fill", &broker.addr, "backlog", "2000"],
    );
    assert!(out.contains("filled"), "{out}");
    let read = |client: &str| {
        let out = python(
            "confluent_quota_consumer.py",
            &["consume", &broker.addr, "backlog", client, "6"],
        );
        let line = out
            .lines()
            .rev()
            .find(|l| l.starts_with('{'))
            .expect(&out)
            .to_string();
        serde_json::from_str::<serde_json::Value>(&line).unwrap()
    };
    let (slow, fast) = std::thread::scope(|scope| {
        let slow = scope.spawn(|| read("slow-reader"));
        let fast = scope.spawn(|| read("fast-reader"));
        (slow.join().unwrap(), fast.join().unwrap())
    });
    println!("slow {slow}\nfast {fast}");
    assert_eq!(fast["bytes"].as_f64().unwrap(), 20_000_000.0, "{fast}");
    assert_eq!(fast["throttled"].as_u64().unwrap(), 0);
    let slow_bytes = slow["bytes"].as_f64().unwrap();
    assert!(
        (5.0 * QUOTA..=13.0 * QUOTA).contains(&slow_bytes),
        "read {slow_bytes} bytes in 6 s at a 1 MB/s quota"
    );
    assert!(slow["throttled"].as_u64().unwrap() > 0, "{slow}");
}
