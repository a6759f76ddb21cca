//! ferrite-bench against a real Ferrite broker (the workspace's `ferrite` binary).

// The broker's own test harness: the real binary on a claimed port, stopped on drop.
#[path = "../../tests/common/mod.rs"]
mod common;

use common::Broker;
use ferrite_bench::partitioner::partition_for_key;
use std::process::{Command, Output};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(120);

fn bench(args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ferrite-bench"));
    cmd.args(args);
    common::run(cmd, None, TIMEOUT)
}

/// Runs the bench and requires it to succeed (its stderr as the failure's message).
fn bench_ok(args: &[&str]) -> Output {
    let out = bench(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).expect("the JSON file")).expect("valid JSON")
}

fn assert_latencies(v: &serde_json::Value) {
    for k in ["p50", "p90", "p99", "p999", "p9999", "max"] {
        assert!(v[k].as_f64().is_some_and(|x| x > 0.0), "{k} in {v}");
    }
    assert!(v["p50"].as_f64() <= v["p99"].as_f64() && v["p99"].as_f64() <= v["max"].as_f64());
}

#[test]
fn produce_then_consume_a_known_set() {
    let broker = Broker::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let produced = dir.path().join("produce.json");
    bench_ok(&[
        "produce",
        "--brokers",
        &broker.addr,
        "--topic",
        "known",
        "--create",
        "--partitions",
        "4",
        "--messages",
        "20000",
        "--size",
        "300",
        "--producers",
        "2",
        "--keys",
        "7",
        "--partitioner",
        "hash",
        "--compression",
        "lz4",
        "--batch-bytes",
        "16384",
        "--json",
        produced.to_str().unwrap(),
    ]);
    let p = json(&produced);
    assert_eq!(p["mode"], "produce");
    assert_eq!(p["messages"], 20000);
    assert_eq!(p["bytes"], 20000 * 300);
    assert_eq!(p["errors"], 0);
    assert!(p["msgs_per_sec"].as_f64().unwrap() > 0.0);
    assert_latencies(&p["latency_ms"]);
    let consumed = dir.path().join("consume.json");
    bench_ok(&[
        "consume",
        "--brokers",
        &broker.addr,
        "--topic",
        "known",
        "--size",
        "300",
        "--consumers",
        "2",
        "--verify",
        "--json",
        consumed.to_str().unwrap(),
    ]);
    let c = json(&consumed);
    assert_eq!(c["mode"], "consume");
    assert_eq!(c["messages"], 20000, "every record read back");
    assert_eq!(c["verify_failures"], 0, "every value as sent");
    assert_eq!(c["duplicates"], 0, "no record twice");
    assert_eq!(c["errors"], 0);
    // Keyed records landed where the Java client's partitioner puts them.
    let mut checked = 0;
    for line in common::kcat_consume(&broker, "known", "%p %k\n") {
        let (p, key) = line.split_once(' ').unwrap();
        assert_eq!(
            p.parse::<usize>().unwrap(),
            partition_for_key(key.as_bytes(), 4),
            "{key}"
        );
        checked += 1;
    }
    assert_eq!(checked, 20000);
}

