//! Fetch long polls woken by appends on another core, produce with acks=0, and a request over
//! both shards' partitions: one cross-core call per request, pipelined requests kept in order.

mod common;

use bytes::Bytes;
use common::wire::{connect, frame, read_frame};
use common::{kcat, Broker};
use ferrite_shards::batch::build::{build_batch, NewRecord, ProducerFields};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, FetchRequest, FetchResponse, ProduceRequest, ProduceResponse, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use std::io::Write;
use std::time::{Duration, Instant};

fn produce(topic: &str, partition: i32, acks: i16, value: &'static [u8]) -> Vec<u8> {
    let records = [(partition, Bytes::from_static(value))];
    frame(
        ApiKey::Produce,
        7,
        1,
        &produce_request(topic, acks, records),
    )
}

/// A Produce request with a batch of one record for each (partition, value).
fn produce_request(
    topic: &str,
    acks: i16,
    records: impl IntoIterator<Item = (i32, Bytes)>,
) -> ProduceRequest {
    let data = records
        .into_iter()
        .map(|(partition, value)| {
            let batch = build_batch(
                &[NewRecord {
                    value: Some(value),
                    timestamp_ms: 1,
                    ..Default::default()
                }],
                ProducerFields::NONE,
            );
            PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(batch))
        })
        .collect();
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(data)])
}

fn long_poll(topic: &str, partitions: &[i32], max_wait_ms: i32) -> Vec<u8> {
    let req = FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(
                partitions
                    .iter()
                    .map(|&p| {
                        FetchPartition::default()
                            .with_partition(p)
                            .with_fetch_offset(0)
                            .with_partition_max_bytes(1 << 20)
                    })
                    .collect(),
            )]);
    frame(ApiKey::Fetch, 11, 2, &req)
}

#[test]
fn a_waiting_fetch_wakes_when_either_shard_appends() {
    let broker = Broker::start(&["--cores", "2", "--set", "num.partitions=2"]);
    // Partitions 0 and 1 are placed on different shards; the fetching connection is on one.
    for target in [0, 1] {
        let topic = format!("woken-{target}");
        kcat(&broker, &["-L", "-t", &topic], None);
        let mut fetcher = connect(&broker);
        fetcher
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        fetcher
            .write_all(&long_poll(&topic, &[0, 1], 20_000))
            .unwrap();
        std::thread::sleep(Duration::from_millis(300)); // the fetch is waiting now
        let produced_at = Instant::now();
        let mut producer = connect(&broker);
        producer
            .write_all(&produce(&topic, target, 1, b"wake up"))
            .unwrap();
        read_frame(&mut producer).expect("produce answered");
        let mut body = read_frame(&mut fetcher).expect("fetch answered");
        let waited = produced_at.elapsed();
        let _ = ResponseHeader::decode(&mut body, 0).unwrap();
        let resp = FetchResponse::decode(&mut body, 11).unwrap();
        let p = &resp.responses[0].partitions[target as usize];
        assert_eq!(p.error_code, 0);
        assert_eq!(p.high_watermark, 1);
        assert!(
            !p.records.as_ref().unwrap().is_empty(),
            "the new batch is in the answer"
        );
        // Woken by the append, long before the 20 s the fetch was willing to wait.
        assert!(
            waited < Duration::from_secs(10),
            "fetch woke after {waited:?}"
        );
    }
}

#[test]
fn acks_0_gets_no_answer_and_is_written() {
    let broker = Broker::start(&[]);
    kcat(&broker, &["-L", "-t", "fire"], None);
    let mut s = connect(&broker);
    for _ in 0..5 {
        s.write_all(&produce("fire", 0, 0, b"and forget")).unwrap();
    }
    // The next answered request on the connection comes back first: acks=0 sent nothing.
    s.write_all(&long_poll("fire", &[0], 0)).unwrap();
    let mut body = read_frame(&mut s).expect("fetch answered");
    let header = ResponseHeader::decode(&mut body, 0).unwrap();
    assert_eq!(
        header.correlation_id, 2,
        "the fetch's answer, not a produce's"
    );
    let out = kcat(
        &broker,
        &["-C", "-t", "fire", "-o", "beginning", "-e", "-q"],
        None,
    );
    assert_eq!(String::from_utf8(out).unwrap().lines().count(), 5);
}

