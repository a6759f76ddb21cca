//! Incremental fetch sessions (KIP-227) on the real broker: Kafka's rules on the wire, and
//! kafka-python 3.0's consumer, which opens sessions by default, reading through one.

mod common;

use common::wire::{call, connect, create_topic};
use common::{kcat, python, Broker};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use std::net::TcpStream;

const TOPIC: &str = "sessions";

fn produce(broker: &Broker, partition: i32, values: &[&str]) {
    let input = values.join("\n");
    kcat(
        broker,
        &["-P", "-t", TOPIC, "-p", &partition.to_string()],
        Some(input.as_bytes()),
    );
}

/// A fetch of `TOPIC` in session `id` at `epoch`, naming `partitions` (partition, offset) and
/// forgetting `forgotten`, answered at once.
fn fetch(
    s: &mut TcpStream,
    version: i16,
    id: i32,
    epoch: i32,
    partitions: &[(i32, i64)],
    forgotten: &[i32],
) -> FetchResponse {
    let name = TopicName(StrBytes::from_static_str(TOPIC));
    let topics = if partitions.is_empty() {
        Vec::new()
    } else {
        vec![FetchTopic::default()
            .with_topic(name.clone())
            .with_partitions(
                partitions
                    .iter()
                    .map(|&(p, offset)| {
                        FetchPartition::default()
                            .with_partition(p)
                            .with_fetch_offset(offset)
                            .with_partition_max_bytes(1 << 20)
                    })
                    .collect(),
            )]
    };
    let forgotten = if forgotten.is_empty() {
        Vec::new()
    } else {
        vec![ForgottenTopic::default()
            .with_topic(name)
            .with_partitions(forgotten.to_vec())]
    };
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_session_id(id)
        .with_session_epoch(epoch)
        .with_topics(topics)
        .with_forgotten_topics_data(forgotten);
    call(s, ApiKey::Fetch, version, &request)
}

/// (partition, high watermark, whether records came) of every partition in a response.
fn partitions(r: &FetchResponse) -> Vec<(i32, i64, bool)> {
    r.responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| {
            let records = p.records.as_ref().is_some_and(|b| !b.is_empty());
            (p.partition_index, p.high_watermark, records)
        })
        .collect()
}

#[test]
fn a_session_answers_only_what_changed_with_kafkas_errors() {
    let broker = Broker::start(&[]);
    assert_eq!(create_topic(&broker, TOPIC, 3).0, 0);
    produce(&broker, 0, &["a", "b"]);
    let mut s = connect(&broker);

    // A full fetch at epoch 0 opens a session and answers every partition.
    let full = fetch(&mut s, 12, 0, 0, &[(0, 0), (1, 0), (2, 0)], &[]);
    assert_eq!(full.error_code, 0);
    assert_ne!(full.session_id, 0, "a session was opened");
    assert_eq!(
        partitions(&full),
        [(0, 2, true), (1, 0, false), (2, 0, false)]
    );
    let id = full.session_id;

    // Epoch 1 moves partition 0 past its records: nothing changed, nothing is answered.
    let quiet = fetch(&mut s, 12, id, 1, &[(0, 2)], &[]);
    assert_eq!((quiet.error_code, quiet.session_id), (0, id));
    assert_eq!(partitions(&quiet), []);

    // A record on partition 2: the next fetch names nothing and gets partition 2 alone.
    produce(&broker, 2, &["c"]);
    let changed = fetch(&mut s, 12, id, 2, &[], &[]);
    assert_eq!(partitions(&changed), [(2, 1, true)]);

    // Kafka's errors: a wrong epoch, an unknown id, topic ids in a session opened by names.
    let stale = fetch(&mut s, 12, id, 2, &[], &[]);
    assert_eq!((stale.error_code, partitions(&stale)), (71, vec![]));
    let unknown = fetch(&mut s, 12, id.wrapping_add(1).max(1), 1, &[], &[]);
    assert_eq!(unknown.error_code, 70, "FETCH_SESSION_ID_NOT_FOUND");
    let by_id = fetch(&mut s, 13, id, 3, &[], &[]);
    assert_eq!(by_id.error_code, 106, "FETCH_SESSION_TOPIC_ID_ERROR");

    // Forgetting every partition closes the session: the answer has no session, and the id
    // is gone.
    let closed = fetch(&mut s, 12, id, 3, &[], &[0, 1, 2]);
    assert_eq!((closed.error_code, closed.session_id), (0, 0));
    assert_eq!(fetch(&mut s, 12, id, 4, &[], &[]).error_code, 70);

    // Epoch -1 is a sessionless full fetch, as before v7.
    let sessionless = fetch(&mut s, 12, 0, -1, &[(0, 0), (1, 0)], &[]);
    assert_eq!(sessionless.session_id, 0);
    assert_eq!(partitions(&sessionless).len(), 2);
}

#[test]
fn no_slots_no_sessions() {
    let broker = Broker::start(&["--set", "max.incremental.fetch.session.cache.slots=0"]);
    assert_eq!(create_topic(&broker, TOPIC, 1).0, 0);
    let mut s = connect(&broker);
    let full = fetch(&mut s, 12, 0, 0, &[(0, 0)], &[]);
    assert_eq!((full.error_code, full.session_id), (0, 0));
    assert_eq!(partitions(&full).len(), 1, "still a full answer");
}

/// kafka-python's consumer reads 20 partitions through an incremental session (its session
/// id is checked), each record once and in order, while more are produced.
#[test]
fn kafka_python_reads_through_an_incremental_session() {
    let broker = Broker::start(&[]);
    let out = python(
        "kafka_python_fetch_sessions.py",
        &[&broker.addr, "python-sessions", "20", "2000"],
    );
    println!("{out}");
    assert!(out.contains("\"ok\": true"), "{out}");
    assert!(out.contains("\"session_id\": "), "{out}");
}
