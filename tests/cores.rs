//! Two shards: partitions spread over both, and each reachable from a connection on either.

mod common;

use common::{kcat, Broker};

#[test]
fn eight_partitions_on_two_shards_are_reachable_from_both() {
    let broker = Broker::start(&[
        "--cores",
        "2",
        "--set",
        "num.partitions=8",
        "--log-level",
        "info,ferrite::server::connection=debug",
    ]);
    kcat(
        &broker,
        &["-P", "-t", "spread", "-p", "0"],
        Some(b"first\n"),
    );
    let meta: serde_json::Value = serde_json::from_slice(
        &std::fs::read(broker.data_dir.join("meta/topics/spread.json")).expect("topic metadata"),
    )
    .unwrap();
    let shards: Vec<u64> = meta["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["shard"].as_u64().unwrap())
        .collect();
    assert_eq!(shards.len(), 8);
    assert_eq!(
        shards.iter().filter(|s| **s == 0).count(),
        4,
        "balanced: {shards:?}"
    );
    assert_eq!(
        shards.iter().filter(|s| **s == 1).count(),
        4,
        "balanced: {shards:?}"
    );
    // New connections land on either shard (SO_REUSEPORT); through each, every partition
    // takes a produce and gives its data back.
    let mut round = 0;
    loop {
        round += 1;
        for p in 0..8 {
            let line = format!("round-{round}-partition-{p}\n");
            kcat(
                &broker,
                &["-P", "-t", "spread", "-p", &p.to_string()],
                Some(line.as_bytes()),
            );
        }
        for p in 0..8 {
            let out = kcat(
                &broker,
                &[
                    "-C",
                    "-t",
                    "spread",
                    "-p",
                    &p.to_string(),
                    "-o",
                    "-1",
                    "-e",
                    "-q",
                ],
                None,
            );
            let want = format!("round-{round}-partition-{p}");
            assert_eq!(String::from_utf8(out).unwrap().trim(), want);
        }
        let log = broker.log();
        if log.contains("shard=0") && log.contains("shard=1") {
            break;
        }
        assert!(round < 10, "connections never reached both shards:\n{log}");
    }
}
