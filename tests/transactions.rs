//! Transactions (issue 16) with real clients against the real broker: commit and abort,
//! READ_COMMITTED and READ_UNCOMMITTED readers, fencing, timeouts, offsets in transactions.

mod common;

use common::eos::{EosClient, EosLoop, GroupPlacement};
use common::{python, Broker};
use std::time::Duration;

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

/// Exactly-once consume-transform-produce with librdkafka: every input record is in the output
/// once, read READ_COMMITTED, though one transaction (its records and its offsets) was aborted
/// and redone; the group's committed offset is the input's end.
#[test]
fn confluent_consume_transform_produce_is_exactly_once_across_an_abort() {
    let broker = Broker::start(&[]);
    let out = python(
        "confluent_consume_transform_produce.py",
        &[&broker.addr, "ctp-in", "ctp-out", "500", "tx-ctp"],
    );
    let json: serde_json::Value = serde_json::from_str(out.trim()).expect("JSON");
    let expected: Vec<String> = (0..500).map(|i| format!("x-v-{i}")).collect();
    assert_eq!(values(&json, "out"), expected, "in input order, each once");
    assert_eq!(json["committed"], 500);
    assert_eq!(json["aborted"], 1);
}

/// kafka-python 3.0, a second client family: its transactional producer commits, aborts and
/// commits a group's offsets in a transaction; its admin client lists and describes the open
/// transaction and the producers of its partition.
#[test]
fn kafka_python_transactions_offsets_and_admin_calls() {
    let broker = Broker::start(&[]);
    let out = python("kafka_python_transactions.py", &[&broker.addr]);
    let json: serde_json::Value = serde_json::from_str(out.trim()).expect("JSON");
    let k1: Vec<String> = (0..10).map(|i| format!("k1-{i}")).collect();
    assert_eq!(
        values(&json, "ctp_read"),
        k1,
        "READ_COMMITTED skips the aborted five"
    );
    assert_eq!(
        values(&json, "topic"),
        k1,
        "the open transaction was aborted"
    );
    let y: Vec<String> = k1.iter().map(|v| format!("y-{v}")).collect();
    assert_eq!(values(&json, "out"), y);
    assert_eq!(
        json["ctp_committed"], 10,
        "the offsets committed with the transaction"
    );
    assert_eq!(
        json["listed"],
        serde_json::json!([
            ["kp-open", "TransactionState.ONGOING"],
            ["kp-tx", "TransactionState.COMPLETE_COMMIT"]
        ])
    );
    assert_eq!(
        json["described"],
        serde_json::json!({"state": "TransactionState.ONGOING", "partitions": [["kp-topic", 0]]})
    );
    assert_eq!(
        json["producers_open"], 1,
        "DescribeProducers shows the open transaction"
    );
}

/// Fencing and timeouts with librdkafka: a second producer with the same transactional id
/// aborts the first one's open transaction and fences it (its commit fails as fenced, and its
/// records are never visible); a transaction left open past its timeout is aborted by the
/// coordinator, so READ_COMMITTED readers reach the end without it.
#[test]
fn a_second_producer_fences_the_first_and_a_stale_transaction_times_out() {
    let broker = Broker::start(&[
        "--set",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms=500",
    ]);
    let out = python("confluent_txn_fencing.py", &[&broker.addr, "fenced"]);
    let json: serde_json::Value = serde_json::from_str(out.trim()).expect("JSON");
    assert_eq!(json["a_commit_error"], "_FENCED", "{json}");
    assert_eq!(json["a_fatal"], true);
    let fresh: Vec<String> = (0..5).map(|i| format!("fresh-{i}")).collect();
    assert_eq!(
        values(&json, "read"),
        fresh,
        "no zombie or late record is visible"
    );
    assert_eq!(
        json["eof"], true,
        "the timed-out transaction no longer holds readers back"
    );
}

