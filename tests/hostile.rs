//! Bad input never takes the broker down: garbage, impossible frame sizes, unknown APIs,
//! corrupt batches and truncated requests are refused (an error code, or the connection
//! closed), and the next client is served as usual.

mod common;

use bytes::{Bytes, BytesMut};
use common::wire::{connect, frame, read_frame};
use common::Broker;
use ferrite_shards::batch::build::{build_batch, NewRecord, ProducerFields};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse,
    ProduceRequest, ProduceResponse, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use std::io::{Read, Write};
use std::net::TcpStream;

fn assert_closed(s: &mut TcpStream, what: &str) {
    let mut buf = [0u8; 64];
    match s.read(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("{what}: expected the connection closed, got {other:?}"),
    }
}

/// A fresh client still gets ApiVersions and Metadata answered.
fn assert_serving(broker: &mut Broker) {
    assert!(broker.is_running(), "the broker process is alive");
    let mut s = connect(broker);
    s.write_all(&frame(
        ApiKey::ApiVersions,
        3,
        1,
        &ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("hostile-test"))
            .with_client_software_version(StrBytes::from_static_str("1")),
    ))
    .unwrap();
    let mut body = read_frame(&mut s).expect("ApiVersions answered");
    let header = ResponseHeader::decode(&mut body, 0).unwrap();
    assert_eq!(header.correlation_id, 1);
    let versions = ApiVersionsResponse::decode(&mut body, 3).unwrap();
    assert_eq!(versions.error_code, 0);
    s.write_all(&frame(ApiKey::Metadata, 12, 2, &MetadataRequest::default()))
        .unwrap();
    let mut body = read_frame(&mut s).expect("Metadata answered");
    let _ = ResponseHeader::decode(&mut body, 1).unwrap();
    let md = MetadataResponse::decode(&mut body, 12).unwrap();
    assert_eq!(md.brokers.len(), 1);
}

fn produce_request(records: Bytes) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("hostile")))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])])
}

fn a_batch() -> Bytes {
    build_batch(
        &[NewRecord {
            value: Some(Bytes::from_static(b"payload")),
            timestamp_ms: 1,
            ..Default::default()
        }],
        ProducerFields::NONE,
    )
}

#[test]
fn garbage_and_impossible_frames_close_only_their_connection() {
    let mut broker = Broker::start(&[]);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("garbage", {
            let mut g = vec![0, 0, 0, 196];
            g.extend((0..196u32).map(|i| (i * 97 % 251) as u8));
            g
        }),
        ("garbage with a plausible header", {
            let mut g = vec![0, 0, 0, 40, 0, 3, 0, 12, 0, 0, 0, 1];
            g.extend((0..36u32).map(|i| (i * 89 % 256) as u8));
            g
        }),
        ("negative size", vec![0xff, 0xff, 0xff, 0xfe, 1, 2, 3]),
        ("huge size", vec![0x7f, 0xff, 0xff, 0xff]),
        ("size too small for a header", vec![0, 0, 0, 3, 0, 18, 0]),
        ("unknown API key", {
            let mut f = frame(ApiKey::ApiVersions, 3, 9, &ApiVersionsRequest::default());
            f[4..6].copy_from_slice(&999i16.to_be_bytes());
            f
        }),
        ("truncated request body", {
            let mut f = frame(ApiKey::Produce, 7, 9, &produce_request(a_batch()));
            // Keep the frame size honest but cut the body in the middle of the record set.
            let keep = f.len() - 40;
            f.truncate(keep);
            let n = (keep - 4) as i32;
            f[..4].copy_from_slice(&n.to_be_bytes());
            f
        }),
    ];
    for (what, bytes) in cases {
        let mut s = connect(&broker);
        s.write_all(&bytes).unwrap();
        assert_closed(&mut s, what);
        assert_serving(&mut broker);
    }
}

#[test]
fn an_unsupported_api_versions_version_gets_a_v0_answer() {
    let broker = Broker::start(&[]);
    let mut s = connect(&broker);
    let mut f = frame(ApiKey::ApiVersions, 3, 5, &ApiVersionsRequest::default());
    f[6..8].copy_from_slice(&9i16.to_be_bytes());
    s.write_all(&f).unwrap();
    let mut body = read_frame(&mut s).expect("answered");
    let _ = ResponseHeader::decode(&mut body, 0).unwrap();
    let v = ApiVersionsResponse::decode(&mut body, 0).unwrap();
    assert_eq!(v.error_code, 35, "UNSUPPORTED_VERSION");
    assert_eq!(v.api_keys[0].api_key, 18);
    assert_eq!(v.api_keys[0].max_version, 4);
}

