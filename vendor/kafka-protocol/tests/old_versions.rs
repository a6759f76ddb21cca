//! Wire-format tests for the message versions Kafka 4.0 removed (KIP-896) and this patched copy
//! of the crate adds back so that it serves every version Kafka 3.9 does. See PATCHED.md.
//!
//! Two kinds of test:
//!
//! * hand-built byte vectors, written field by field in the order of Kafka 3.9's JSON message
//!   specs (clients/src/main/resources/common/message/*.json), decoded and checked field by
//!   field, and compared with what the crate encodes;
//! * round trips of a populated message through every version 0..=max of each patched message.

use std::fmt::Debug;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_acls_request::*;
use kafka_protocol::messages::create_acls_response::*;
use kafka_protocol::messages::create_topics_request::*;
use kafka_protocol::messages::create_topics_response::*;
use kafka_protocol::messages::delete_acls_request::*;
use kafka_protocol::messages::delete_acls_response::*;
use kafka_protocol::messages::delete_topics_request::*;
use kafka_protocol::messages::delete_topics_response::*;
use kafka_protocol::messages::describe_acls_request::*;
use kafka_protocol::messages::describe_acls_response::*;
use kafka_protocol::messages::describe_configs_request::*;
use kafka_protocol::messages::describe_configs_response::*;
use kafka_protocol::messages::fetch_request::*;
use kafka_protocol::messages::fetch_response::*;
use kafka_protocol::messages::list_offsets_request::*;
use kafka_protocol::messages::list_offsets_response::*;
use kafka_protocol::messages::offset_commit_request::*;
use kafka_protocol::messages::offset_commit_response::*;
use kafka_protocol::messages::offset_fetch_request::*;
use kafka_protocol::messages::offset_fetch_response::*;
use kafka_protocol::messages::offset_for_leader_epoch_request::*;
use kafka_protocol::messages::offset_for_leader_epoch_response::*;
use kafka_protocol::messages::produce_request::*;
use kafka_protocol::messages::produce_response::*;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message, StrBytes};
use uuid::Uuid;

// ---------------------------------------------------------------------------------------------
// helpers

fn s(x: &'static str) -> StrBytes {
    StrBytes::from_static_str(x)
}

fn topic(x: &'static str) -> TopicName {
    TopicName(s(x))
}

fn encode<T: Encodable>(m: &T, version: i16) -> Vec<u8> {
    let mut buf = BytesMut::new();
    m.encode(&mut buf, version)
        .unwrap_or_else(|e| panic!("encode v{version} failed: {e}"));
    assert_eq!(
        buf.len(),
        m.compute_size(version).unwrap(),
        "compute_size disagrees with the encoded length at v{version}"
    );
    buf.to_vec()
}

fn encode_err<T: Encodable>(m: &T, version: i16) -> String {
    let mut buf = BytesMut::new();
    match m.encode(&mut buf, version) {
        Ok(()) => panic!("encode v{version} should have failed"),
        Err(e) => e.to_string(),
    }
}

fn decode<T: Decodable>(b: &[u8], version: i16) -> T {
    let mut bytes = Bytes::copy_from_slice(b);
    let m =
        T::decode(&mut bytes, version).unwrap_or_else(|e| panic!("decode v{version} failed: {e}"));
    assert!(
        bytes.is_empty(),
        "{} bytes left over after decoding v{version}",
        bytes.len()
    );
    m
}

/// `m` encodes to exactly `wire` at `version`, and `wire` decodes to exactly `m`.
fn check_wire<T: Encodable + Decodable + PartialEq + Debug>(m: &T, version: i16, wire: &[u8]) {
    assert_eq!(encode(m, version), wire, "encoding v{version}");
    assert_eq!(&decode::<T>(wire, version), m, "decoding v{version}");
}

fn round_trip<T: Encodable + Decodable + PartialEq + Debug>(m: &T, version: i16) {
    let wire = encode(m, version);
    let back: T = decode(&wire, version);
    assert_eq!(&back, m, "round trip v{version}");
    assert_eq!(encode(&back, version), wire, "re-encoding v{version}");
}

/// Builds a non-flexible (classic) Kafka wire encoding by hand.
#[derive(Default)]
struct W(Vec<u8>);

impl W {
    fn new() -> Self {
        Self::default()
    }
    fn i8(mut self, x: i8) -> Self {
        self.0.extend_from_slice(&x.to_be_bytes());
        self
    }
    fn bool(self, x: bool) -> Self {
        self.i8(x as i8)
    }
    fn i16(mut self, x: i16) -> Self {
        self.0.extend_from_slice(&x.to_be_bytes());
        self
    }
    fn i32(mut self, x: i32) -> Self {
        self.0.extend_from_slice(&x.to_be_bytes());
        self
    }
    fn i64(mut self, x: i64) -> Self {
        self.0.extend_from_slice(&x.to_be_bytes());
        self
    }
    /// STRING: int16 length, then the UTF-8 bytes.
    fn str(mut self, x: &str) -> Self {
        self = self.i16(x.len() as i16);
        self.0.extend_from_slice(x.as_bytes());
        self
    }
    /// NULLABLE_STRING: length -1 for null.
    fn nstr(self, x: Option<&str>) -> Self {
        match x {
            Some(x) => self.str(x),
            None => self.i16(-1),
        }
    }
    /// NULLABLE_BYTES / RECORDS: int32 length, -1 for null.
    fn nbytes(mut self, x: Option<&[u8]>) -> Self {
        match x {
            Some(x) => {
                self = self.i32(x.len() as i32);
                self.0.extend_from_slice(x);
                self
            }
            None => self.i32(-1),
        }
    }
    /// ARRAY: int32 element count (-1 for a null array).
    fn arr(self, n: i32) -> Self {
        self.i32(n)
    }
    fn done(self) -> Vec<u8> {
        self.0
    }
}

fn hex(h: &str) -> Vec<u8> {
    let h: String = h.split_whitespace().collect();
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
        .collect()
}

const TOPIC_ID: Uuid = Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
const DIR_ID: Uuid = Uuid::from_u128(0xfedc_ba98_7654_3210_fedc_ba98_7654_3210);
const RECORDS: &[u8] = &[0xde, 0xad, 0xbe, 0xef, 0x01];

// ---------------------------------------------------------------------------------------------
// version tables, headers

#[test]
fn version_ranges_cover_kafka_3_9() {
    // (api, min, max the crate can now encode for requests, max for responses): min is 0 for
    // every one of these, max is the larger of Kafka 3.9's and the unpatched crate's.
    fn check<Req: Message, Resp: Message>(key: ApiKey, req_max: i16, resp_max: i16) {
        assert_eq!(
            (Req::VERSIONS.min, Req::VERSIONS.max),
            (0, req_max),
            "{key:?} request"
        );
        assert_eq!(
            (Resp::VERSIONS.min, Resp::VERSIONS.max),
            (0, resp_max),
            "{key:?} response"
        );
        assert_eq!(
            key.valid_versions().min,
            0,
            "{key:?} ApiKey::valid_versions"
        );
        assert_eq!(
            key.valid_versions().max,
            resp_max,
            "{key:?} ApiKey::valid_versions"
        );
    }
    check::<ProduceRequest, ProduceResponse>(ApiKey::Produce, 13, 13);
    check::<FetchRequest, FetchResponse>(ApiKey::Fetch, 18, 18);
    check::<ListOffsetsRequest, ListOffsetsResponse>(ApiKey::ListOffsets, 10, 10);
    // OffsetCommit and OffsetFetch v10 are "latestVersionUnstable" requests in Kafka 4.1: the
    // generator leaves them out of the request (as the unpatched crate did).
    check::<OffsetCommitRequest, OffsetCommitResponse>(ApiKey::OffsetCommit, 9, 10);
    check::<OffsetFetchRequest, OffsetFetchResponse>(ApiKey::OffsetFetch, 9, 10);
    check::<CreateTopicsRequest, CreateTopicsResponse>(ApiKey::CreateTopics, 7, 7);
    check::<DeleteTopicsRequest, DeleteTopicsResponse>(ApiKey::DeleteTopics, 6, 6);
    check::<DescribeConfigsRequest, DescribeConfigsResponse>(ApiKey::DescribeConfigs, 4, 4);
    check::<OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse>(
        ApiKey::OffsetForLeaderEpoch,
        4,
        4,
    );
    check::<DescribeAclsRequest, DescribeAclsResponse>(ApiKey::DescribeAcls, 3, 3);
    check::<CreateAclsRequest, CreateAclsResponse>(ApiKey::CreateAcls, 3, 3);
    check::<DeleteAclsRequest, DeleteAclsResponse>(ApiKey::DeleteAcls, 3, 3);
    check::<WriteTxnMarkersRequest, WriteTxnMarkersResponse>(ApiKey::WriteTxnMarkers, 1, 1);

    // The re-added versions are marked deprecated (Kafka removed them in 4.0).
    let dep = |r: Option<kafka_protocol::protocol::VersionRange>| r.map(|r| (r.min, r.max));
    assert_eq!(dep(ProduceRequest::DEPRECATED_VERSIONS), Some((0, 2)));
    assert_eq!(dep(FetchRequest::DEPRECATED_VERSIONS), Some((0, 3)));
    assert_eq!(dep(ListOffsetsRequest::DEPRECATED_VERSIONS), Some((0, 0)));
    assert_eq!(dep(OffsetCommitRequest::DEPRECATED_VERSIONS), Some((0, 1)));
    assert_eq!(dep(OffsetFetchRequest::DEPRECATED_VERSIONS), Some((0, 0)));
    assert_eq!(dep(CreateTopicsRequest::DEPRECATED_VERSIONS), Some((0, 1)));
    assert_eq!(dep(DeleteTopicsRequest::DEPRECATED_VERSIONS), Some((0, 0)));
    assert_eq!(
        dep(DescribeConfigsRequest::DEPRECATED_VERSIONS),
        Some((0, 0))
    );
    assert_eq!(
        dep(OffsetForLeaderEpochRequest::DEPRECATED_VERSIONS),
        Some((0, 1))
    );
    assert_eq!(dep(DescribeAclsRequest::DEPRECATED_VERSIONS), Some((0, 0)));
    assert_eq!(dep(CreateAclsRequest::DEPRECATED_VERSIONS), Some((0, 0)));
    assert_eq!(dep(DeleteAclsRequest::DEPRECATED_VERSIONS), Some((0, 0)));
    assert_eq!(
        dep(WriteTxnMarkersRequest::DEPRECATED_VERSIONS),
        Some((0, 0))
    );
    assert_eq!(dep(ProduceResponse::DEPRECATED_VERSIONS), None);
    assert_eq!(dep(DescribeAclsResponse::DEPRECATED_VERSIONS), None);
    assert_eq!(dep(CreateAclsResponse::DEPRECATED_VERSIONS), None);
    assert_eq!(dep(DeleteAclsResponse::DEPRECATED_VERSIONS), None);
}

