//! DeleteTopics while producers write and consumers long-poll the topic, round after round:
//! every request is answered (success, or the partition is gone), the broker stays up, and
//! nothing of the deleted topic stays on disk.

mod common;

use bytes::Bytes;
use common::{wire, Broker};
use ferrite_shards::batch::build::{build_batch, NewRecord, ProducerFields};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TOPIC: &str = "doomed";
const PARTITIONS: i32 = 3;
const ROUNDS: usize = 12;
const NONE: i16 = 0;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const NOT_LEADER_OR_FOLLOWER: i16 = 6;

fn name() -> TopicName {
    TopicName(StrBytes::from_static_str(TOPIC))
}

fn create(s: &mut TcpStream) {
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(name())
            .with_num_partitions(PARTITIONS)
            .with_replication_factor(1)]);
    let resp: CreateTopicsResponse = wire::call(s, ApiKey::CreateTopics, 4, &req);
    assert_eq!(resp.topics[0].error_code, NONE, "created");
}

fn delete(s: &mut TcpStream) {
    let req = DeleteTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topic_names(vec![name()]);
    let resp: DeleteTopicsResponse = wire::call(s, ApiKey::DeleteTopics, 4, &req);
    assert_eq!(resp.responses[0].error_code, NONE, "deleted");
}

/// Produces to every partition; the partitions' codes.
fn produce(s: &mut TcpStream, batch: &Bytes) -> Vec<i16> {
    let req = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name())
            .with_partition_data(
                (0..PARTITIONS)
                    .map(|p| {
                        PartitionProduceData::default()
                            .with_index(p)
                            .with_records(Some(batch.clone()))
                    })
                    .collect(),
            )]);
    let resp: ProduceResponse = wire::call(s, ApiKey::Produce, 7, &req);
    resp.responses
        .iter()
        .flat_map(|t| t.partition_responses.iter().map(|p| p.error_code))
        .collect()
}

/// A long poll at `at` (each partition's high watermark so far); the codes, and `at` moved
/// to the new high watermarks.
fn long_poll(s: &mut TcpStream, at: &mut [i64]) -> Vec<i16> {
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(300)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name())
            .with_partitions(
                (0..PARTITIONS)
                    .map(|p| {
                        FetchPartition::default()
                            .with_partition(p)
                            .with_fetch_offset(at[p as usize])
                            .with_partition_max_bytes(1 << 16)
                    })
                    .collect(),
            )]);
    let resp: FetchResponse = wire::call(s, ApiKey::Fetch, 11, &req);
    let mut codes = Vec::new();
    for p in resp.responses.iter().flat_map(|t| &t.partitions) {
        codes.push(p.error_code);
        if p.error_code == NONE {
            at[p.partition_index as usize] = p.high_watermark;
        }
    }
    codes
}

/// Runs `ask` in a loop until the partitions are reported gone after `deleted` is set; panics
/// on any other code, a closed connection, or no "gone" within the deadline.
fn until_gone(
    addr: String,
    deleted: Arc<AtomicBool>,
    mut ask: impl FnMut(&mut TcpStream) -> Vec<i16> + Send + 'static,
) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let mut s = TcpStream::connect(&addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut answered = 0;
        loop {
            let was_deleted = deleted.load(Ordering::Acquire);
            let codes = ask(&mut s);
            answered += 1;
            for c in &codes {
                assert!(
                    [NONE, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER].contains(c),
                    "code {c} while the topic is deleted"
                );
            }
            if was_deleted && codes.iter().all(|&c| c == UNKNOWN_TOPIC_OR_PARTITION) {
                return answered;
            }
            assert!(Instant::now() < deadline, "never told the topic is gone");
        }
    })
}

fn partition_dirs(broker: &Broker) -> Vec<String> {
    std::fs::read_dir(&broker.data_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("{TOPIC}-")))
        .collect()
}

#[test]
fn topics_deleted_under_produce_and_long_polls_answer_gone_and_leave_nothing() {
    for mode in ["buffered", "direct"] {
        let tuning = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(tuning.path(), format!("[shards]\nio_mode = \"{mode}\"\n")).unwrap();
        let mut broker = Broker::start(&["--config", tuning.path().to_str().unwrap()]);
        let mut admin = wire::connect(&broker);
        let batch = build_batch(
            &[NewRecord {
                value: Some(Bytes::from_static(b"under deletion")),
                timestamp_ms: 1,
                ..Default::default()
            }],
            ProducerFields::NONE,
        );
        for round in 0..ROUNDS {
            create(&mut admin);
            let deleted = Arc::new(AtomicBool::new(false));
            let mut clients = Vec::new();
            for _ in 0..2 {
                let batch = batch.clone();
                clients.push(until_gone(broker.addr.clone(), deleted.clone(), move |s| {
                    produce(s, &batch)
                }));
                let mut at = vec![0i64; PARTITIONS as usize];
                clients.push(until_gone(broker.addr.clone(), deleted.clone(), move |s| {
                    long_poll(s, &mut at)
                }));
            }
            // Let the load and the long polls build up, then delete under them (the later
            // rounds at other moments of the polls).
            std::thread::sleep(Duration::from_millis(80 + 17 * round as u64));
            delete(&mut admin);
            deleted.store(true, Ordering::Release);
            for c in clients {
                let answered = c.join().expect("every request answered rightly");
                assert!(answered > 0, "round {round} ({mode})");
            }
            assert!(
                partition_dirs(&broker).is_empty(),
                "round {round} ({mode}): the deleted partitions' directories are gone"
            );
        }
        assert!(broker.is_running(), "{mode}");
        let log = broker.log();
        assert!(!log.contains("panicked"), "{mode}: {log}");
        assert!(
            broker.stop().success(),
            "{mode}: a clean stop after the rounds"
        );
    }
}