/// Exactly-once under faults on one broker: a consume-transform-produce loop over 20,000
/// records while the broker is killed with SIGKILL three times and restarted; the output,
/// read READ_COMMITTED, holds every input record exactly once, in order.
#[test]
fn consume_transform_produce_stays_exactly_once_through_kill_9() {
    let mut broker = Broker::start(&[
        "--set",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms=1000",
    ]);
    let count = 20_000;
    let mut eos = EosLoop::start(
        EosClient::Confluent,
        &broker.addr,
        count,
        "tx-eos",
        GroupPlacement::Any,
        Duration::from_secs(240),
    );
    for at in [count / 5, count / 2, count * 4 / 5] {
        eos.wait_for(at);
        broker.kill9();
        broker.restart();
    }
    eos.finish_exactly_once();
}

/// A transactional id unused for `transactional.id.expiration.ms` is removed by the coordinator
/// (a tombstone in `__transaction_state`): DescribeTransactions then answers
/// TRANSACTIONAL_ID_NOT_FOUND and ListTransactions leaves it out.
#[test]
fn an_idle_transactional_id_expires() {
    let broker = Broker::start(&[
        "--set",
        "transactional.id.expiration.ms=3000",
        "--set",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms=200",
        "--set",
        "transaction.remove.expired.transaction.cleanup.interval.ms=400",
    ]);
    let out = python("kafka_python_txn_expiry.py", &[&broker.addr, "8"]);
    let json: serde_json::Value = serde_json::from_str(out.trim()).expect("JSON");
    assert_eq!(json["before"], "TransactionState.COMPLETE_COMMIT", "{json}");
    assert_eq!(json["listed_before"], serde_json::json!(["expiring"]));
    assert_eq!(json["after"], "TransactionalIdNotFoundError", "{json}");
    assert_eq!(json["listed_after"], serde_json::json!([]));
}

/// A transactional id whose epochs run out (Kafka's `isProducerEpochExhausted`: epoch
/// `i16::MAX - 1`) gets a new producer id at epoch 0 on its next InitProducerId (KIP-360's
/// rotation), and a retry of that init, naming the old id and epoch, gets the same answer.
#[test]
fn a_transactional_id_whose_epochs_run_out_gets_a_new_producer_id() {
    use common::wire::{call, connect};
    use kafka_protocol::messages::{
        InitProducerIdRequest, InitProducerIdResponse, ProducerId, TransactionalId,
    };
    use kafka_protocol::protocol::StrBytes;
    const COORDINATOR_NOT_READY: [i16; 2] = [14, 15];
    let broker = Broker::start(&[]);
    let mut conn = connect(&broker);
    let init = |conn: &mut _, expected: (i64, i16)| -> InitProducerIdResponse {
        let body = InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("worn"))))
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(expected.0))
            .with_producer_epoch(expected.1);
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let answer: InitProducerIdResponse = call(
                conn,
                kafka_protocol::messages::ApiKey::InitProducerId,
                4,
                &body,
            );
            if !COORDINATOR_NOT_READY.contains(&answer.error_code)
                || std::time::Instant::now() > deadline
            {
                return answer;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let first = init(&mut conn, (-1, -1));
    assert_eq!((first.error_code, first.producer_epoch), (0, 0));
    let pid = first.producer_id.0;
    let mut current = (pid, 0);
    for epoch in 1..=i16::MAX - 1 {
        let answer = init(&mut conn, current);
        assert_eq!(answer.error_code, 0, "init at epoch {epoch}");
        assert_eq!((answer.producer_id.0, answer.producer_epoch), (pid, epoch));
        current = (pid, epoch);
    }
    let rotated = init(&mut conn, current);
    assert_eq!(rotated.error_code, 0);
    assert_ne!(rotated.producer_id.0, pid, "a new producer id");
    assert_eq!(rotated.producer_epoch, 0);
    let retried = init(&mut conn, current);
    assert_eq!(
        retried.error_code, 0,
        "the retry of the rotation is not fenced"
    );
    assert_eq!(
        (retried.producer_id.0, retried.producer_epoch),
        (rotated.producer_id.0, 0)
    );
    // The old producer id with an epoch it never had is fenced.
    let stale = init(&mut conn, (pid, 5));
    assert_eq!(stale.error_code, 90, "PRODUCER_FENCED");
}