#[test]
fn old_versions_use_the_classic_headers() {
    // (api, first flexible version in Kafka 3.9's spec)
    let apis = [
        (ApiKey::Produce, 9),
        (ApiKey::Fetch, 12),
        (ApiKey::ListOffsets, 6),
        (ApiKey::OffsetCommit, 8),
        (ApiKey::OffsetFetch, 6),
        (ApiKey::CreateTopics, 5),
        (ApiKey::DeleteTopics, 4),
        (ApiKey::DescribeConfigs, 4),
        (ApiKey::OffsetForLeaderEpoch, 4),
        (ApiKey::DescribeAcls, 2),
        (ApiKey::CreateAcls, 2),
        (ApiKey::DeleteAcls, 2),
    ];
    for (key, flexible) in apis {
        for v in 0..=key.valid_versions().max {
            let (req, resp) = if v >= flexible { (2, 1) } else { (1, 0) };
            assert_eq!(
                key.request_header_version(v),
                req,
                "{key:?} v{v} request header"
            );
            assert_eq!(
                key.response_header_version(v),
                resp,
                "{key:?} v{v} response header"
            );
        }
    }
    assert_eq!(ProduceRequest::header_version(0), 1);
    assert_eq!(FetchResponse::header_version(3), 0);
}

#[test]
fn produce_v0_frame_with_header() {
    // A whole request as a v0 client sends it: request header v1 (api key, api version,
    // correlation id, client id), then the body.
    let wire = W::new()
        .i16(0) // api key: Produce
        .i16(0) // api version
        .i32(7) // correlation id
        .nstr(Some("cli"))
        .i16(1) // acks
        .i32(1000)
        .arr(1)
        .str("t")
        .arr(1)
        .i32(0)
        .nbytes(Some(RECORDS))
        .done();
    let mut buf = Bytes::from(wire);
    let header =
        RequestHeader::decode(&mut buf, ApiKey::Produce.request_header_version(0)).unwrap();
    assert_eq!(header.request_api_key, 0);
    assert_eq!(header.request_api_version, 0);
    assert_eq!(header.correlation_id, 7);
    assert_eq!(header.client_id.as_deref(), Some("cli"));
    let body = ProduceRequest::decode(&mut buf, 0).unwrap();
    assert!(buf.is_empty());
    assert_eq!(body.acks, 1);
    assert_eq!(
        body.topic_data[0].partition_data[0].records.as_deref(),
        Some(RECORDS)
    );
}

// ---------------------------------------------------------------------------------------------
// Produce

#[test]
fn produce_request_v0_to_v2_bytes() {
    // ProduceRequest v0-2: Acks int16, TimeoutMs int32,
    // TopicData [Name string, PartitionData [Index int32, Records records(nullable bytes)]]
    let wire = hex("0001 00000bb8 \
         00000001 0006 6f7264657273 \
           00000002 \
             00000002 00000005 deadbeef01 \
             00000003 ffffffff");
    let m = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(3000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic("orders"))
            .with_partition_data(vec![
                PartitionProduceData::default()
                    .with_index(2)
                    .with_records(Some(Bytes::from_static(RECORDS))),
                PartitionProduceData::default()
                    .with_index(3)
                    .with_records(None),
            ])]);
    for v in 0..=2 {
        check_wire(&m, v, &wire);
    }
    let decoded: ProduceRequest = decode(&wire, 0);
    assert_eq!(decoded.acks, 1);
    assert_eq!(decoded.timeout_ms, 3000);
    assert_eq!(decoded.transactional_id, None);
    assert_eq!(decoded.topic_data[0].name, topic("orders"));
    assert_eq!(decoded.topic_data[0].partition_data[1].records, None);

    // v3 puts the (nullable) transactional id in front.
    let mut v3 = hex("ffff");
    v3.extend_from_slice(&wire);
    check_wire(&m, 3, &v3);

    // A transactional id cannot be sent before v3.
    let txn = m
        .clone()
        .with_transactional_id(Some(TransactionalId(s("tx"))));
    assert!(encode_err(&txn, 2).contains("not available"));
}

#[test]
fn produce_response_v0_to_v2_bytes() {
    // v0: Responses [Name, PartitionResponses [Index int32, ErrorCode int16, BaseOffset int64]]
    // v1: + ThrottleTimeMs int32 (after Responses)
    // v2: + LogAppendTimeMs int64 (after BaseOffset)
    let part = PartitionProduceResponse::default()
        .with_index(4)
        .with_error_code(0)
        .with_base_offset(1234);
    let resp = |p: PartitionProduceResponse, throttle: i32| {
        ProduceResponse::default()
            .with_responses(vec![TopicProduceResponse::default()
                .with_name(topic("t"))
                .with_partition_responses(vec![p])])
            .with_throttle_time_ms(throttle)
    };
    let body = || W::new().arr(1).str("t").arr(1).i32(4).i16(0).i64(1234);

    check_wire(&resp(part.clone(), 0), 0, &body().done());
    check_wire(&resp(part.clone(), 25), 1, &body().i32(25).done());
    let p2 = part.clone().with_log_append_time_ms(1_700_000_000_000);
    check_wire(
        &resp(p2.clone(), 25),
        2,
        &body().i64(1_700_000_000_000).i32(25).done(),
    );

    // Fields a version lacks are ignorable: they are dropped on encode, default on decode.
    assert_eq!(encode(&resp(p2, 25), 0), body().done());
    let decoded: ProduceResponse = decode(&body().done(), 0);
    let p = &decoded.responses[0].partition_responses[0];
    assert_eq!((p.index, p.error_code, p.base_offset), (4, 0, 1234));
    assert_eq!(p.log_append_time_ms, -1);
    assert_eq!(decoded.throttle_time_ms, 0);
}

fn produce_request_sample(v: i16) -> ProduceRequest {
    let mut t = TopicProduceData::default().with_partition_data(vec![
        PartitionProduceData::default()
            .with_index(2)
            .with_records(Some(Bytes::from_static(RECORDS))),
        PartitionProduceData::default()
            .with_index(3)
            .with_records(None),
    ]);
    if v <= 12 {
        t.name = topic("orders");
    } else {
        t.topic_id = TOPIC_ID;
    }
    let mut m = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(3000)
        .with_topic_data(vec![t]);
    if v >= 3 {
        m.transactional_id = Some(TransactionalId(s("txn")));
    }
    m
}

fn produce_response_sample(v: i16) -> ProduceResponse {
    let mut p = PartitionProduceResponse::default()
        .with_index(1)
        .with_error_code(6)
        .with_base_offset(42);
    if v >= 2 {
        p.log_append_time_ms = 1_700_000_000_000;
    }
    if v >= 5 {
        p.log_start_offset = 7;
    }
    if v >= 8 {
        p.record_errors = vec![BatchIndexAndErrorMessage::default()
            .with_batch_index(3)
            .with_batch_index_error_message(Some(s("bad record")))];
        p.error_message = Some(s("oops"));
    }
    if v >= 10 {
        p.current_leader = produce_response::LeaderIdAndEpoch::default()
            .with_leader_id(BrokerId(5))
            .with_leader_epoch(9);
    }
    let mut t = TopicProduceResponse::default().with_partition_responses(vec![p]);
    if v <= 12 {
        t.name = topic("orders");
    } else {
        t.topic_id = TOPIC_ID;
    }
    let mut m = ProduceResponse::default().with_responses(vec![t]);
    if v >= 1 {
        m.throttle_time_ms = 10;
    }
    if v >= 10 {
        m.node_endpoints = vec![produce_response::NodeEndpoint::default()
            .with_node_id(BrokerId(5))
            .with_host(s("broker5"))
            .with_port(9092)
            .with_rack(Some(s("r1")))];
    }
    m
}

#[test]
fn produce_round_trips_every_version() {
    for v in 0..=ProduceRequest::VERSIONS.max {
        round_trip(&produce_request_sample(v), v);
    }
    for v in 0..=ProduceResponse::VERSIONS.max {
        round_trip(&produce_response_sample(v), v);
    }
}

// ---------------------------------------------------------------------------------------------
// Fetch

