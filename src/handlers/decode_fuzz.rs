//! Fuzzing the request decoder: for every API and version Ferrite serves, a real request
//! frame (header and a populated body) is mutated (bytes flipped, cut, inserted, lengths and
//! counts overwritten with extreme values) and decoded. Decoding must answer, never panic,
//! and never try to allocate for a length the frame cannot hold (which would abort the
//! process). Repeatable and bounded: 20,000 frames from a fixed seed in a few seconds
//! (`ferrite_shards::testing::fuzz_budget`; `scripts/fuzz` runs longer from new seeds).

use super::decode;
use crate::protocol::peek_header;
use crate::protocol::versions::SUPPORTED;
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{encode_request_header_into_buffer, StrBytes};
use proptest::prelude::*;
use proptest::sample::Index;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// A request of `api` with something in each list, so mutations reach nested decoding.
fn populated(api: ApiKey) -> RequestKind {
    let topic = TopicName(s("fuzzed"));
    let group = GroupId(s("group"));
    match api {
        ApiKey::Produce => RequestKind::Produce(
            ProduceRequest::default()
                .with_acks(-1)
                .with_topic_data(vec![produce_request::TopicProduceData::default()
                    .with_name(topic)
                    .with_partition_data(vec![
                        produce_request::PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(Bytes::from_static(&[0u8; 70]))),
                    ])]),
        ),
        ApiKey::Fetch => RequestKind::Fetch(FetchRequest::default().with_topics(vec![
            fetch_request::FetchTopic::default()
                .with_topic(topic)
                .with_partitions(vec![fetch_request::FetchPartition::default()]),
        ])),
        ApiKey::ListOffsets => {
            RequestKind::ListOffsets(ListOffsetsRequest::default().with_topics(vec![
                list_offsets_request::ListOffsetsTopic::default()
                    .with_name(topic)
                    .with_partitions(vec![list_offsets_request::ListOffsetsPartition::default()]),
            ]))
        }
        ApiKey::Metadata => {
            RequestKind::Metadata(MetadataRequest::default().with_topics(Some(vec![
                metadata_request::MetadataRequestTopic::default().with_name(Some(topic)),
            ])))
        }
        ApiKey::OffsetCommit => RequestKind::OffsetCommit(
            OffsetCommitRequest::default()
                .with_group_id(group)
                .with_topics(vec![
                    offset_commit_request::OffsetCommitRequestTopic::default()
                        .with_name(topic)
                        .with_partitions(vec![
                            offset_commit_request::OffsetCommitRequestPartition::default(),
                        ]),
                ]),
        ),
        ApiKey::OffsetFetch => RequestKind::OffsetFetch(
            OffsetFetchRequest::default()
                .with_group_id(group)
                .with_topics(Some(vec![
                    offset_fetch_request::OffsetFetchRequestTopic::default()
                        .with_name(topic)
                        .with_partition_indexes(vec![0, 1]),
                ])),
        ),
        ApiKey::FindCoordinator => {
            RequestKind::FindCoordinator(FindCoordinatorRequest::default().with_key(s("group")))
        }
        ApiKey::JoinGroup => RequestKind::JoinGroup(
            JoinGroupRequest::default()
                .with_group_id(group)
                .with_protocol_type(s("consumer"))
                .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
                )
                .with_name(s("range"))
                .with_metadata(Bytes::from_static(b"\0\0\0\0"))]),
        ),
        ApiKey::Heartbeat => {
            RequestKind::Heartbeat(HeartbeatRequest::default().with_group_id(group))
        }
        ApiKey::LeaveGroup => {
            RequestKind::LeaveGroup(LeaveGroupRequest::default().with_group_id(group))
        }
        ApiKey::SyncGroup => RequestKind::SyncGroup(
            SyncGroupRequest::default()
                .with_group_id(group)
                .with_assignments(vec![
                    sync_group_request::SyncGroupRequestAssignment::default()
                        .with_assignment(Bytes::from_static(b"\0\0")),
                ]),
        ),
        ApiKey::DescribeGroups => {
            RequestKind::DescribeGroups(DescribeGroupsRequest::default().with_groups(vec![group]))
        }
        ApiKey::ListGroups => RequestKind::ListGroups(ListGroupsRequest::default()),
        ApiKey::ApiVersions => RequestKind::ApiVersions(ApiVersionsRequest::default()),
        ApiKey::CreateTopics => {
            RequestKind::CreateTopics(CreateTopicsRequest::default().with_topics(
                vec![create_topics_request::CreatableTopic::default()
                .with_name(topic)
                .with_num_partitions(3)
                .with_configs(vec![create_topics_request::CreatableTopicConfig::default()
                    .with_name(s("retention.ms"))
                    .with_value(Some(s("1000")))])],
            ))
        }
        ApiKey::DeleteTopics => {
            RequestKind::DeleteTopics(DeleteTopicsRequest::default().with_topic_names(vec![topic]))
        }
        ApiKey::InitProducerId => RequestKind::InitProducerId(InitProducerIdRequest::default()),
        ApiKey::DescribeConfigs => {
            RequestKind::DescribeConfigs(DescribeConfigsRequest::default().with_resources(vec![
                describe_configs_request::DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s("fuzzed")),
            ]))
        }
        ApiKey::CreatePartitions => {
            RequestKind::CreatePartitions(CreatePartitionsRequest::default().with_topics(vec![
                create_partitions_request::CreatePartitionsTopic::default()
                    .with_name(topic)
                    .with_count(4),
            ]))
        }
        ApiKey::DeleteGroups => {
            RequestKind::DeleteGroups(DeleteGroupsRequest::default().with_groups_names(vec![group]))
        }
        ApiKey::OffsetForLeaderEpoch => RequestKind::OffsetForLeaderEpoch(
            OffsetForLeaderEpochRequest::default().with_topics(vec![
                offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
                    .with_topic(topic)
                    .with_partitions(vec![
                        offset_for_leader_epoch_request::OffsetForLeaderPartition::default(),
                    ]),
            ]),
        ),
        other => panic!("{other:?} is served but has no sample request here"),
    }
}