#[test]
fn a_corrupt_batch_is_refused_with_an_error_code_and_nothing_is_written() {
    let mut broker = Broker::start(&[]);
    let mut s = connect(&broker);
    // Metadata creates the topic (auto-creation), as a client's first request would.
    let ask = MetadataRequest::default().with_topics(Some(vec![
        kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str("hostile")))),
    ]));
    s.write_all(&frame(ApiKey::Metadata, 12, 100, &ask))
        .unwrap();
    let mut body = read_frame(&mut s).expect("Metadata answered");
    let _ = ResponseHeader::decode(&mut body, 1).unwrap();
    let md = MetadataResponse::decode(&mut body, 12).unwrap();
    assert_eq!(md.topics[0].error_code, 0, "auto-created");
    let mut bad = a_batch().to_vec();
    let last = bad.len() - 1;
    bad[last] ^= 0x55; // the CRC no longer matches
    let cases = [
        (Bytes::from(bad), 2i16, "CORRUPT_MESSAGE"),
        (Bytes::from_static(&[0u8; 30]), 2, "CORRUPT_MESSAGE (short)"),
    ];
    for (i, (records, code, what)) in cases.into_iter().enumerate() {
        s.write_all(&frame(
            ApiKey::Produce,
            7,
            i as i32,
            &produce_request(records),
        ))
        .unwrap();
        let mut body = read_frame(&mut s).expect("produce answered");
        let _ = ResponseHeader::decode(&mut body, 0).unwrap();
        let resp = ProduceResponse::decode(&mut body, 7).unwrap();
        let p = &resp.responses[0].partition_responses[0];
        assert_eq!(p.error_code, code, "{what}");
    }
    // The same connection goes on: a good batch is written at offset 0 (nothing bad was).
    s.write_all(&frame(ApiKey::Produce, 7, 10, &produce_request(a_batch())))
        .unwrap();
    let mut body = read_frame(&mut s).expect("produce answered");
    let _ = ResponseHeader::decode(&mut body, 0).unwrap();
    let resp = ProduceResponse::decode(&mut body, 7).unwrap();
    let p = &resp.responses[0].partition_responses[0];
    assert_eq!((p.error_code, p.base_offset), (0, 0));
    assert_serving(&mut broker);
}

#[test]
fn an_old_message_set_with_a_bad_crc_is_refused_and_nothing_is_written() {
    let broker = Broker::start(&[]);
    let mut s = connect(&broker);
    let ask = MetadataRequest::default().with_topics(Some(vec![
        kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str("hostile")))),
    ]));
    s.write_all(&frame(ApiKey::Metadata, 12, 1, &ask)).unwrap();
    read_frame(&mut s).expect("Metadata answered");
    let mut set = BytesMut::new();
    ferrite_shards::batch::legacy::put_message(
        &mut set,
        &ferrite_shards::batch::legacy::Message {
            offset: 0,
            magic: 1,
            attributes: 0,
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(b"old client"),
        },
    );
    let good = set.clone().freeze();
    let mut bad = set.to_vec();
    let last = bad.len() - 1;
    bad[last] ^= 0x20; // the message's CRC-32 no longer matches
    for (i, (records, code)) in [(Bytes::from(bad), 2i16), (good, 0)]
        .into_iter()
        .enumerate()
    {
        s.write_all(&frame(
            ApiKey::Produce,
            2,
            10 + i as i32,
            &produce_request(records),
        ))
        .unwrap();
        let mut body = read_frame(&mut s).expect("produce answered");
        let _ = ResponseHeader::decode(&mut body, 0).unwrap();
        let resp = ProduceResponse::decode(&mut body, 2).unwrap();
        let p = &resp.responses[0].partition_responses[0];
        assert_eq!(p.error_code, code, "Produce v2, case {i}");
        if code == 0 {
            assert_eq!(p.base_offset, 0, "the corrupt set wrote nothing");
        }
    }
}