#[test]
fn fetch_request_v0_to_v3_bytes() {
    // v0-2: ReplicaId int32, MaxWaitMs int32, MinBytes int32,
    //       Topics [Topic string, Partitions [Partition int32, FetchOffset int64,
    //                                         PartitionMaxBytes int32]]
    // v3:   + MaxBytes int32 after MinBytes
    let m = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(500)
        .with_min_bytes(1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic("t"))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(2)
                .with_fetch_offset(100)
                .with_partition_max_bytes(1 << 20)])]);
    let head = || W::new().i32(-1).i32(500).i32(1);
    let tail = |w: W| w.arr(1).str("t").arr(1).i32(2).i64(100).i32(1 << 20).done();
    for v in 0..=2 {
        check_wire(&m, v, &tail(head()));
    }
    let m3 = m.clone().with_max_bytes(52_428_800);
    check_wire(&m3, 3, &tail(head().i32(52_428_800)));
    // v4 adds IsolationLevel int8.
    check_wire(&m3, 4, &tail(head().i32(52_428_800).i8(0)));

    let decoded: FetchRequest = decode(&tail(head()), 0);
    assert_eq!(decoded.max_bytes, 0x7fffffff);
    assert_eq!(decoded.topics[0].partitions[0].fetch_offset, 100);
}

#[test]
fn fetch_response_v0_to_v3_bytes() {
    // v0:   Responses [Topic string, Partitions [PartitionIndex int32, ErrorCode int16,
    //                                            HighWatermark int64, Records nullable bytes]]
    // v1-3: ThrottleTimeMs int32 first
    let m = |throttle: i32| {
        FetchResponse::default()
            .with_throttle_time_ms(throttle)
            .with_responses(vec![FetchableTopicResponse::default()
                .with_topic(topic("t"))
                .with_partitions(vec![PartitionData::default()
                    .with_partition_index(0)
                    .with_error_code(0)
                    .with_high_watermark(200)
                    .with_records(Some(Bytes::from_static(RECORDS)))])])
    };
    let body = |w: W| {
        w.arr(1)
            .str("t")
            .arr(1)
            .i32(0)
            .i16(0)
            .i64(200)
            .nbytes(Some(RECORDS))
            .done()
    };
    check_wire(&m(0), 0, &body(W::new()));
    for v in 1..=3 {
        check_wire(&m(12), v, &body(W::new().i32(12)));
    }
    let decoded: FetchResponse = decode(&body(W::new()), 0);
    let p = &decoded.responses[0].partitions[0];
    assert_eq!(p.high_watermark, 200);
    assert_eq!(p.last_stable_offset, -1);
    assert_eq!(p.records.as_deref(), Some(RECORDS));
}

fn fetch_request_sample(v: i16) -> FetchRequest {
    let mut p = FetchPartition::default()
        .with_partition(0)
        .with_fetch_offset(100)
        .with_partition_max_bytes(65536);
    if v >= 9 {
        p.current_leader_epoch = 4;
    }
    if v >= 12 {
        p.last_fetched_epoch = 3;
    }
    if v >= 5 {
        p.log_start_offset = 1;
    }
    if v >= 17 {
        p.replica_directory_id = DIR_ID;
    }
    if v >= 18 {
        p.high_watermark = 55;
    }
    let mut t = FetchTopic::default().with_partitions(vec![p]);
    if v <= 12 {
        t.topic = topic("t");
    } else {
        t.topic_id = TOPIC_ID;
    }
    let mut m = FetchRequest::default()
        .with_max_wait_ms(500)
        .with_min_bytes(1)
        .with_topics(vec![t]);
    if v <= 14 {
        m.replica_id = BrokerId(3);
    } else {
        m.replica_state = ReplicaState::default()
            .with_replica_id(BrokerId(3))
            .with_replica_epoch(11);
    }
    if v >= 3 {
        m.max_bytes = 1 << 20;
    }
    if v >= 4 {
        m.isolation_level = 1;
    }
    if v >= 7 {
        m.session_id = 77;
        m.session_epoch = 2;
        let mut f = ForgottenTopic::default().with_partitions(vec![1, 2]);
        if v <= 12 {
            f.topic = topic("gone");
        } else {
            f.topic_id = TOPIC_ID;
        }
        m.forgotten_topics_data = vec![f];
    }
    if v >= 11 {
        m.rack_id = s("rack1");
    }
    if v >= 12 {
        m.cluster_id = Some(s("cluster"));
    }
    m
}

fn fetch_response_sample(v: i16) -> FetchResponse {
    let mut p = PartitionData::default()
        .with_partition_index(0)
        .with_error_code(0)
        .with_high_watermark(200)
        .with_records(Some(Bytes::from_static(RECORDS)));
    if v >= 4 {
        p.last_stable_offset = 150;
        p.aborted_transactions = Some(vec![AbortedTransaction::default()
            .with_producer_id(ProducerId(9))
            .with_first_offset(120)]);
    }
    if v >= 5 {
        p.log_start_offset = 10;
    }
    if v >= 11 {
        p.preferred_read_replica = BrokerId(2);
    }
    if v >= 12 {
        p.diverging_epoch = fetch_response::EpochEndOffset::default()
            .with_epoch(2)
            .with_end_offset(90);
        p.current_leader = fetch_response::LeaderIdAndEpoch::default()
            .with_leader_id(BrokerId(1))
            .with_leader_epoch(2);
        p.snapshot_id = SnapshotId::default().with_end_offset(5).with_epoch(1);
    }
    let mut t = FetchableTopicResponse::default().with_partitions(vec![p]);
    if v <= 12 {
        t.topic = topic("t");
    } else {
        t.topic_id = TOPIC_ID;
    }
    let mut m = FetchResponse::default().with_responses(vec![t]);
    if v >= 1 {
        m.throttle_time_ms = 5;
    }
    if v >= 7 {
        m.error_code = 1;
        m.session_id = 77;
    }
    if v >= 16 {
        m.node_endpoints = vec![fetch_response::NodeEndpoint::default()
            .with_node_id(BrokerId(1))
            .with_host(s("b1"))
            .with_port(9092)
            .with_rack(None)];
    }
    m
}

#[test]
fn fetch_round_trips_every_version() {
    for v in 0..=FetchRequest::VERSIONS.max {
        round_trip(&fetch_request_sample(v), v);
    }
    for v in 0..=FetchResponse::VERSIONS.max {
        round_trip(&fetch_response_sample(v), v);
    }
}

// ---------------------------------------------------------------------------------------------
// ListOffsets

#[test]
fn list_offsets_request_v0_bytes() {
    // v0: ReplicaId int32,
    //     Topics [Name string, Partitions [PartitionIndex int32, Timestamp int64,
    //                                      MaxNumOffsets int32]]
    let wire = W::new()
        .i32(-1)
        .arr(1)
        .str("t")
        .arr(1)
        .i32(3)
        .i64(-2) // earliest
        .i32(5)
        .done();
    let m = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic("t"))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(3)
                .with_timestamp(-2)
                .with_max_num_offsets(5)])]);
    check_wire(&m, 0, &wire);
    let decoded: ListOffsetsRequest = decode(&wire, 0);
    assert_eq!(decoded.topics[0].partitions[0].max_num_offsets, 5);

    // v1 has no MaxNumOffsets; it is not ignorable, so a non-default value is refused...
    assert!(encode_err(&m, 1).contains("not available"));
    // ...and the default (1) is what v1+ decodes to.
    let mut m1 = m.clone();
    m1.topics[0].partitions[0].max_num_offsets = 1;
    let v1 = W::new()
        .i32(-1)
        .arr(1)
        .str("t")
        .arr(1)
        .i32(3)
        .i64(-2)
        .done();
    check_wire(&m1, 1, &v1);
}

#[test]
fn list_offsets_response_v0_bytes() {
    // v0: Topics [Name string, Partitions [PartitionIndex int32, ErrorCode int16,
    //                                      OldStyleOffsets [int64]]]
    let wire = hex("00000001 0001 74 \
           00000001 \
             00000003 0000 \
             00000002 0000000000000064 0000000000000032");
    let m = ListOffsetsResponse::default().with_topics(vec![ListOffsetsTopicResponse::default()
        .with_name(topic("t"))
        .with_partitions(vec![ListOffsetsPartitionResponse::default()
            .with_partition_index(3)
            .with_error_code(0)
            .with_old_style_offsets(vec![100, 50])])]);
    check_wire(&m, 0, &wire);
    let decoded: ListOffsetsResponse = decode(&wire, 0);
    let p = &decoded.topics[0].partitions[0];
    assert_eq!(p.old_style_offsets, vec![100, 50]);
    assert_eq!((p.timestamp, p.offset), (-1, -1));

    // OldStyleOffsets exists in v0 only; Timestamp and Offset only from v1, and neither is
    // ignorable in Kafka 3.9's spec.
    assert!(encode_err(&m, 1).contains("not available"));
    let mut with_offset = m.clone();
    with_offset.topics[0].partitions[0].offset = 100;
    assert!(encode_err(&with_offset, 0).contains("not available"));

    // v1: PartitionIndex, ErrorCode, Timestamp int64, Offset int64
    let m1 = ListOffsetsResponse::default().with_topics(vec![ListOffsetsTopicResponse::default()
        .with_name(topic("t"))
        .with_partitions(vec![ListOffsetsPartitionResponse::default()
            .with_partition_index(3)
            .with_timestamp(1_700_000_000_000)
            .with_offset(100)])]);
    let v1 = W::new()
        .arr(1)
        .str("t")
        .arr(1)
        .i32(3)
        .i16(0)
        .i64(1_700_000_000_000)
        .i64(100)
        .done();
    check_wire(&m1, 1, &v1);
}

