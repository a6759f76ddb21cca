//! ferrite-bench against three Ferrite brokers on a real ZooKeeper: a leader that moves in
//! the middle of a run costs retries, not records.

#[path = "../../tests/common/mod.rs"]
mod common;

use common::cluster::{leaders, metadata, reassign, start_cluster, wait_until};
use common::zookeeper::ZooKeeper;
use std::process::{Command, Output};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(120);
/// 24 s at the run's 2,000 records a second, so the move (a replica added, caught up, made
/// leader) lands inside the run. A follower joins the ISR when a fetch of it reaches the high
/// watermark of that moment; at 8,000 records a second the 12 s run had appends every 2 ms,
/// and on a loaded host a follower's round trip took longer, so it caught up only once the
/// run had ended (a CI run with no retry to count) or, in a longer run, not within 20 s.
const RECORDS: u64 = 48_000;

fn bench(args: &[String]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ferrite-bench"));
    cmd.args(args);
    common::run(cmd, None, TIMEOUT)
}

fn json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).expect("the JSON file")).expect("valid JSON")
}

/// The partition's leader is moved to another broker while the bench produces to it: the old
/// leader answers NOT_LEADER_OR_FOLLOWER (or UNKNOWN_TOPIC_OR_PARTITION once it has let the
/// partition go), and the bench, like Kafka's producer, asks for metadata again and sends those
/// batches to the new leader. Every record arrives and the run has no error (acks=all: with
/// acks=1 a leader change may lose what only the old leader had, in Kafka too). The bench's
/// producer is not idempotent, so a batch the old leader wrote and replicated but answered
/// NOT_LEADER_OR_FOLLOWER for (Kafka's `DelayedProduce` does the same) comes twice; only
/// retried records may.
#[test]
fn a_leader_moved_during_a_run_costs_retries_and_no_record() {
    let zk = ZooKeeper::start();
    let brokers = start_cluster(&zk, &[]);
    let dir = tempfile::tempdir().unwrap();
    let produced = dir.path().join("produce.json");
    let bootstrap = brokers[0].addr.clone();
    let args: Vec<String> = [
        "produce",
        "--brokers",
        &bootstrap,
        "--topic",
        "moving",
        "--create",
        "--partitions",
        "1",
        "--messages",
        &RECORDS.to_string(),
        "--rate",
        "2000",
        "--size",
        "200",
        "--acks",
        "all",
        "--batch-bytes",
        "4096",
        "--linger-ms",
        "2",
        "--json",
        produced.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let run = std::thread::spawn(move || bench(&args));
    // Metadata for every topic: naming the topic would have kcat create it first (with the
    // broker's default partition count).
    let leader_of_0 = || {
        leaders(&metadata(&brokers[0], None), "moving")
            .get(&0)
            .copied()
    };
    wait_until(
        Duration::from_secs(20),
        "the bench created the topic",
        || leader_of_0().is_some_and(|l| l > 0),
    );
    std::thread::sleep(Duration::from_secs(2));
    let home = leader_of_0().unwrap() as i32;
    let target = [1, 2, 3].into_iter().find(|&b| b != home).unwrap();
    assert_eq!(reassign(&brokers[0], "moving", Some(vec![target])), 0);
    wait_until(Duration::from_secs(20), "the leader moved", || {
        leader_of_0() == Some(target as i64)
    });
    let out = run.join().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let p = json(&produced);
    assert_eq!(p["errors"], 0, "{p}");
    assert_eq!(p["messages"], RECORDS, "every record acknowledged: {p}");
    assert!(
        p["produce_retries"].as_u64().unwrap() > 0,
        "the move was felt: {stdout}"
    );
    assert!(p["request_latency_ms"]["p50"].as_f64().unwrap() > 0.0);

    let consumed = dir.path().join("consume.json");
    let target_addr = &brokers[(target - 1) as usize].addr;
    let out = bench(&[
        "consume".into(),
        "--brokers".into(),
        target_addr.clone(),
        "--topic".into(),
        "moving".into(),
        // A bound rather than a count, so a lost record fails the count instead of hanging.
        "--duration".into(),
        "10".into(),
        "--size".into(),
        "200".into(),
        "--verify".into(),
        "--json".into(),
        consumed.to_str().unwrap().into(),
    ]);
    let c = json(&consumed);
    let duplicates = c["duplicates"].as_u64().unwrap();
    assert_eq!(
        c["messages"].as_u64().unwrap() - duplicates,
        RECORDS,
        "every acknowledged record: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        duplicates <= p["produce_retried_records"].as_u64().unwrap(),
        "only retried records come twice: {c}"
    );
    assert_eq!(c["verify_failures"], 0);
}