/// The frame (without its size prefix) of `api` at `version`: the populated body where that
/// version can carry it, else the default body.
fn frame(api: ApiKey, version: i16) -> Vec<u8> {
    let header = RequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(s("fuzz")));
    let mut buf = BytesMut::new();
    encode_request_header_into_buffer(&mut buf, &header).unwrap();
    let header_len = buf.len();
    if populated(api).encode(&mut buf, version).is_err() {
        buf.truncate(header_len);
        RequestKind::default_of(api)
            .encode(&mut buf, version)
            .unwrap_or_else(|e| panic!("{api:?} v{version}: {e}"));
    }
    buf.to_vec()
}

trait DefaultOf {
    fn default_of(api: ApiKey) -> RequestKind;
}

impl DefaultOf for RequestKind {
    fn default_of(api: ApiKey) -> RequestKind {
        match populated(api) {
            RequestKind::Produce(_) => RequestKind::Produce(Default::default()),
            RequestKind::Fetch(_) => RequestKind::Fetch(Default::default()),
            RequestKind::ListOffsets(_) => RequestKind::ListOffsets(Default::default()),
            RequestKind::Metadata(_) => RequestKind::Metadata(Default::default()),
            RequestKind::OffsetCommit(_) => RequestKind::OffsetCommit(Default::default()),
            RequestKind::OffsetFetch(_) => RequestKind::OffsetFetch(Default::default()),
            RequestKind::FindCoordinator(_) => RequestKind::FindCoordinator(Default::default()),
            RequestKind::JoinGroup(_) => RequestKind::JoinGroup(Default::default()),
            RequestKind::SyncGroup(_) => RequestKind::SyncGroup(Default::default()),
            RequestKind::CreateTopics(_) => RequestKind::CreateTopics(Default::default()),
            RequestKind::DeleteTopics(_) => RequestKind::DeleteTopics(Default::default()),
            RequestKind::DescribeConfigs(_) => RequestKind::DescribeConfigs(Default::default()),
            RequestKind::CreatePartitions(_) => RequestKind::CreatePartitions(Default::default()),
            RequestKind::OffsetForLeaderEpoch(_) => {
                RequestKind::OffsetForLeaderEpoch(Default::default())
            }
            other => other,
        }
    }
}

