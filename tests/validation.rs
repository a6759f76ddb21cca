//! Kafka's validation rules as a client meets them on the wire (the rules themselves are
//! unit-tested beside their code; `docs/validation.md` lists each with its test): the error
//! code, `record_errors` and `error_message` of a refused produce, the connection an acks=0
//! producer loses, LogAppendTime, and readers refused down-conversion.

mod common;

use bytes::Bytes;
use common::wire::{call, connect, frame};
use common::Broker;
use ferrite_shards::batch::build::{build_batch, NewRecord, ProducerFields};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::io::{Read, Write};
use std::net::TcpStream;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn create_topic(conn: &mut TcpStream, name: &str, configs: &[(&str, &str)]) {
    let body = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(s(name)))
            .with_num_partitions(1)
            .with_replication_factor(1)
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        CreatableTopicConfig::default()
                            .with_name(s(k))
                            .with_value(Some(s(v)))
                    })
                    .collect(),
            )]);
    let answer: CreateTopicsResponse = call(conn, ApiKey::CreateTopics, 7, &body);
    assert_eq!(answer.topics[0].error_code, 0, "{:?}", answer.topics[0]);
}

fn produce_request(topic: &str, acks: i16, records: Option<Bytes>) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(s(topic)))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(records)])])
}

fn produce(conn: &mut TcpStream, topic: &str, records: Bytes) -> PartitionProduceResponse {
    let answer: ProduceResponse = call(
        conn,
        ApiKey::Produce,
        9,
        &produce_request(topic, 1, Some(records)),
    );
    answer.responses[0].partition_responses[0].clone()
}

fn batch(keys: &[Option<&'static [u8]>], timestamp_ms: i64) -> Bytes {
    let records: Vec<NewRecord> = keys
        .iter()
        .map(|k| NewRecord {
            key: k.map(Bytes::from_static),
            value: Some(Bytes::from_static(b"value")),
            timestamp_ms,
            headers: vec![],
        })
        .collect();
    build_batch(&records, ProducerFields::NONE)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[test]
fn keyless_records_on_a_compacted_topic_are_refused_one_by_one() {
    let broker = Broker::start(&[]);
    let mut conn = connect(&broker);
    create_topic(&mut conn, "compacted", &[("cleanup.policy", "compact")]);
    let p = produce(
        &mut conn,
        "compacted",
        batch(&[Some(b"k"), None, Some(b"k"), None], now_ms()),
    );
    assert_eq!(p.error_code, 87, "INVALID_RECORD");
    let indexes: Vec<i32> = p.record_errors.iter().map(|e| e.batch_index).collect();
    assert_eq!(indexes, [1, 3], "the records without a key");
    let message = p.error_message.as_deref().unwrap_or_default();
    assert!(message.contains("2 record errors"), "{message}");
    assert_eq!(
        p.log_start_offset, 0,
        "Kafka reports the log start with record errors"
    );
    let ok = produce(&mut conn, "compacted", batch(&[Some(b"k")], now_ms()));
    assert_eq!(
        (ok.error_code, ok.base_offset),
        (0, 0),
        "nothing was written"
    );
}

#[test]
fn timestamps_outside_the_topics_window_are_invalid_timestamps() {
    let broker = Broker::start(&[]);
    let mut conn = connect(&broker);
    create_topic(
        &mut conn,
        "windowed",
        &[("message.timestamp.before.max.ms", "3600000")],
    );
    let p = produce(&mut conn, "windowed", batch(&[Some(b"k")], 1_000));
    assert_eq!(p.error_code, 32, "INVALID_TIMESTAMP");
    assert_eq!(p.record_errors.len(), 1);
    let ok = produce(&mut conn, "windowed", batch(&[Some(b"k")], now_ms()));
    assert_eq!(ok.error_code, 0);
}

#[test]
fn log_append_time_topics_answer_with_the_brokers_time() {
    let broker = Broker::start(&[]);
    let mut conn = connect(&broker);
    create_topic(
        &mut conn,
        "appended",
        &[("message.timestamp.type", "LogAppendTime")],
    );
    let before = now_ms();
    let p = produce(&mut conn, "appended", batch(&[Some(b"k")], 5));
    assert_eq!(p.error_code, 0);
    assert!(
        p.log_append_time_ms >= before && p.log_append_time_ms <= now_ms(),
        "{} not within [{before}, now]",
        p.log_append_time_ms
    );
    let lines = common::kcat_consume(&broker, "appended", "%T\n");
    assert_eq!(
        lines,
        [p.log_append_time_ms.to_string()],
        "readers see that time"
    );
}

#[test]
fn an_acks_0_producer_loses_its_connection_when_a_partition_fails() {
    let broker = Broker::start(&["--set", "auto.create.topics.enable=false"]);
    let mut conn = connect(&broker);
    let bad = produce_request("missing", 0, Some(batch(&[Some(b"k")], now_ms())));
    conn.write_all(&frame(ApiKey::Produce, 9, 1, &bad)).unwrap();
    let mut buf = [0u8; 16];
    match conn.read(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("expected the connection closed, got {other:?}"),
    }
}

#[test]
fn a_null_record_set_is_a_corrupt_message() {
    let broker = Broker::start(&[]);
    let mut conn = connect(&broker);
    create_topic(&mut conn, "nulls", &[]);
    let answer: ProduceResponse = call(
        &mut conn,
        ApiKey::Produce,
        9,
        &produce_request("nulls", 1, None),
    );
    assert_eq!(answer.responses[0].partition_responses[0].error_code, 2);
}

#[test]
fn readers_that_need_down_conversion_are_refused_when_it_is_off() {
    let broker = Broker::start(&[]);
    let mut conn = connect(&broker);
    create_topic(
        &mut conn,
        "no-conversion",
        &[("message.downconversion.enable", "false")],
    );
    assert_eq!(
        produce(&mut conn, "no-conversion", batch(&[Some(b"k")], now_ms())).error_code,
        0
    );
    let fetch = |conn: &mut TcpStream, version: i16| -> i16 {
        let mut body = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(s("no-conversion")))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_partition_max_bytes(1 << 20)])]);
        if version >= 3 {
            body = body.with_max_bytes(1 << 20);
        }
        let answer: FetchResponse = call(conn, ApiKey::Fetch, version, &body);
        answer.responses[0].partitions[0].error_code
    };
    assert_eq!(fetch(&mut conn, 3), 35, "UNSUPPORTED_VERSION");
    assert_eq!(
        fetch(&mut conn, 4),
        0,
        "v4 reads batches: no conversion needed"
    );
}
