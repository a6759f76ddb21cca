//! Speaking the Kafka protocol directly, for tests that need exact requests.

use super::Broker;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{encode_request_header_into_buffer, Encodable, StrBytes};
use std::io::Read;
use std::net::TcpStream;
use std::time::Duration;

pub fn connect(broker: &Broker) -> TcpStream {
    connect_to(&broker.addr)
}

/// A connection to one of a broker's other listeners.
pub fn connect_to(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

pub fn frame<R: Encodable>(key: ApiKey, version: i16, correlation_id: i32, body: &R) -> Vec<u8> {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("hostile-test")));
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    encode_request_header_into_buffer(&mut buf, &header).unwrap();
    body.encode(&mut buf, version).unwrap();
    let n = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&n.to_be_bytes());
    buf.to_vec()
}

/// Reads one response frame; `None` if the broker closed the connection.
pub fn read_frame(s: &mut TcpStream) -> Option<Bytes> {
    let mut size = [0u8; 4];
    s.read_exact(&mut size).ok()?;
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    s.read_exact(&mut body).ok()?;
    Some(Bytes::from(body))
}

/// Sends one request and decodes its response (header and body in the API's versions).
pub fn call<Req, Resp>(s: &mut TcpStream, key: ApiKey, version: i16, body: &Req) -> Resp
where
    Req: Encodable,
    Resp: kafka_protocol::protocol::Decodable,
{
    use kafka_protocol::messages::ResponseHeader;
    use kafka_protocol::protocol::Decodable;
    use std::io::Write;
    s.write_all(&frame(key, version, 7, body)).expect("send");
    let mut frame =
        read_frame(s).unwrap_or_else(|| panic!("{key:?} v{version}: connection closed"));
    let header = ResponseHeader::decode(&mut frame, key.response_header_version(version))
        .expect("response header");
    assert_eq!(header.correlation_id, 7);
    let decoded = Resp::decode(&mut frame, version)
        .unwrap_or_else(|e| panic!("{key:?} v{version} response: {e}"));
    assert!(
        frame.is_empty(),
        "{key:?} v{version}: {} bytes left after the response",
        frame.len()
    );
    decoded
}

/// An error message as a test compares it: "" when the broker sent none.
pub fn message(m: &Option<StrBytes>) -> String {
    m.as_ref().map(|m| m.to_string()).unwrap_or_default()
}

/// CreateTopics v5 of one topic with replication factor 1: its error code and message.
pub fn create_topic(broker: &Broker, topic: &str, partitions: i32) -> (i16, String) {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse, TopicName};
    let mut s = connect(broker);
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_num_partitions(partitions)
            .with_replication_factor(1)]);
    let resp: CreateTopicsResponse = call(&mut s, ApiKey::CreateTopics, 5, &req);
    let t = &resp.topics[0];
    (t.error_code, message(&t.error_message))
}

/// ListOffsets v5 for the latest offset of partitions `0..partitions` of `topic`, read at
/// `isolation_level` (0 READ_UNCOMMITTED: the high watermark; 1 READ_COMMITTED: the last
/// stable offset): (partition, error code, offset), by partition.
pub fn latest_offsets(
    s: &mut TcpStream,
    topic: &str,
    partitions: i32,
    isolation_level: i8,
) -> Vec<(i32, i16, i64)> {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, ListOffsetsResponse, TopicName};
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation_level)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(
                (0..partitions)
                    .map(|p| {
                        ListOffsetsPartition::default()
                            .with_partition_index(p)
                            .with_timestamp(-1)
                    })
                    .collect(),
            )]);
    let answer: ListOffsetsResponse = call(s, ApiKey::ListOffsets, 5, &request);
    let mut out: Vec<_> = answer.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.error_code, p.offset))
        .collect();
    out.sort();
    out
}
