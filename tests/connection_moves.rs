//! A plaintext connection whose requests all name partitions of another shard moves to that
//! shard (`server::handoff`), and nothing it sent is lost, repeated or reordered.

mod common;

use common::{python, Broker};

/// A two-shard broker with `tuning` added to its `[shards]` section.
fn two_shards(tuning: &str) -> (Broker, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tuning.toml");
    std::fs::write(&file, format!("[shards]\ncores = [0, 1]\n{tuning}")).unwrap();
    let config = file.display().to_string();
    (Broker::start(&["--config", config.as_str()]), dir)
}

/// The sum of the series of counter `name` whose labels contain `labels`, over the shards.
fn counter(broker: &Broker, name: &str, labels: &str) -> u64 {
    let (_, metrics) = common::http_get(&broker.metrics_addr, "/metrics");
    let prefix = format!("{name}{{");
    metrics
        .lines()
        .filter(|l| l.starts_with(&prefix) && l.contains(labels))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

fn moved(broker: &Broker) -> u64 {
    counter(broker, "ferrite_connections_moved_total", "")
}

/// One kcat producer (one connection) sending `records` records "p{producer}-{i}" to
/// partition 0 of `topic`, one record per batch, several requests in flight.
fn produce_one_record_batches(broker: &Broker, topic: &str, producer: usize, records: usize) {
    let lines: Vec<String> = (0..records).map(|i| format!("p{producer}-{i}")).collect();
    let stdin = format!("{}\n", lines.join("\n"));
    common::kcat(
        broker,
        &[
            "-t",
            topic,
            "-p",
            "0",
            "-P",
            "-X",
            "batch.num.messages=1",
            "-X",
            "linger.ms=0",
        ],
        Some(stdin.as_bytes()),
    );
}

/// Pipelining librdkafka producers (kcat, one-record batches, several requests in flight) to
/// one partition: each connection that lands on the other shard moves to the owner after its
/// first `connection_move_after_requests` requests, with the bytes of the requests already in
/// its socket, and every producer's records come back once and in order.
#[test]
fn kcat_producers_move_to_the_partitions_shard_and_keep_their_order() {
    let (broker, _dir) = two_shards("connection_move_after_requests = 16\n");
    const RECORDS: usize = 900;
    let mut producers = 0;
    // The kernel picks each connection's shard: run until one has moved (each run has an
    // even chance of landing on the shard that does not own the partition).
    while producers < 4 || moved(&broker) == 0 {
        assert!(
            producers < 40,
            "no connection moved in {producers} producers"
        );
        produce_one_record_batches(&broker, "moved", producers, RECORDS);
        producers += 1;
    }
    let moved = moved(&broker);
    // A connection crosses cores only until it moves: 16 produce requests, then a handful of
    // others (its Metadata, ApiVersions are served where it is). Without the move each of
    // its 900 produce requests would have.
    let remote = counter(&broker, "ferrite_router_calls_total", "target=\"remote\"");
    assert!(
        remote <= 40 * moved,
        "{remote} cross-core calls for {moved} moved connections"
    );
    let got = common::kcat_consume(&broker, "moved", "%s\n");
    assert_eq!(got.len(), producers * RECORDS, "every record once");
    for p in 0..producers {
        let prefix = format!("p{p}-");
        let mine: Vec<&String> = got.iter().filter(|l| l.starts_with(&prefix)).collect();
        let want: Vec<String> = (0..RECORDS).map(|i| format!("p{p}-{i}")).collect();
        assert!(
            mine.iter()
                .map(|s| s.as_str())
                .eq(want.iter().map(|s| s.as_str())),
            "producer {p}'s records in order"
        );
    }
}

/// kafka-python's producer and consumer each use partition 0 and then partition 1, which
/// live on different shards: whichever shard each connection landed on, it moves at least
/// once, the consumer's incremental fetch session starts again on the new shard, and both
/// partitions read back whole and in order.
#[test]
fn kafka_python_connections_follow_their_partitions_between_shards() {
    let (broker, _dir) = two_shards("");
    let out = python(
        "kafka_python_moving.py",
        &[&broker.addr, "following", "150"],
    );
    println!("{out}");
    assert!(out.contains("\"ok\": true"), "{out}");
    let moved = moved(&broker);
    assert!(
        moved >= 2,
        "the producer and the consumer each moved: {moved} moves"
    );
}

/// librdkafka's transactional producer talks to its transaction coordinator over a connection
/// of its own. Its transactions here span both shards' partitions, so only that connection can
/// move: a producer whose coordinator connection landed on the shard that does not hold its
/// `__transaction_state` partition moves it there after `connection_move_after_requests`
/// coordinator requests, and every transaction's records read back once with read_committed.
#[test]
fn a_transaction_coordinator_connection_moves_to_the_coordinators_shard() {
    let (broker, _dir) = two_shards("connection_move_after_requests = 4\n");
    assert_eq!(common::wire::create_topic(&broker, "txns", 2).0, 0);
    const TRANSACTIONS: usize = 20;
    let mut producers = 0;
    // Each producer's coordinator connection lands on the other shard with an even chance.
    while moved(&broker) == 0 {
        assert!(
            producers < 16,
            "no coordinator connection moved in {producers} producers"
        );
        let id = format!("mover-{producers}");
        let out = python(
            "confluent_txn_loop.py",
            &[&broker.addr, "txns", &id, &TRANSACTIONS.to_string()],
        );
        assert!(out.contains(&format!("committed {TRANSACTIONS}")), "{out}");
        producers += 1;
    }
    let mut got = common::kcat_consume_with(
        &broker,
        "txns",
        "%s\n",
        &["-X", "isolation.level=read_committed"],
    );
    got.sort();
    let mut want: Vec<String> = (0..producers)
        .flat_map(|p| (0..TRANSACTIONS).map(move |n| format!("mover-{p}-{n}")))
        .flat_map(|record| [record.clone(), record])
        .collect();
    want.sort();
    assert_eq!(got, want, "each transaction's two records, once each");
}

/// With `connection_move_after_requests = 0` connections stay where the kernel put them.
#[test]
fn connections_stay_where_they_land_when_moving_is_off() {
    let (broker, _dir) = two_shards("connection_move_after_requests = 0\n");
    for p in 0..6 {
        produce_one_record_batches(&broker, "stays", p, 100);
    }
    let moved = moved(&broker);
    assert_eq!(moved, 0);
    assert_eq!(common::kcat_consume(&broker, "stays", "%s\n").len(), 600);
}