fn list_offsets_request_sample(v: i16) -> ListOffsetsRequest {
    let mut p = ListOffsetsPartition::default()
        .with_partition_index(0)
        .with_timestamp(-1);
    if v == 0 {
        p.max_num_offsets = 3;
    }
    if v >= 4 {
        p.current_leader_epoch = 5;
    }
    let mut m = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic("t"))
            .with_partitions(vec![p])]);
    if v >= 2 {
        m.isolation_level = 1;
    }
    if v >= 10 {
        m.timeout_ms = 1000;
    }
    m
}

fn list_offsets_response_sample(v: i16) -> ListOffsetsResponse {
    let mut p = ListOffsetsPartitionResponse::default()
        .with_partition_index(0)
        .with_error_code(0);
    if v == 0 {
        p.old_style_offsets = vec![100, 50];
    } else {
        p.timestamp = 1_700_000_000_000;
        p.offset = 100;
    }
    if v >= 4 {
        p.leader_epoch = 2;
    }
    let mut m =
        ListOffsetsResponse::default().with_topics(vec![ListOffsetsTopicResponse::default()
            .with_name(topic("t"))
            .with_partitions(vec![p])]);
    if v >= 2 {
        m.throttle_time_ms = 3;
    }
    m
}

#[test]
fn list_offsets_round_trips_every_version() {
    for v in 0..=ListOffsetsRequest::VERSIONS.max {
        round_trip(&list_offsets_request_sample(v), v);
    }
    for v in 0..=ListOffsetsResponse::VERSIONS.max {
        round_trip(&list_offsets_response_sample(v), v);
    }
}

// ---------------------------------------------------------------------------------------------
// OffsetCommit

#[test]
fn offset_commit_request_v0_v1_bytes() {
    // v0: GroupId string,
    //     Topics [Name string, Partitions [PartitionIndex int32, CommittedOffset int64,
    //                                      CommittedMetadata nullable string]]
    let part = OffsetCommitRequestPartition::default()
        .with_partition_index(1)
        .with_committed_offset(10)
        .with_committed_metadata(Some(s("md")));
    let m0 = OffsetCommitRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(topic("t"))
            .with_partitions(vec![part.clone()])]);
    let v0 = W::new()
        .str("g")
        .arr(1)
        .str("t")
        .arr(1)
        .i32(1)
        .i64(10)
        .nstr(Some("md"))
        .done();
    check_wire(&m0, 0, &v0);

    // v1: GroupId, GenerationIdOrMemberEpoch int32, MemberId string,
    //     Topics [Name, Partitions [PartitionIndex, CommittedOffset, CommitTimestamp int64,
    //                               CommittedMetadata]]
    let m1 = OffsetCommitRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_generation_id_or_member_epoch(4)
        .with_member_id(s("member-1"))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(topic("t"))
            .with_partitions(vec![part
                .clone()
                .with_commit_timestamp(1_700_000_000_000)])]);
    let v1 = W::new()
        .str("g")
        .i32(4)
        .str("member-1")
        .arr(1)
        .str("t")
        .arr(1)
        .i32(1)
        .i64(10)
        .i64(1_700_000_000_000)
        .nstr(Some("md"))
        .done();
    check_wire(&m1, 1, &v1);
    let decoded: OffsetCommitRequest = decode(&v1, 1);
    assert_eq!(decoded.generation_id_or_member_epoch, 4);
    assert_eq!(decoded.member_id, s("member-1"));
    assert_eq!(
        decoded.topics[0].partitions[0].commit_timestamp,
        1_700_000_000_000
    );
    assert_eq!(decoded.retention_time_ms, -1);

    // CommitTimestamp is v1 only and not ignorable.
    assert!(encode_err(&m1, 0).contains("not available"));
    assert!(encode_err(&m1, 2).contains("not available"));
    // The generation id and member id are ignorable: v0 drops them.
    let mut m1_no_ts = m1.clone();
    m1_no_ts.topics[0].partitions[0].commit_timestamp = -1;
    assert_eq!(encode(&m1_no_ts, 0), v0);
    // A v0 decode leaves them at their defaults.
    let decoded: OffsetCommitRequest = decode(&v0, 0);
    assert_eq!(decoded.generation_id_or_member_epoch, -1);
    assert_eq!(decoded.member_id, s(""));

    // v2 replaces CommitTimestamp with a request-level RetentionTimeMs int64 after MemberId.
    let m2 = m1_no_ts.clone().with_retention_time_ms(86_400_000);
    let v2 = W::new()
        .str("g")
        .i32(4)
        .str("member-1")
        .i64(86_400_000)
        .arr(1)
        .str("t")
        .arr(1)
        .i32(1)
        .i64(10)
        .nstr(Some("md"))
        .done();
    check_wire(&m2, 2, &v2);
}

#[test]
fn offset_commit_response_v0_v1_bytes() {
    // v0-1: Topics [Name string, Partitions [PartitionIndex int32, ErrorCode int16]]
    let m = OffsetCommitResponse::default().with_topics(vec![OffsetCommitResponseTopic::default()
        .with_name(topic("t"))
        .with_partitions(vec![
            OffsetCommitResponsePartition::default()
                .with_partition_index(0)
                .with_error_code(0),
            OffsetCommitResponsePartition::default()
                .with_partition_index(1)
                .with_error_code(27),
        ])]);
    let wire = W::new()
        .arr(1)
        .str("t")
        .arr(2)
        .i32(0)
        .i16(0)
        .i32(1)
        .i16(27)
        .done();
    check_wire(&m, 0, &wire);
    check_wire(&m, 1, &wire);
    // v3 adds ThrottleTimeMs in front.
    let mut v3 = W::new().i32(0).done();
    v3.extend_from_slice(&wire);
    check_wire(&m, 3, &v3);
}

fn offset_commit_request_sample(v: i16) -> OffsetCommitRequest {
    let mut p = OffsetCommitRequestPartition::default()
        .with_partition_index(0)
        .with_committed_offset(10)
        .with_committed_metadata(Some(s("md")));
    if v >= 6 {
        p.committed_leader_epoch = 3;
    }
    if v == 1 {
        p.commit_timestamp = 1_700_000_000_000;
    }
    let mut m = OffsetCommitRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(topic("t"))
            .with_partitions(vec![p])]);
    if v >= 1 {
        m.generation_id_or_member_epoch = 4;
        m.member_id = s("m");
    }
    if v >= 7 {
        m.group_instance_id = Some(s("instance"));
    }
    if (2..=4).contains(&v) {
        m.retention_time_ms = 60_000;
    }
    m
}

fn offset_commit_response_sample(v: i16) -> OffsetCommitResponse {
    let mut t = OffsetCommitResponseTopic::default().with_partitions(vec![
        OffsetCommitResponsePartition::default()
            .with_partition_index(0)
            .with_error_code(25),
    ]);
    if v <= 9 {
        t.name = topic("t");
    } else {
        t.topic_id = TOPIC_ID;
    }
    let mut m = OffsetCommitResponse::default().with_topics(vec![t]);
    if v >= 3 {
        m.throttle_time_ms = 1;
    }
    m
}

#[test]
fn offset_commit_round_trips_every_version() {
    for v in 0..=OffsetCommitRequest::VERSIONS.max {
        round_trip(&offset_commit_request_sample(v), v);
    }
    for v in 0..=OffsetCommitResponse::VERSIONS.max {
        round_trip(&offset_commit_response_sample(v), v);
    }
}

// ---------------------------------------------------------------------------------------------
// OffsetFetch

#[test]
fn offset_fetch_v0_bytes() {
    // request v0-1: GroupId string, Topics [Name string, PartitionIndexes [int32]]
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(topic("t"))
            .with_partition_indexes(vec![0, 1])]));
    let wire = W::new()
        .str("g")
        .arr(1)
        .str("t")
        .arr(2)
        .i32(0)
        .i32(1)
        .done();
    check_wire(&req, 0, &wire);
    check_wire(&req, 1, &wire);

    // response v0-1: Topics [Name string, Partitions [PartitionIndex int32,
    //                CommittedOffset int64, Metadata nullable string, ErrorCode int16]]
    let resp =
        OffsetFetchResponse::default().with_topics(vec![OffsetFetchResponseTopic::default()
            .with_name(topic("t"))
            .with_partitions(vec![
                OffsetFetchResponsePartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(42)
                    .with_metadata(Some(s("md")))
                    .with_error_code(0),
                OffsetFetchResponsePartition::default()
                    .with_partition_index(1)
                    .with_committed_offset(-1)
                    .with_metadata(None)
                    .with_error_code(0),
            ])]);
    let wire = W::new()
        .arr(1)
        .str("t")
        .arr(2)
        .i32(0)
        .i64(42)
        .nstr(Some("md"))
        .i16(0)
        .i32(1)
        .i64(-1)
        .nstr(None)
        .i16(0)
        .done();
    check_wire(&resp, 0, &wire);
    check_wire(&resp, 1, &wire);
    let decoded: OffsetFetchResponse = decode(&wire, 0);
    assert_eq!(decoded.topics[0].partitions[0].committed_offset, 42);
    assert_eq!(decoded.topics[0].partitions[1].metadata, None);
    // v2 adds the top-level ErrorCode int16 after Topics.
    let mut v2 = wire.clone();
    v2.extend_from_slice(&W::new().i16(0).done());
    check_wire(&resp, 2, &v2);
}

