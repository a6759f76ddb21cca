//! Transactions (issue 16) with real clients against the real broker: commit and abort,
//! READ_COMMITTED and READ_UNCOMMITTED readers, fencing, timeouts, offsets in transactions.

mod common;

use common::{python, Broker};

fn values(json: &serde_json::Value, key: &str) -> Vec<String> {
    json[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in {json}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// librdkafka's transactional producer commits, aborts and commits again; a READ_COMMITTED
/// consumer reads the committed records only, each once, and a READ_UNCOMMITTED one reads all.
#[test]
fn confluent_commits_and_aborts_and_each_isolation_level_reads_its_share() {
    let broker = Broker::start(&["--set", "num.partitions=2"]);
    let out = python(
        "confluent_transactions.py",
        &[&broker.addr, "orders", "tx-orders"],
    );
    let json: serde_json::Value = serde_json::from_str(out.trim()).expect("JSON");
    let committed: Vec<String> = (0..10)
        .map(|i| format!("c1-{i}"))
        .chain((0..5).map(|i| format!("c2-{i}")))
        .collect();
    let aborted: Vec<String> = (0..10).map(|i| format!("a-{i}")).collect();
    assert_eq!(
        sorted(values(&json, "committed")),
        sorted(committed.clone())
    );
    let everything: Vec<String> = committed.into_iter().chain(aborted).collect();
    assert_eq!(sorted(values(&json, "uncommitted")), sorted(everything));
}