#[test]
fn e2e_at_a_fixed_rate_reports_end_to_end_latency() {
    let broker = Broker::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e2e.json");
    let out = bench_ok(&[
        "e2e",
        "--brokers",
        &broker.addr,
        "--topic",
        "timed",
        "--create",
        "--messages",
        "4000",
        "--rate",
        "2000",
        "--size",
        "100",
        "--linger-ms",
        "1",
        "--json",
        path.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("end-to-end latency ms"), "{stdout}");
    let e = json(&path);
    assert_eq!(e["mode"], "e2e");
    assert_eq!(e["produced"]["messages"], 4000);
    assert_eq!(e["messages"], 4000, "every produced record consumed");
    assert_latencies(&e["e2e_latency_ms"]);
    assert_latencies(&e["latency_ms"]);
    // Two seconds at 2000/s: the open-loop schedule paced the run.
    let seconds = e["seconds"].as_f64().unwrap();
    assert!(seconds >= 1.9, "ran {seconds} s");
}

#[test]
fn broker_errors_are_counted_by_code() {
    let broker = Broker::start(&["--set", "message.max.bytes=2000"]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("errors.json");
    let out = bench(&[
        "produce",
        "--brokers",
        &broker.addr,
        "--topic",
        "small",
        "--create",
        "--messages",
        "50",
        "--size",
        "5000",
        "--json",
        path.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "errors make the run fail");
    let e = json(&path);
    assert_eq!(e["messages"], 0);
    assert_eq!(e["errors"], 50);
    assert_eq!(e["errors_by_code"]["10"], 50, "MESSAGE_TOO_LARGE: {e}");
}

#[test]
fn a_group_reads_every_record_once_and_commits_where_it_stopped() {
    let broker = Broker::start(&["--set", "group.initial.rebalance.delay.ms=300"]);
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str], name: &str| -> serde_json::Value {
        let path = dir.path().join(name);
        let mut all = args.to_vec();
        all.extend([
            "--brokers",
            &broker.addr,
            "--topic",
            "grouped",
            "--size",
            "200",
        ]);
        all.extend(["--json", path.to_str().unwrap()]);
        let out = bench(&all);
        assert!(
            out.status.success(),
            "{all:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        json(&path)
    };
    let group = ["--group", "G", "--consumers", "2"];
    let p = run(
        &[
            "produce",
            "--create",
            "--partitions",
            "6",
            "--messages",
            "12000",
            "--producers",
            "2",
        ],
        "produce.json",
    );
    assert_eq!(p["messages"], 12000);
    let first = run(
        &[&["consume", "--verify"][..], &group].concat(),
        "first.json",
    );
    assert_eq!(
        first["messages"], 12000,
        "every record, once in all: {first}"
    );
    assert_eq!(first["duplicates"], 0, "no record read by both members");
    assert_eq!(first["verify_failures"], 0);
    assert_eq!(first["errors"], 0, "{first}");
    let again = run(&[&["consume"][..], &group].concat(), "again.json");
    assert_eq!(again["messages"], 0, "the group committed the end: {again}");
    assert_eq!(again["errors"], 0, "{again}");
    // Committed exactly where reading stopped: a later run reads only what came since.
    run(&["produce", "--messages", "500"], "more.json");
    let rest = run(&[&["consume"][..], &group].concat(), "rest.json");
    assert_eq!(rest["messages"], 500, "{rest}");
    assert_eq!(rest["errors"], 0, "{rest}");
}

/// `produce --transactional-id PREFIX --transaction-records 1000`, shaped by `shape`:
/// `[partitions, messages, size, producers]`. It must succeed; its stdout and JSON.
fn transactional_produce(
    broker: &Broker,
    topic: &str,
    prefix: &str,
    shape: [&str; 4],
) -> (String, serde_json::Value) {
    let [partitions, messages, size, producers] = shape;
    let dir = tempfile::tempdir().unwrap();
    let produced = dir.path().join("produce.json");
    let out = bench(&[
        "produce",
        "--brokers",
        &broker.addr,
        "--topic",
        topic,
        "--create",
        "--partitions",
        partitions,
        "--messages",
        messages,
        "--size",
        size,
        "--producers",
        producers,
        "--transactional-id",
        prefix,
        "--transaction-records",
        "1000",
        "--json",
        produced.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = json(&produced);
    (stdout, json)
}

/// `produce --transactional-id`: each producer commits a transaction every
/// `--transaction-records` records; every record is then visible to a READ_COMMITTED reader
/// (kcat, librdkafka), and the summary counts the transactions.
#[test]
fn transactional_produce_commits_every_n_records() {
    let broker = Broker::start(&[]);
    let (stdout, p) = transactional_produce(&broker, "txn", "bench", ["3", "6000", "100", "2"]);
    assert!(stdout.contains("transactions: 6 committed"), "{stdout}");
    assert_eq!(
        (p["messages"].as_u64(), p["errors"].as_u64()),
        (Some(6000), Some(0))
    );
    let read = common::kcat(
        &broker,
        &[
            "-C",
            "-t",
            "txn",
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            "%p\n",
            "-X",
            "isolation.level=read_committed",
        ],
        None,
    );
    let lines = String::from_utf8_lossy(&read).lines().count();
    assert_eq!(
        lines, 6000,
        "every committed record is READ_COMMITTED-visible"
    );
}

/// A transaction that begins while the producer's previous one is completing (its markers
/// being written, under load) is held by the coordinator until that completes, not refused
/// with CONCURRENT_TRANSACTIONS: the bench counts the coordinator calls it had to retry. One
/// retry in ten transactions is allowed, for a completion slower than the 200 ms hold on a
/// loaded machine; refused, nearly every transaction is retried.
#[test]
fn a_transaction_begun_during_the_last_ones_completion_is_held_not_refused() {
    let broker = Broker::start(&[]);
    let (stdout, p) =
        transactional_produce(&broker, "txn-loaded", "held", ["16", "40000", "1024", "4"]);
    let costs = &p["transaction_costs"];
    let (committed, retries) = (
        costs["committed"].as_u64().unwrap(),
        costs["retries"].as_u64().unwrap(),
    );
    assert_eq!(committed, 40, "{stdout}");
    assert!(
        retries * 10 <= committed,
        "{retries} coordinator calls retried: {stdout}"
    );
}

/// `--partitioner sticky`: keyless records fill one partition's batch before moving to the
/// next, as a Kafka Java producer's do (KIP-480, KIP-794). One producer, 4,000 records of which
/// 16 fill a 16 KiB batch: 250 batches in turn from partition 0, so partitions 0 and 1 hold 63
/// batches each and 2 and 3 hold 62 (one by one they would hold 1,000 each).
#[test]
fn sticky_keyless_records_fill_a_batch_before_moving_on() {
    let broker = Broker::start(&[]);
    bench_ok(&[
        "produce",
        "--brokers",
        &broker.addr,
        "--topic",
        "sticky",
        "--create",
        "--partitions",
        "4",
        "--messages",
        "4000",
        "--size",
        "1000",
        "--batch-bytes",
        "16384",
        "--linger-ms",
        "60000",
        "--partitioner",
        "sticky",
    ]);
    let mut per_partition = [0usize; 4];
    for line in common::kcat_consume(&broker, "sticky", "%p\n") {
        per_partition[line.parse::<usize>().unwrap()] += 1;
    }
    assert_eq!(per_partition, [63 * 16, 63 * 16, 62 * 16, 62 * 16]);
}

/// A producer holds at most `--buffer-bytes` of records until they are answered (Kafka's
/// `buffer.memory`): with room for less than one record, every record waits for the answer to
/// the one before, so each goes alone, as one batch in one request. Without the bound the 16
/// records of a 16 KiB batch would go together.
#[test]
fn a_producer_waits_for_answers_beyond_its_buffer() {
    let broker = Broker::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("buffer.json");
    bench_ok(&[
        "produce",
        "--brokers",
        &broker.addr,
        "--topic",
        "buffered",
        "--create",
        "--partitions",
        "4",
        "--messages",
        "200",
        "--size",
        "1000",
        "--batch-bytes",
        "16384",
        "--partitioner",
        "sticky",
        "--buffer-bytes",
        "1",
        "--json",
        path.to_str().unwrap(),
    ]);
    let r = json(&path);
    assert_eq!(r["messages"], 200);
    assert_eq!(r["errors"], 0);
    assert_eq!(r["produce_batches"], 200, "{r}");
    assert_eq!(r["produce_requests"], 200, "{r}");
}