fn offset_fetch_request_sample(v: i16) -> OffsetFetchRequest {
    let mut m = OffsetFetchRequest::default();
    if v <= 7 {
        m.group_id = GroupId(s("g"));
        m.topics = Some(vec![OffsetFetchRequestTopic::default()
            .with_name(topic("t"))
            .with_partition_indexes(vec![0, 1])]);
    } else {
        let mut g = OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(s("g")))
            .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                .with_name(topic("t"))
                .with_partition_indexes(vec![0])]));
        if v >= 9 {
            g.member_id = Some(s("m"));
            g.member_epoch = 3;
        }
        m.groups = vec![g];
    }
    if v >= 7 {
        m.require_stable = true;
    }
    m
}

fn offset_fetch_response_sample(v: i16) -> OffsetFetchResponse {
    let mut m = OffsetFetchResponse::default();
    if v >= 3 {
        m.throttle_time_ms = 2;
    }
    if v <= 7 {
        let mut p = OffsetFetchResponsePartition::default()
            .with_partition_index(0)
            .with_committed_offset(5)
            .with_metadata(Some(s("md")))
            .with_error_code(0);
        if v >= 5 {
            p.committed_leader_epoch = 1;
        }
        m.topics = vec![OffsetFetchResponseTopic::default()
            .with_name(topic("t"))
            .with_partitions(vec![p])];
        if v >= 2 {
            m.error_code = 15;
        }
    } else {
        let mut t = OffsetFetchResponseTopics::default().with_partitions(vec![
            OffsetFetchResponsePartitions::default()
                .with_partition_index(0)
                .with_committed_offset(5)
                .with_committed_leader_epoch(1)
                .with_metadata(None)
                .with_error_code(0),
        ]);
        if v <= 9 {
            t.name = topic("t");
        } else {
            t.topic_id = TOPIC_ID;
        }
        m.groups = vec![OffsetFetchResponseGroup::default()
            .with_group_id(GroupId(s("g")))
            .with_topics(vec![t])
            .with_error_code(0)];
    }
    m
}

#[test]
fn offset_fetch_round_trips_every_version() {
    for v in 0..=OffsetFetchRequest::VERSIONS.max {
        round_trip(&offset_fetch_request_sample(v), v);
    }
    for v in 0..=OffsetFetchResponse::VERSIONS.max {
        round_trip(&offset_fetch_response_sample(v), v);
    }
}

// ---------------------------------------------------------------------------------------------
// CreateTopics

#[test]
fn create_topics_v0_v1_bytes() {
    // request v0: Topics [Name string, NumPartitions int32, ReplicationFactor int16,
    //                     Assignments [PartitionIndex int32, BrokerIds [int32]],
    //                     Configs [Name string, Value nullable string]],
    //             timeoutMs int32
    // request v1: + validateOnly bool
    let req = |validate: bool| {
        CreateTopicsRequest::default()
            .with_topics(vec![CreatableTopic::default()
                .with_name(topic("t"))
                .with_num_partitions(-1)
                .with_replication_factor(-1)
                .with_assignments(vec![CreatableReplicaAssignment::default()
                    .with_partition_index(0)
                    .with_broker_ids(vec![BrokerId(1), BrokerId(2)])])
                .with_configs(vec![CreatableTopicConfig::default()
                    .with_name(s("cleanup.policy"))
                    .with_value(Some(s("compact")))])])
            .with_timeout_ms(5000)
            .with_validate_only(validate)
    };
    let body = || {
        W::new()
            .arr(1)
            .str("t")
            .i32(-1)
            .i16(-1)
            .arr(1)
            .i32(0)
            .arr(2)
            .i32(1)
            .i32(2)
            .arr(1)
            .str("cleanup.policy")
            .nstr(Some("compact"))
            .i32(5000)
    };
    check_wire(&req(false), 0, &body().done());
    check_wire(&req(true), 1, &body().bool(true).done());
    // validateOnly is not ignorable.
    assert!(encode_err(&req(true), 0).contains("not available"));

    // response v0: Topics [Name string, ErrorCode int16]
    // response v1: Topics [Name, ErrorCode, ErrorMessage nullable string]
    let resp = CreateTopicsResponse::default().with_topics(vec![CreatableTopicResult::default()
        .with_name(topic("t"))
        .with_error_code(36)
        .with_error_message(Some(s("exists")))]);
    let v1 = W::new().arr(1).str("t").i16(36).nstr(Some("exists")).done();
    check_wire(&resp, 1, &v1);
    let v0 = W::new().arr(1).str("t").i16(36).done();
    // ErrorMessage is ignorable: v0 drops it...
    assert_eq!(encode(&resp, 0), v0);
    // ...and decodes to the field's default.
    let decoded: CreateTopicsResponse = decode(&v0, 0);
    assert_eq!(decoded.topics[0].error_code, 36);
    assert_eq!(
        decoded.topics[0].error_message,
        CreatableTopicResult::default().error_message
    );
    // v2 adds ThrottleTimeMs in front.
    let v2 = W::new()
        .i32(0)
        .arr(1)
        .str("t")
        .i16(36)
        .nstr(Some("exists"))
        .done();
    check_wire(&resp, 2, &v2);
}

fn create_topics_request_sample(v: i16) -> CreateTopicsRequest {
    let mut m = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(topic("t"))
            .with_num_partitions(3)
            .with_replication_factor(1)
            .with_assignments(vec![CreatableReplicaAssignment::default()
                .with_partition_index(0)
                .with_broker_ids(vec![BrokerId(1), BrokerId(2)])])
            .with_configs(vec![CreatableTopicConfig::default()
                .with_name(s("retention.ms"))
                .with_value(None)])])
        .with_timeout_ms(5000);
    if v >= 1 {
        m.validate_only = true;
    }
    m
}

fn create_topics_response_sample(v: i16) -> CreateTopicsResponse {
    let mut t = CreatableTopicResult::default()
        .with_name(topic("t"))
        .with_error_code(0);
    if v >= 1 {
        t.error_message = Some(s("msg"));
    }
    if v >= 5 {
        t.topic_config_error_code = 1;
        t.num_partitions = 3;
        t.replication_factor = 1;
        t.configs = Some(vec![CreatableTopicConfigs::default()
            .with_name(s("retention.ms"))
            .with_value(Some(s("1000")))
            .with_read_only(false)
            .with_config_source(5)
            .with_is_sensitive(false)]);
    }
    if v >= 7 {
        t.topic_id = TOPIC_ID;
    }
    let mut m = CreateTopicsResponse::default().with_topics(vec![t]);
    if v >= 2 {
        m.throttle_time_ms = 4;
    }
    m
}

#[test]
fn create_topics_round_trips_every_version() {
    for v in 0..=CreateTopicsRequest::VERSIONS.max {
        round_trip(&create_topics_request_sample(v), v);
    }
    for v in 0..=CreateTopicsResponse::VERSIONS.max {
        round_trip(&create_topics_response_sample(v), v);
    }
}

// ---------------------------------------------------------------------------------------------
// DeleteTopics

#[test]
fn delete_topics_v0_bytes() {
    // request v0: TopicNames [string], TimeoutMs int32
    let req = DeleteTopicsRequest::default()
        .with_topic_names(vec![topic("a"), topic("bb")])
        .with_timeout_ms(1000);
    let wire = W::new().arr(2).str("a").str("bb").i32(1000).done();
    check_wire(&req, 0, &wire);
    check_wire(&req, 1, &wire);

    // response v0: Responses [Name string, ErrorCode int16]; v1 adds ThrottleTimeMs in front
    let resp = DeleteTopicsResponse::default()
        .with_responses(vec![DeletableTopicResult::default()
            .with_name(Some(topic("a")))
            .with_error_code(3)]);
    let v0 = W::new().arr(1).str("a").i16(3).done();
    check_wire(&resp, 0, &v0);
    let v1 = W::new().i32(0).arr(1).str("a").i16(3).done();
    check_wire(&resp, 1, &v1);
    let decoded: DeleteTopicsResponse = decode(&v0, 0);
    assert_eq!(decoded.responses[0].name, Some(topic("a")));
    assert_eq!(decoded.responses[0].error_code, 3);
}

fn delete_topics_request_sample(v: i16) -> DeleteTopicsRequest {
    let mut m = DeleteTopicsRequest::default().with_timeout_ms(1000);
    if v <= 5 {
        m.topic_names = vec![topic("a"), topic("b")];
    } else {
        m.topics = vec![DeleteTopicState::default()
            .with_name(Some(topic("a")))
            .with_topic_id(TOPIC_ID)];
    }
    m
}

fn delete_topics_response_sample(v: i16) -> DeleteTopicsResponse {
    let mut r = DeletableTopicResult::default()
        .with_name(Some(topic("a")))
        .with_error_code(0);
    if v >= 5 {
        r.error_message = Some(s("e"));
    }
    if v >= 6 {
        r.topic_id = TOPIC_ID;
    }
    let mut m = DeleteTopicsResponse::default().with_responses(vec![r]);
    if v >= 1 {
        m.throttle_time_ms = 3;
    }
    m
}

#[test]
fn delete_topics_round_trips_every_version() {
    for v in 0..=DeleteTopicsRequest::VERSIONS.max {
        round_trip(&delete_topics_request_sample(v), v);
    }
    for v in 0..=DeleteTopicsResponse::VERSIONS.max {
        round_trip(&delete_topics_response_sample(v), v);
    }
}

// ---------------------------------------------------------------------------------------------
// DescribeConfigs