/// Cross-core calls so far, both shards together (`ferrite_router_calls_total`, remote).
fn remote_calls(broker: &Broker) -> f64 {
    broker.metric_with("ferrite_router_calls_total", "target=\"remote\"")
}

/// Ten pipelined produce requests, each with a batch for every one of 64 partitions spread over
/// two shards: every partition holds them in request order (request k's batch at offset k), and
/// the connection's shard reached the other with about one call per request (all of a request's
/// partitions there in one call), not one per partition (32 a request).
#[test]
fn a_request_over_both_shards_is_one_call_and_pipelined_requests_stay_in_order() {
    const PARTITIONS: i32 = 64;
    const REQUESTS: i32 = 10;
    let broker = Broker::start(&["--cores", "2"]);
    let (code, message) = common::wire::create_topic(&broker, "spread", PARTITIONS);
    assert_eq!(code, 0, "{message}");
    let request = |k: i32| {
        let records =
            (0..PARTITIONS).map(|p| (p, Bytes::from(format!("request {k} partition {p}"))));
        frame(
            ApiKey::Produce,
            7,
            k,
            &produce_request("spread", 1, records),
        )
    };
    let remote_before = remote_calls(&broker);
    let mut producer = connect(&broker);
    producer
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    for k in 0..REQUESTS {
        producer.write_all(&request(k)).unwrap();
    }
    for k in 0..REQUESTS {
        let mut body = read_frame(&mut producer).expect("produce answered");
        let header = ResponseHeader::decode(&mut body, 0).unwrap();
        assert_eq!(header.correlation_id, k);
        let resp = ProduceResponse::decode(&mut body, 7).unwrap();
        let partitions = &resp.responses[0].partition_responses;
        assert_eq!(partitions.len(), PARTITIONS as usize);
        for (p, answer) in partitions.iter().enumerate() {
            assert_eq!(answer.index, p as i32);
            assert_eq!(answer.error_code, 0, "request {k} partition {p}");
            assert_eq!(answer.base_offset, k as i64, "request {k} partition {p}");
        }
    }
    let remote_after = remote_calls(&broker);
    let calls = remote_after - remote_before;
    assert!(
        calls <= (REQUESTS + 5) as f64,
        "{calls} cross-core calls for {REQUESTS} requests"
    );
}

/// Twenty pipelined ApiVersions requests in one write, each answered at once: their responses
/// come back in request order, and the responses complete together went out together, in far
/// fewer sends than responses (`ferrite_response_sends_total`); without the gathering, one
/// send each.
#[test]
fn responses_complete_together_go_out_in_one_send_in_order() {
    use kafka_protocol::messages::ApiVersionsRequest;
    const REQUESTS: i32 = 20;
    let broker = Broker::start(&["--cores", "1"]);
    let responses_before = broker.metric("ferrite_responses_sent_total");
    let sends_before = broker.metric("ferrite_response_sends_total");
    let mut client = connect(&broker);
    let requests: Vec<u8> = (0..REQUESTS)
        .flat_map(|k| frame(ApiKey::ApiVersions, 0, k, &ApiVersionsRequest::default()))
        .collect();
    client.write_all(&requests).unwrap();
    for k in 0..REQUESTS {
        let mut body = read_frame(&mut client).expect("ApiVersions answered");
        let header = ResponseHeader::decode(&mut body, 0).unwrap();
        assert_eq!(header.correlation_id, k, "responses in request order");
    }
    let responses = broker.metric("ferrite_responses_sent_total") - responses_before;
    let sends = broker.metric("ferrite_response_sends_total") - sends_before;
    println!("{responses} responses in {sends} sends");
    assert_eq!(responses, REQUESTS as f64);
    assert!(
        sends <= (REQUESTS / 4) as f64,
        "{sends} sends for {REQUESTS} responses complete together"
    );
}