/// KIP-664's way out of a hanging transaction: an operator's WriteTxnMarkers naming every
/// partition of it (spread over both shards) in one request, beside a partition that does not
/// exist. Each partition is answered in place (NONE, and UNKNOWN_TOPIC_OR_PARTITION for the
/// missing one), and the abort markers release READ_COMMITTED readers: the last stable offset
/// moves from the open transaction's first record to the end of the log.
#[test]
fn one_write_txn_markers_ends_a_hanging_transaction_on_every_partition() {
    use common::wire::{call, connect, create_topic, latest_offsets};
    use kafka_protocol::messages::write_txn_markers_request::{
        WritableTxnMarker, WritableTxnMarkerTopic,
    };
    use kafka_protocol::messages::{
        ApiKey, DescribeTransactionsRequest, DescribeTransactionsResponse, TopicName,
        TransactionalId, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
    };
    use kafka_protocol::protocol::StrBytes;
    const PARTITIONS: i32 = 4;
    const READ_UNCOMMITTED: i8 = 0;
    const READ_COMMITTED: i8 = 1;
    let broker = Broker::start(&["--cores", "2"]);
    assert_eq!(create_topic(&broker, "hanging", PARTITIONS).0, 0);
    let out = python(
        "confluent_open_transaction.py",
        &[&broker.addr, "hanging", &PARTITIONS.to_string(), "hangs"],
    );
    assert!(out.contains("open"), "{out}");
    let mut conn = connect(&broker);
    let offsets = |conn: &mut _, isolation: i8| -> Vec<i64> {
        latest_offsets(conn, "hanging", PARTITIONS, isolation)
            .into_iter()
            .map(|(_, code, offset)| {
                assert_eq!(code, 0);
                offset
            })
            .collect()
    };
    assert_eq!(offsets(&mut conn, READ_UNCOMMITTED), vec![1; 4]);
    assert_eq!(
        offsets(&mut conn, READ_COMMITTED),
        vec![0; 4],
        "the open transaction holds the last stable offset at its first record"
    );
    let described: DescribeTransactionsResponse = call(
        &mut conn,
        ApiKey::DescribeTransactions,
        0,
        &DescribeTransactionsRequest::default()
            .with_transactional_ids(vec![TransactionalId(StrBytes::from_static_str("hangs"))]),
    );
    let txn = &described.transaction_states[0];
    assert_eq!(txn.transaction_state.as_str(), "Ongoing");
    let name = |topic: &'static str| TopicName(StrBytes::from_static_str(topic));
    let request =
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(txn.producer_id)
            .with_producer_epoch(txn.producer_epoch)
            .with_transaction_result(false)
            .with_coordinator_epoch(0)
            .with_topics(vec![
                WritableTxnMarkerTopic::default()
                    .with_name(name("hanging"))
                    .with_partition_indexes(vec![3, 0, 2]),
                WritableTxnMarkerTopic::default()
                    .with_name(name("absent"))
                    .with_partition_indexes(vec![0]),
                WritableTxnMarkerTopic::default()
                    .with_name(name("hanging"))
                    .with_partition_indexes(vec![1]),
            ])]);
    let answer: WriteTxnMarkersResponse = call(&mut conn, ApiKey::WriteTxnMarkers, 1, &request);
    let codes: Vec<(String, i32, i16)> = answer.markers[0]
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.name.to_string(), p.partition_index, p.error_code))
        })
        .collect();
    let expected: Vec<(String, i32, i16)> = [
        ("hanging", 3, 0),
        ("hanging", 0, 0),
        ("hanging", 2, 0),
        ("absent", 0, 3),
        ("hanging", 1, 0),
    ]
    .into_iter()
    .map(|(t, p, c)| (t.to_string(), p, c))
    .collect();
    assert_eq!(codes, expected, "each partition answered in its place");
    assert_eq!(
        offsets(&mut conn, READ_COMMITTED),
        vec![2; 4],
        "the abort markers end the transaction on every partition"
    );
}