#[test]
fn describe_configs_v0_bytes() {
    // request v0: Resources [ResourceType int8, ResourceName string,
    //                        ConfigurationKeys nullable [string]]
    let req = DescribeConfigsRequest::default().with_resources(vec![
        DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s("t"))
            .with_configuration_keys(Some(vec![s("retention.ms")])),
        DescribeConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(s("1"))
            .with_configuration_keys(None),
    ]);
    let wire = W::new()
        .arr(2)
        .i8(2)
        .str("t")
        .arr(1)
        .str("retention.ms")
        .i8(4)
        .str("1")
        .arr(-1)
        .done();
    check_wire(&req, 0, &wire);
    // v1 adds IncludeSynonyms bool, not ignorable.
    let mut v1 = wire.clone();
    v1.push(1);
    check_wire(&req.clone().with_include_synonyms(true), 1, &v1);
    assert!(encode_err(&req.clone().with_include_synonyms(true), 0).contains("not available"));

    // response v0: ThrottleTimeMs int32,
    //   Results [ErrorCode int16, ErrorMessage nullable string, ResourceType int8,
    //            ResourceName string,
    //            Configs [Name string, Value nullable string, ReadOnly bool, IsDefault bool,
    //                     IsSensitive bool]]
    let resp = DescribeConfigsResponse::default()
        .with_throttle_time_ms(0)
        .with_results(vec![DescribeConfigsResult::default()
            .with_error_code(0)
            .with_error_message(None)
            .with_resource_type(2)
            .with_resource_name(s("t"))
            .with_configs(vec![
                DescribeConfigsResourceResult::default()
                    .with_name(s("retention.ms"))
                    .with_value(Some(s("604800000")))
                    .with_read_only(false)
                    .with_is_default(true)
                    .with_is_sensitive(false),
                DescribeConfigsResourceResult::default()
                    .with_name(s("sasl.jaas.config"))
                    .with_value(None)
                    .with_read_only(true)
                    .with_is_default(false)
                    .with_is_sensitive(true),
            ])]);
    let wire = W::new()
        .i32(0)
        .arr(1)
        .i16(0)
        .nstr(None)
        .i8(2)
        .str("t")
        .arr(2)
        .str("retention.ms")
        .nstr(Some("604800000"))
        .bool(false)
        .bool(true)
        .bool(false)
        .str("sasl.jaas.config")
        .nstr(None)
        .bool(true)
        .bool(false)
        .bool(true)
        .done();
    check_wire(&resp, 0, &wire);
    let decoded: DescribeConfigsResponse = decode(&wire, 0);
    let c = &decoded.results[0].configs;
    assert!(c[0].is_default && !c[0].read_only && !c[0].is_sensitive);
    assert!(!c[1].is_default && c[1].read_only && c[1].is_sensitive);
    assert_eq!(c[0].config_source, -1);

    // IsDefault is v0 only and not ignorable.
    assert!(encode_err(&resp, 1).contains("not available"));
    // v1: Configs [Name, Value, ReadOnly, ConfigSource int8, IsSensitive,
    //              Synonyms [Name string, Value nullable string, Source int8]]
    let resp1 =
        DescribeConfigsResponse::default().with_results(vec![DescribeConfigsResult::default()
            .with_resource_type(2)
            .with_resource_name(s("t"))
            .with_configs(vec![DescribeConfigsResourceResult::default()
                .with_name(s("retention.ms"))
                .with_value(Some(s("1")))
                .with_config_source(1)
                .with_synonyms(vec![DescribeConfigsSynonym::default()
                    .with_name(s("retention.ms"))
                    .with_value(Some(s("1")))
                    .with_source(1)])])]);
    let v1 = W::new()
        .i32(0)
        .arr(1)
        .i16(0)
        .nstr(Some(""))
        .i8(2)
        .str("t")
        .arr(1)
        .str("retention.ms")
        .nstr(Some("1"))
        .bool(false)
        .i8(1)
        .bool(false)
        .arr(1)
        .str("retention.ms")
        .nstr(Some("1"))
        .i8(1)
        .done();
    check_wire(&resp1, 1, &v1);
}

fn describe_configs_request_sample(v: i16) -> DescribeConfigsRequest {
    let mut m = DescribeConfigsRequest::default().with_resources(vec![
        DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s("t"))
            .with_configuration_keys(Some(vec![s("retention.ms"), s("cleanup.policy")])),
        DescribeConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(s("1"))
            .with_configuration_keys(None),
    ]);
    if v >= 1 {
        m.include_synonyms = true;
    }
    if v >= 3 {
        m.include_documentation = true;
    }
    m
}

fn describe_configs_response_sample(v: i16) -> DescribeConfigsResponse {
    let mut c = DescribeConfigsResourceResult::default()
        .with_name(s("retention.ms"))
        .with_value(Some(s("1000")))
        .with_read_only(false)
        .with_is_sensitive(true);
    if v == 0 {
        c.is_default = true;
    } else {
        c.config_source = 1;
        c.synonyms = vec![DescribeConfigsSynonym::default()
            .with_name(s("log.retention.ms"))
            .with_value(None)
            .with_source(5)];
    }
    if v >= 3 {
        c.config_type = 5;
        c.documentation = Some(s("doc"));
    }
    DescribeConfigsResponse::default()
        .with_throttle_time_ms(7)
        .with_results(vec![DescribeConfigsResult::default()
            .with_error_code(0)
            .with_error_message(None)
            .with_resource_type(2)
            .with_resource_name(s("t"))
            .with_configs(vec![c])])
}

#[test]
fn describe_configs_round_trips_every_version() {
    for v in 0..=DescribeConfigsRequest::VERSIONS.max {
        round_trip(&describe_configs_request_sample(v), v);
    }
    for v in 0..=DescribeConfigsResponse::VERSIONS.max {
        round_trip(&describe_configs_response_sample(v), v);
    }
}

// ---------------------------------------------------------------------------------------------
// OffsetForLeaderEpoch

#[test]
fn offset_for_leader_epoch_v0_v1_bytes() {
    // request v0-1: Topics [Topic string, Partitions [Partition int32, LeaderEpoch int32]]
    let req =
        OffsetForLeaderEpochRequest::default().with_topics(vec![OffsetForLeaderTopic::default()
            .with_topic(topic("t"))
            .with_partitions(vec![OffsetForLeaderPartition::default()
                .with_partition(1)
                .with_leader_epoch(4)])]);
    let wire = W::new().arr(1).str("t").arr(1).i32(1).i32(4).done();
    check_wire(&req, 0, &wire);
    check_wire(&req, 1, &wire);
    // v2 adds CurrentLeaderEpoch int32 between Partition and LeaderEpoch.
    let v2 = W::new().arr(1).str("t").arr(1).i32(1).i32(-1).i32(4).done();
    check_wire(&req, 2, &v2);

    // response v0: Topics [Topic string, Partitions [ErrorCode int16, Partition int32,
    //                                                EndOffset int64]]
    // response v1: + LeaderEpoch int32 before EndOffset
    let resp = OffsetForLeaderEpochResponse::default().with_topics(vec![
        OffsetForLeaderTopicResult::default()
            .with_topic(topic("t"))
            .with_partitions(vec![
                offset_for_leader_epoch_response::EpochEndOffset::default()
                    .with_error_code(0)
                    .with_partition(1)
                    .with_leader_epoch(4)
                    .with_end_offset(100),
            ]),
    ]);
    let v1 = W::new()
        .arr(1)
        .str("t")
        .arr(1)
        .i16(0)
        .i32(1)
        .i32(4)
        .i64(100)
        .done();
    check_wire(&resp, 1, &v1);
    let v0 = W::new()
        .arr(1)
        .str("t")
        .arr(1)
        .i16(0)
        .i32(1)
        .i64(100)
        .done();
    assert_eq!(encode(&resp, 0), v0); // LeaderEpoch is ignorable
    let decoded: OffsetForLeaderEpochResponse = decode(&v0, 0);
    let p = &decoded.topics[0].partitions[0];
    assert_eq!(
        (p.error_code, p.partition, p.leader_epoch, p.end_offset),
        (0, 1, -1, 100)
    );
}

fn offset_for_leader_epoch_request_sample(v: i16) -> OffsetForLeaderEpochRequest {
    let mut p = OffsetForLeaderPartition::default()
        .with_partition(0)
        .with_leader_epoch(4);
    if v >= 2 {
        p.current_leader_epoch = 5;
    }
    let mut m =
        OffsetForLeaderEpochRequest::default().with_topics(vec![OffsetForLeaderTopic::default()
            .with_topic(topic("t"))
            .with_partitions(vec![p])]);
    if v >= 3 {
        m.replica_id = BrokerId(1);
    }
    m
}

fn offset_for_leader_epoch_response_sample(v: i16) -> OffsetForLeaderEpochResponse {
    let mut p = offset_for_leader_epoch_response::EpochEndOffset::default()
        .with_error_code(0)
        .with_partition(0)
        .with_end_offset(100);
    if v >= 1 {
        p.leader_epoch = 4;
    }
    let mut m = OffsetForLeaderEpochResponse::default().with_topics(vec![
        OffsetForLeaderTopicResult::default()
            .with_topic(topic("t"))
            .with_partitions(vec![p]),
    ]);
    if v >= 2 {
        m.throttle_time_ms = 1;
    }
    m
}

#[test]
fn offset_for_leader_epoch_round_trips_every_version() {
    for v in 0..=OffsetForLeaderEpochRequest::VERSIONS.max {
        round_trip(&offset_for_leader_epoch_request_sample(v), v);
    }
    for v in 0..=OffsetForLeaderEpochResponse::VERSIONS.max {
        round_trip(&offset_for_leader_epoch_response_sample(v), v);
    }
}