/// One change to a frame.
#[derive(Clone, Debug)]
enum Mutation {
    Flip(Index, u8),
    Cut(Index),
    Insert(Index, Vec<u8>),
    /// A 4-byte length or count overwritten (big-endian), as a hostile client would.
    Int32(Index, i32),
    /// A varint overwritten with a large value (flexible versions' compact lengths).
    Varint(Index, u32),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let extreme = prop_oneof![
        Just(-1),
        Just(0),
        Just(i32::MAX),
        Just(0x1000_0000),
        Just(65_536),
        any::<i32>()
    ];
    prop_oneof![
        (any::<Index>(), 1u8..=255).prop_map(|(i, x)| Mutation::Flip(i, x)),
        any::<Index>().prop_map(Mutation::Cut),
        (any::<Index>(), prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        (any::<Index>(), extreme).prop_map(|(i, v)| Mutation::Int32(i, v)),
        (
            any::<Index>(),
            prop_oneof![Just(u32::MAX), Just(1 << 28), any::<u32>()]
        )
            .prop_map(|(i, v)| Mutation::Varint(i, v)),
    ]
}

fn apply(frame: &mut Vec<u8>, m: &Mutation) {
    if frame.is_empty() {
        return;
    }
    match m {
        Mutation::Flip(i, x) => {
            let i = i.index(frame.len());
            frame[i] ^= x;
        }
        Mutation::Cut(i) => frame.truncate(i.index(frame.len())),
        Mutation::Insert(i, bytes) => {
            let i = i.index(frame.len());
            frame.splice(i..i, bytes.iter().copied());
        }
        Mutation::Int32(i, v) => {
            let i = i.index(frame.len());
            for (k, b) in v.to_be_bytes().into_iter().enumerate() {
                if let Some(slot) = frame.get_mut(i + k) {
                    *slot = b;
                }
            }
        }
        Mutation::Varint(i, v) => {
            let i = i.index(frame.len());
            let mut encoded = Vec::new();
            let mut v = *v;
            while v >= 0x80 {
                encoded.push((v as u8) | 0x80);
                v >>= 7;
            }
            encoded.push(v as u8);
            for (k, b) in encoded.into_iter().enumerate() {
                if let Some(slot) = frame.get_mut(i + k) {
                    *slot = b;
                }
            }
        }
    }
}

/// Every (API, version) Ferrite serves.
fn served() -> Vec<(ApiKey, i16)> {
    SUPPORTED
        .iter()
        .flat_map(|&(api, min, max)| (min..=max).map(move |v| (api, v)))
        .collect()
}

#[test]
fn every_served_request_decodes_unmutated() {
    for (api, version) in served() {
        let f = Bytes::from(frame(api, version));
        let decoded = decode(f.clone(), peek_header(&f))
            .unwrap_or_else(|_| panic!("{api:?} v{version} does not decode"));
        assert_eq!((decoded.api_key, decoded.version), (api, version));
        assert_eq!(decoded.client_id, "fuzz");
    }
}

proptest! {
    #![proptest_config({
        let (cases, seed) = ferrite_shards::testing::fuzz_budget(20_000);
        ProptestConfig {
            cases,
            rng_seed: proptest::test_runner::RngSeed::Fixed(seed),
            failure_persistence: None,
            ..ProptestConfig::default()
        }
    })]

    #[test]
    fn mutated_requests_are_answered_or_refused_never_a_panic(
        which in any::<Index>(),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let served = served();
        let (api, version) = served[which.index(served.len())];
        let mut f = frame(api, version);
        for m in &mutations {
            apply(&mut f, m);
        }
        let f = Bytes::from(f);
        // Decoded or refused: either way it returns.
        let _ = decode(f.clone(), peek_header(&f));
    }
}