// ---------------------------------------------------------------------------------------------
// CreateAcls, DescribeAcls, DeleteAcls
//
// Version 0 has no pattern type fields: the pattern is LITERAL (3), which is the default of
// those fields. Version 1 adds them (an int8 each, not ignorable), otherwise v0 and v1 are the
// same on the wire; v2 is the first flexible version.

/// AclPatternType LITERAL and PREFIXED.
const LITERAL: i8 = 3;
const PREFIXED: i8 = 4;

#[test]
fn create_acls_v0_bytes() {
    // request v0: Creations [ResourceType int8, ResourceName string, Principal string,
    //                        Host string, Operation int8, PermissionType int8]
    // v1 inserts ResourcePatternType int8 after ResourceName.
    let req = CreateAclsRequest::default().with_creations(vec![
        AclCreation::default()
            .with_resource_type(2)
            .with_resource_name(s("t"))
            .with_principal(s("User:a"))
            .with_host(s("*"))
            .with_operation(3)
            .with_permission_type(3),
        AclCreation::default()
            .with_resource_type(3)
            .with_resource_name(s("g"))
            .with_principal(s("User:b"))
            .with_host(s("h"))
            .with_operation(4)
            .with_permission_type(2),
    ]);
    assert_eq!(req.creations[0].resource_pattern_type, LITERAL);
    let v0 = W::new()
        .arr(2)
        .i8(2)
        .str("t")
        .str("User:a")
        .str("*")
        .i8(3)
        .i8(3)
        .i8(3)
        .str("g")
        .str("User:b")
        .str("h")
        .i8(4)
        .i8(2)
        .done();
    check_wire(&req, 0, &v0);
    let v1 = W::new()
        .arr(2)
        .i8(2)
        .str("t")
        .i8(LITERAL)
        .str("User:a")
        .str("*")
        .i8(3)
        .i8(3)
        .i8(3)
        .str("g")
        .i8(LITERAL)
        .str("User:b")
        .str("h")
        .i8(4)
        .i8(2)
        .done();
    check_wire(&req, 1, &v1);
    // No pattern type on the v0 wire: one byte less per creation.
    assert_eq!(
        req.compute_size(1).unwrap() - req.compute_size(0).unwrap(),
        2
    );
    // A non-literal pattern cannot be sent at v0.
    let mut prefixed = req.clone();
    prefixed.creations[0].resource_pattern_type = PREFIXED;
    assert!(encode_err(&prefixed, 0).contains("not available"));
    encode(&prefixed, 1);

    // response v0 (same as v1): ThrottleTimeMs int32,
    //   Results [ErrorCode int16, ErrorMessage nullable string]
    let resp = CreateAclsResponse::default()
        .with_throttle_time_ms(5)
        .with_results(vec![
            AclCreationResult::default()
                .with_error_code(0)
                .with_error_message(None),
            AclCreationResult::default()
                .with_error_code(87)
                .with_error_message(Some(s("bad"))),
        ]);
    let wire = W::new()
        .i32(5)
        .arr(2)
        .i16(0)
        .nstr(None)
        .i16(87)
        .nstr(Some("bad"))
        .done();
    check_wire(&resp, 0, &wire);
    check_wire(&resp, 1, &wire);
}

fn create_acls_request_sample(v: i16) -> CreateAclsRequest {
    CreateAclsRequest::default().with_creations(vec![
        AclCreation::default()
            .with_resource_type(2)
            .with_resource_name(s("t"))
            .with_resource_pattern_type(if v >= 1 { PREFIXED } else { LITERAL })
            .with_principal(s("User:a"))
            .with_host(s("*"))
            .with_operation(3)
            .with_permission_type(3),
        AclCreation::default()
            .with_resource_type(if v >= 3 { 7 } else { 3 }) // USER (7) from v3
            .with_resource_name(s("x"))
            .with_principal(s("User:b"))
            .with_host(s("h"))
            .with_operation(2)
            .with_permission_type(2),
    ])
}

fn create_acls_response_sample(_v: i16) -> CreateAclsResponse {
    CreateAclsResponse::default()
        .with_throttle_time_ms(1)
        .with_results(vec![
            AclCreationResult::default().with_error_message(None),
            AclCreationResult::default()
                .with_error_code(31)
                .with_error_message(Some(s("e"))),
        ])
}

#[test]
fn create_acls_round_trips_every_version() {
    for v in 0..=CreateAclsRequest::VERSIONS.max {
        round_trip(&create_acls_request_sample(v), v);
    }
    for v in 0..=CreateAclsResponse::VERSIONS.max {
        round_trip(&create_acls_response_sample(v), v);
    }
}

#[test]
fn describe_acls_v0_bytes() {
    // request v0: ResourceTypeFilter int8, ResourceNameFilter nullable string,
    //             PrincipalFilter nullable string, HostFilter nullable string,
    //             Operation int8, PermissionType int8
    // v1 inserts PatternTypeFilter int8 after ResourceNameFilter.
    let req = DescribeAclsRequest::default()
        .with_resource_type_filter(2)
        .with_resource_name_filter(Some(s("t")))
        .with_principal_filter(None)
        .with_host_filter(Some(s("*")))
        .with_operation(1)
        .with_permission_type(1);
    assert_eq!(req.pattern_type_filter, LITERAL);
    let v0 = W::new()
        .i8(2)
        .nstr(Some("t"))
        .nstr(None)
        .nstr(Some("*"))
        .i8(1)
        .i8(1)
        .done();
    check_wire(&req, 0, &v0);
    let v1 = W::new()
        .i8(2)
        .nstr(Some("t"))
        .i8(LITERAL)
        .nstr(None)
        .nstr(Some("*"))
        .i8(1)
        .i8(1)
        .done();
    check_wire(&req, 1, &v1);
    assert_eq!(v1.len() - v0.len(), 1);
    // ANY (1) or MATCH (4) pattern filters only exist from v1.
    assert!(encode_err(&req.clone().with_pattern_type_filter(1), 0).contains("not available"));

    // response v0: ThrottleTimeMs int32, ErrorCode int16, ErrorMessage nullable string,
    //   Resources [ResourceType int8, ResourceName string,
    //              Acls [Principal string, Host string, Operation int8, PermissionType int8]]
    // v1 inserts PatternType int8 after ResourceName.
    let resp = DescribeAclsResponse::default()
        .with_throttle_time_ms(0)
        .with_error_code(0)
        .with_error_message(None)
        .with_resources(vec![DescribeAclsResource::default()
            .with_resource_type(2)
            .with_resource_name(s("t"))
            .with_acls(vec![
                AclDescription::default()
                    .with_principal(s("User:a"))
                    .with_host(s("*"))
                    .with_operation(3)
                    .with_permission_type(3),
                AclDescription::default()
                    .with_principal(s("User:b"))
                    .with_host(s("h"))
                    .with_operation(4)
                    .with_permission_type(2),
            ])]);
    let v0 = W::new()
        .i32(0)
        .i16(0)
        .nstr(None)
        .arr(1)
        .i8(2)
        .str("t")
        .arr(2)
        .str("User:a")
        .str("*")
        .i8(3)
        .i8(3)
        .str("User:b")
        .str("h")
        .i8(4)
        .i8(2)
        .done();
    check_wire(&resp, 0, &v0);
    let v1 = W::new()
        .i32(0)
        .i16(0)
        .nstr(None)
        .arr(1)
        .i8(2)
        .str("t")
        .i8(LITERAL)
        .arr(2)
        .str("User:a")
        .str("*")
        .i8(3)
        .i8(3)
        .str("User:b")
        .str("h")
        .i8(4)
        .i8(2)
        .done();
    check_wire(&resp, 1, &v1);
    assert_eq!(v1.len() - v0.len(), 1);
    let decoded: DescribeAclsResponse = decode(&v0, 0);
    assert_eq!(decoded.resources[0].pattern_type, LITERAL);
    let mut prefixed = resp.clone();
    prefixed.resources[0].pattern_type = PREFIXED;
    assert!(encode_err(&prefixed, 0).contains("not available"));
}

fn describe_acls_request_sample(v: i16) -> DescribeAclsRequest {
    DescribeAclsRequest::default()
        .with_resource_type_filter(if v >= 3 { 7 } else { 2 })
        .with_resource_name_filter(Some(s("t")))
        .with_pattern_type_filter(if v >= 1 { 4 } else { LITERAL })
        .with_principal_filter(Some(s("User:a")))
        .with_host_filter(None)
        .with_operation(3)
        .with_permission_type(3)
}

fn describe_acls_response_sample(v: i16) -> DescribeAclsResponse {
    DescribeAclsResponse::default()
        .with_throttle_time_ms(2)
        .with_error_code(0)
        .with_error_message(None)
        .with_resources(vec![
            DescribeAclsResource::default()
                .with_resource_type(2)
                .with_resource_name(s("t"))
                .with_pattern_type(if v >= 1 { PREFIXED } else { LITERAL })
                .with_acls(vec![AclDescription::default()
                    .with_principal(s("User:a"))
                    .with_host(s("*"))
                    .with_operation(3)
                    .with_permission_type(3)]),
            DescribeAclsResource::default()
                .with_resource_type(4)
                .with_resource_name(s("kafka-cluster"))
                .with_acls(vec![]),
        ])
}

#[test]
fn describe_acls_round_trips_every_version() {
    for v in 0..=DescribeAclsRequest::VERSIONS.max {
        round_trip(&describe_acls_request_sample(v), v);
    }
    for v in 0..=DescribeAclsResponse::VERSIONS.max {
        round_trip(&describe_acls_response_sample(v), v);
    }
}

#[test]
fn delete_acls_v0_bytes() {
    // request v0: Filters [ResourceTypeFilter int8, ResourceNameFilter nullable string,
    //                      PrincipalFilter nullable string, HostFilter nullable string,
    //                      Operation int8, PermissionType int8]
    // v1 inserts PatternTypeFilter int8 after ResourceNameFilter.
    let req = DeleteAclsRequest::default().with_filters(vec![
        DeleteAclsFilter::default()
            .with_resource_type_filter(2)
            .with_resource_name_filter(Some(s("t")))
            .with_principal_filter(Some(s("User:a")))
            .with_host_filter(None)
            .with_operation(3)
            .with_permission_type(3),
        DeleteAclsFilter::default()
            .with_resource_type_filter(1)
            .with_resource_name_filter(None)
            .with_principal_filter(None)
            .with_host_filter(None)
            .with_operation(1)
            .with_permission_type(1),
    ]);
    let v0 = W::new()
        .arr(2)
        .i8(2)
        .nstr(Some("t"))
        .nstr(Some("User:a"))
        .nstr(None)
        .i8(3)
        .i8(3)
        .i8(1)
        .nstr(None)
        .nstr(None)
        .nstr(None)
        .i8(1)
        .i8(1)
        .done();
    check_wire(&req, 0, &v0);
    let v1 = W::new()
        .arr(2)
        .i8(2)
        .nstr(Some("t"))
        .i8(LITERAL)
        .nstr(Some("User:a"))
        .nstr(None)
        .i8(3)
        .i8(3)
        .i8(1)
        .nstr(None)
        .i8(LITERAL)
        .nstr(None)
        .nstr(None)
        .i8(1)
        .i8(1)
        .done();
    check_wire(&req, 1, &v1);
    assert_eq!(v1.len() - v0.len(), 2);
    let decoded: DeleteAclsRequest = decode(&v0, 0);
    assert!(decoded
        .filters
        .iter()
        .all(|f| f.pattern_type_filter == LITERAL));
    let mut any = req.clone();
    any.filters[1].pattern_type_filter = 1;
    assert!(encode_err(&any, 0).contains("not available"));

    // response v0: ThrottleTimeMs int32,
    //   FilterResults [ErrorCode int16, ErrorMessage nullable string,
    //                  MatchingAcls [ErrorCode int16, ErrorMessage nullable string,
    //                                ResourceType int8, ResourceName string, Principal string,
    //                                Host string, Operation int8, PermissionType int8]]
    // v1 inserts PatternType int8 after ResourceName.
    let resp = DeleteAclsResponse::default()
        .with_throttle_time_ms(0)
        .with_filter_results(vec![DeleteAclsFilterResult::default()
            .with_error_code(0)
            .with_error_message(None)
            .with_matching_acls(vec![DeleteAclsMatchingAcl::default()
                .with_error_code(0)
                .with_error_message(None)
                .with_resource_type(2)
                .with_resource_name(s("t"))
                .with_principal(s("User:a"))
                .with_host(s("*"))
                .with_operation(3)
                .with_permission_type(3)])]);
    let v0 = W::new()
        .i32(0)
        .arr(1)
        .i16(0)
        .nstr(None)
        .arr(1)
        .i16(0)
        .nstr(None)
        .i8(2)
        .str("t")
        .str("User:a")
        .str("*")
        .i8(3)
        .i8(3)
        .done();
    check_wire(&resp, 0, &v0);
    let v1 = W::new()
        .i32(0)
        .arr(1)
        .i16(0)
        .nstr(None)
        .arr(1)
        .i16(0)
        .nstr(None)
        .i8(2)
        .str("t")
        .i8(LITERAL)
        .str("User:a")
        .str("*")
        .i8(3)
        .i8(3)
        .done();
    check_wire(&resp, 1, &v1);
    assert_eq!(v1.len() - v0.len(), 1);
    let decoded: DeleteAclsResponse = decode(&v0, 0);
    assert_eq!(
        decoded.filter_results[0].matching_acls[0].pattern_type,
        LITERAL
    );
    let mut prefixed = resp.clone();
    prefixed.filter_results[0].matching_acls[0].pattern_type = PREFIXED;
    assert!(encode_err(&prefixed, 0).contains("not available"));
}

fn delete_acls_request_sample(v: i16) -> DeleteAclsRequest {
    DeleteAclsRequest::default().with_filters(vec![
        DeleteAclsFilter::default()
            .with_resource_type_filter(2)
            .with_resource_name_filter(Some(s("t")))
            .with_pattern_type_filter(if v >= 1 { 4 } else { LITERAL })
            .with_principal_filter(Some(s("User:a")))
            .with_host_filter(Some(s("*")))
            .with_operation(3)
            .with_permission_type(3),
        DeleteAclsFilter::default()
            .with_resource_type_filter(if v >= 3 { 7 } else { 1 })
            .with_resource_name_filter(None)
            .with_principal_filter(None)
            .with_host_filter(None)
            .with_operation(1)
            .with_permission_type(1),
    ])
}

fn delete_acls_response_sample(v: i16) -> DeleteAclsResponse {
    DeleteAclsResponse::default()
        .with_throttle_time_ms(3)
        .with_filter_results(vec![
            DeleteAclsFilterResult::default()
                .with_error_message(None)
                .with_matching_acls(vec![DeleteAclsMatchingAcl::default()
                    .with_error_message(None)
                    .with_resource_type(2)
                    .with_resource_name(s("t"))
                    .with_pattern_type(if v >= 1 { PREFIXED } else { LITERAL })
                    .with_principal(s("User:a"))
                    .with_host(s("*"))
                    .with_operation(3)
                    .with_permission_type(3)]),
            DeleteAclsFilterResult::default()
                .with_error_code(87)
                .with_error_message(Some(s("e")))
                .with_matching_acls(vec![]),
        ])
}

#[test]
fn delete_acls_round_trips_every_version() {
    for v in 0..=DeleteAclsRequest::VERSIONS.max {
        round_trip(&delete_acls_request_sample(v), v);
    }
    for v in 0..=DeleteAclsResponse::VERSIONS.max {
        round_trip(&delete_acls_response_sample(v), v);
    }
}

// ---------------------------------------------------------------------------------------------
// The other APIs Ferrite serves were not changed; their old versions were never removed.

#[test]
fn other_served_apis_keep_kafka_3_9_ranges() {
    // (api, Kafka 3.9's max version)
    let apis = [
        (ApiKey::Metadata, 12),
        (ApiKey::FindCoordinator, 6),
        (ApiKey::JoinGroup, 9),
        (ApiKey::Heartbeat, 4),
        (ApiKey::LeaveGroup, 5),
        (ApiKey::SyncGroup, 5),
        (ApiKey::DescribeGroups, 5),
        (ApiKey::ListGroups, 5),
        (ApiKey::ApiVersions, 4),
        (ApiKey::InitProducerId, 5),
        (ApiKey::CreatePartitions, 3),
        (ApiKey::DeleteGroups, 2),
    ];
    for (key, max39) in apis {
        let r = key.valid_versions();
        assert_eq!(r.min, 0, "{key:?}");
        assert!(r.max >= max39, "{key:?}: {} < {max39}", r.max);
    }
    // ApiVersions responses always use response header v0.
    for v in 0..=4 {
        assert_eq!(ApiKey::ApiVersions.response_header_version(v), 0);
    }
}

#[test]
fn write_txn_markers_v0_bytes() {
    use kafka_protocol::messages::write_txn_markers_request::{
        WritableTxnMarker, WritableTxnMarkerTopic,
    };
    use kafka_protocol::messages::write_txn_markers_response::{
        WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
    };
    // request v0: Markers [ProducerId int64, ProducerEpoch int16, TransactionResult bool,
    //   Topics [Name string, PartitionIndexes [int32]], CoordinatorEpoch int32]
    let req = WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
        .with_producer_id(ProducerId(7))
        .with_producer_epoch(2)
        .with_transaction_result(true)
        .with_topics(vec![WritableTxnMarkerTopic::default()
            .with_name(topic("t"))
            .with_partition_indexes(vec![0, 3])])
        .with_coordinator_epoch(5)]);
    let v0 = W::new()
        .arr(1)
        .i64(7)
        .i16(2)
        .bool(true)
        .arr(1)
        .str("t")
        .arr(2)
        .i32(0)
        .i32(3)
        .i32(5)
        .done();
    check_wire(&req, 0, &v0);
    round_trip(&req, 1);
    // response v0: Markers [ProducerId int64, Topics [Name string,
    //   Partitions [PartitionIndex int32, ErrorCode int16]]]
    let resp = WriteTxnMarkersResponse::default().with_markers(vec![WritableTxnMarkerResult::default()
        .with_producer_id(ProducerId(7))
        .with_topics(vec![WritableTxnMarkerTopicResult::default()
            .with_name(topic("t"))
            .with_partitions(vec![WritableTxnMarkerPartitionResult::default()
                .with_partition_index(3)
                .with_error_code(47)])])]);
    let v0 = W::new()
        .arr(1)
        .i64(7)
        .arr(1)
        .str("t")
        .arr(1)
        .i32(3)
        .i16(47)
        .done();
    check_wire(&resp, 0, &v0);
    round_trip(&resp, 1);
}
