//! Every version of every API Ferrite serves, on the wire against the real broker: the
//! ApiVersions table is Kafka 3.9's, and each advertised version of each API is answered with
//! a response that decodes in that version (nothing closes the connection), with the old
//! message formats converted both ways.

mod common;

use bytes::{Bytes, BytesMut};
use common::wire::{call, connect};
use common::Broker;
use ferrite_shards::batch::build::{build_batch, NewRecord, ProducerFields};
use ferrite_shards::batch::legacy::{put_message, Message, MAGIC_V0, MAGIC_V1};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::elect_leaders_request::TopicPartitions as ElectTopicPartitions;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{HeaderVersion, StrBytes};
use std::net::TcpStream;
use uuid::Uuid;

/// Kafka 3.9's `validVersions` for each API Ferrite serves
/// (`clients/src/main/resources/common/message/*Request.json` at 3.9.0).
const KAFKA_3_9: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 0, 11),
    (ApiKey::Fetch, 0, 17),
    (ApiKey::ListOffsets, 0, 9),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::OffsetCommit, 0, 9),
    (ApiKey::OffsetFetch, 0, 9),
    (ApiKey::FindCoordinator, 0, 6),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 0, 7),
    (ApiKey::DeleteTopics, 0, 6),
    (ApiKey::InitProducerId, 0, 5),
    (ApiKey::AddPartitionsToTxn, 0, 5),
    (ApiKey::AddOffsetsToTxn, 0, 4),
    (ApiKey::EndTxn, 0, 4),
    (ApiKey::WriteTxnMarkers, 0, 1),
    (ApiKey::TxnOffsetCommit, 0, 4),
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
    (ApiKey::DescribeConfigs, 0, 4),
    (ApiKey::DescribeAcls, 0, 3),
    (ApiKey::CreateAcls, 0, 3),
    (ApiKey::DeleteAcls, 0, 3),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::OffsetForLeaderEpoch, 0, 4),
    (ApiKey::DescribeCluster, 0, 1),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::DescribeLogDirs, 0, 4),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::ElectLeaders, 0, 2),
    (ApiKey::AlterPartitionReassignments, 0, 0),
    (ApiKey::ListPartitionReassignments, 0, 0),
    (ApiKey::DescribeClientQuotas, 0, 1),
    (ApiKey::AlterClientQuotas, 0, 1),
    (ApiKey::DescribeProducers, 0, 0),
    (ApiKey::DescribeTransactions, 0, 0),
    (ApiKey::ListTransactions, 0, 1),
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    (ApiKey::AlterUserScramCredentials, 0, 0),
];

const TOPIC: &str = "matrix";
const GROUP: &str = "matrix-group";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn topic_name(v: &str) -> TopicName {
    TopicName(s(v))
}

fn broker() -> Broker {
    Broker::start(&["--set", "group.initial.rebalance.delay.ms=0"])
}

#[test]
fn api_versions_advertises_exactly_kafka_3_9s_ranges() {
    let broker = broker();
    let mut conn = connect(&broker);
    for version in 0..=4 {
        let body = ApiVersionsRequest::default()
            .with_client_software_name(s("protocol-versions"))
            .with_client_software_version(s("1.0"));
        let answer: ApiVersionsResponse = call(&mut conn, ApiKey::ApiVersions, version, &body);
        assert_eq!(answer.error_code, 0, "v{version}");
        let mut advertised: Vec<(i16, i16, i16)> = answer
            .api_keys
            .iter()
            .map(|k| (k.api_key, k.min_version, k.max_version))
            .collect();
        advertised.sort_unstable();
        let mut expected: Vec<(i16, i16, i16)> = KAFKA_3_9
            .iter()
            .map(|(k, min, max)| (*k as i16, *min, *max))
            .collect();
        expected.sort_unstable();
        assert_eq!(advertised, expected, "ApiVersions v{version}");
    }
}

/// A record set for Produce v`version`: magic 0 for v0–1, magic 1 for v2, a v2 batch after.
fn records_for(version: i16, value: &str) -> Bytes {
    let magic = match version {
        0 | 1 => MAGIC_V0,
        2 => MAGIC_V1,
        _ => {
            return build_batch(
                &[NewRecord {
                    key: Some(Bytes::from_static(b"k")),
                    value: Some(Bytes::from(value.to_string())),
                    timestamp_ms: 1_700_000_000_000,
                    headers: vec![],
                }],
                ProducerFields::NONE,
            )
        }
    };
    let mut set = BytesMut::new();
    put_message(
        &mut set,
        &Message {
            offset: 0,
            magic,
            attributes: 0,
            timestamp: if magic == MAGIC_V0 {
                -1
            } else {
                1_700_000_000_000
            },
            key: Some(b"k"),
            value: Some(value.as_bytes()),
        },
    );
    set.freeze()
}

fn produce(conn: &mut TcpStream, version: i16) -> i64 {
    let body = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(TOPIC))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records_for(version, &format!("v{version}"))))])]);
    let answer: ProduceResponse = call(conn, ApiKey::Produce, version, &body);
    let p = &answer.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 0, "Produce v{version}: {:?}", p.error_message);
    p.base_offset
}

fn topic_id(conn: &mut TcpStream) -> Uuid {
    let body = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(topic_name(TOPIC)))
    ]));
    let answer: MetadataResponse = call(conn, ApiKey::Metadata, 12, &body);
    answer.topics[0].topic_id
}

fn fetch(conn: &mut TcpStream, version: i16, id: Uuid) -> Bytes {
    let mut topic = FetchTopic::default().with_partitions(vec![FetchPartition::default()
        .with_partition(0)
        .with_fetch_offset(0)
        .with_partition_max_bytes(1 << 20)]);
    topic = if version >= 13 {
        topic.with_topic_id(id)
    } else {
        topic.with_topic(topic_name(TOPIC))
    };
    let mut body = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_topics(vec![topic]);
    if version >= 3 {
        body = body.with_max_bytes(1 << 20);
    }
    if version < 15 {
        body = body.with_replica_id(BrokerId(-1));
    }
    let answer: FetchResponse = call(conn, ApiKey::Fetch, version, &body);
    let p = &answer.responses[0].partitions[0];
    assert_eq!(p.error_code, 0, "Fetch v{version}");
    p.records.clone().unwrap_or_default()
}

#[test]
fn produce_and_fetch_in_every_version_convert_the_old_formats_both_ways() {
    let broker = broker();
    let mut conn = connect(&broker);
    create_topic(&mut conn, 7, TOPIC);
    let mut offsets = Vec::new();
    for version in 0..=11 {
        offsets.push(produce(&mut conn, version));
    }
    assert_eq!(
        offsets,
        (0..12).collect::<Vec<i64>>(),
        "one record per version, in order"
    );
    let id = topic_id(&mut conn);
    for version in 0..=17 {
        let records = fetch(&mut conn, version, id);
        assert!(!records.is_empty(), "Fetch v{version} returned records");
        let magic = records[16];
        let expected = match version {
            0 | 1 => 0,
            2 | 3 => 1,
            _ => 2,
        };
        assert_eq!(magic, expected, "Fetch v{version} reads magic {expected}");
        if version < 4 {
            let messages = ferrite_shards::batch::legacy::messages(&records).unwrap();
            assert_eq!(
                messages.len(),
                12,
                "Fetch v{version}: one message per record"
            );
            let values: Vec<&[u8]> = messages.iter().map(|m| m.value.unwrap()).collect();
            assert_eq!(values[0], b"v0");
            assert_eq!(values[11], b"v11");
            assert_eq!(messages[5].offset, 5, "absolute offsets");
        }
    }
}

#[test]
fn a_fetch_by_an_unknown_topic_id_gets_unknown_topic_id() {
    let broker = broker();
    let mut conn = connect(&broker);
    let topic = FetchTopic::default()
        .with_topic_id(Uuid::from_bytes([3; 16]))
        .with_partitions(vec![FetchPartition::default().with_partition(0)]);
    let body = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_topics(vec![topic]);
    let answer: FetchResponse = call(&mut conn, ApiKey::Fetch, 13, &body);
    assert_eq!(answer.responses[0].partitions[0].error_code, 100);
}

fn create_topic(conn: &mut TcpStream, version: i16, name: &str) {
    let body = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(topic_name(name))
            .with_num_partitions(1)
            .with_replication_factor(1)]);
    let answer: CreateTopicsResponse = call(conn, ApiKey::CreateTopics, version, &body);
    assert_eq!(answer.topics[0].error_code, 0, "CreateTopics v{version}");
}

#[test]
fn topic_admin_apis_answer_in_every_version() {
    let broker = broker();
    let mut conn = connect(&broker);
    for version in 0..=7 {
        create_topic(&mut conn, version, &format!("created-v{version}"));
    }
    for version in 0..=12 {
        let body = MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(topic_name("created-v0"))),
        ]));
        let answer: MetadataResponse = call(&mut conn, ApiKey::Metadata, version, &body);
        assert_eq!(answer.topics[0].error_code, 0, "Metadata v{version}");
    }
    for version in 0..=4 {
        let body = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s("created-v0"))
                .with_configuration_keys(Some(vec![s("retention.ms")])),
        ]);
        let answer: DescribeConfigsResponse =
            call(&mut conn, ApiKey::DescribeConfigs, version, &body);
        let entry = answer.results[0]
            .configs
            .first()
            .unwrap_or_else(|| panic!("DescribeConfigs v{version}: {:?}", answer.results[0]));
        assert_eq!(entry.value.as_deref(), Some("604800000"), "v{version}");
        if version == 0 {
            assert!(entry.is_default, "v0 says a default is a default");
        } else {
            assert_eq!(entry.config_source, 5, "v{version}: DEFAULT_CONFIG");
        }
    }
    for version in 0..=3 {
        let body = CreatePartitionsRequest::default()
            .with_timeout_ms(10_000)
            .with_topics(vec![CreatePartitionsTopic::default()
                .with_name(topic_name("created-v1"))
                .with_count(2 + version as i32)]);
        let answer: CreatePartitionsResponse =
            call(&mut conn, ApiKey::CreatePartitions, version, &body);
        assert_eq!(
            answer.results[0].error_code, 0,
            "CreatePartitions v{version}"
        );
    }
    for version in 0..=6 {
        let name = topic_name(&format!("created-v{}", version.min(7)));
        let body = if version >= 6 {
            DeleteTopicsRequest::default()
                .with_topics(vec![DeleteTopicState::default().with_name(Some(name))])
        } else {
            DeleteTopicsRequest::default().with_topic_names(vec![name])
        }
        .with_timeout_ms(10_000);
        let answer: DeleteTopicsResponse = call(&mut conn, ApiKey::DeleteTopics, version, &body);
        assert_eq!(answer.responses[0].error_code, 0, "DeleteTopics v{version}");
    }
    for version in 0..=1 {
        let body =
            DescribeClusterRequest::default().with_include_cluster_authorized_operations(true);
        let answer: DescribeClusterResponse =
            call(&mut conn, ApiKey::DescribeCluster, version, &body);
        assert_eq!(answer.error_code, 0, "DescribeCluster v{version}");
        assert_eq!(answer.brokers.len(), 1);
        assert_eq!(answer.brokers[0].port as u16, broker.port);
        assert_eq!(answer.controller_id, answer.brokers[0].broker_id);
        assert!(!answer.cluster_id.is_empty());
        assert_eq!(
            answer.cluster_authorized_operations, 0x1fa0,
            "every cluster operation"
        );
        let without: DescribeClusterResponse = call(
            &mut conn,
            ApiKey::DescribeCluster,
            version,
            &DescribeClusterRequest::default(),
        );
        assert_eq!(
            without.cluster_authorized_operations,
            i32::MIN,
            "not asked for"
        );
    }
    // Kafka: a broker asked for controllers (2) or an unknown endpoint type (9).
    for (endpoint, code) in [(2, 114), (9, 115)] {
        let body = DescribeClusterRequest::default().with_endpoint_type(endpoint);
        let answer: DescribeClusterResponse = call(&mut conn, ApiKey::DescribeCluster, 1, &body);
        assert_eq!(answer.error_code, code, "endpoint type {endpoint}");
        assert!(answer.brokers.is_empty());
    }
}

#[test]
fn offset_apis_answer_in_every_version() {
    let broker = broker();
    let mut conn = connect(&broker);
    create_topic(&mut conn, 7, TOPIC);
    for version in 3..=5 {
        produce(&mut conn, version);
    }
    for version in 0..=9 {
        let body = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(topic_name(TOPIC))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(-1)])]);
        let answer: ListOffsetsResponse = call(&mut conn, ApiKey::ListOffsets, version, &body);
        let p = &answer.topics[0].partitions[0];
        assert_eq!(p.error_code, 0, "ListOffsets v{version}");
        if version == 0 {
            assert_eq!(p.old_style_offsets, [3], "v0: the log end");
        } else {
            assert_eq!(p.offset, 3, "v{version}: the log end");
        }
    }
    for version in 0..=4 {
        let mut body = OffsetForLeaderEpochRequest::default().with_topics(vec![
            OffsetForLeaderTopic::default()
                .with_topic(topic_name(TOPIC))
                .with_partitions(vec![OffsetForLeaderPartition::default()
                    .with_partition(0)
                    .with_leader_epoch(0)]),
        ]);
        if version >= 3 {
            body = body.with_replica_id(BrokerId(-1));
        }
        let answer: OffsetForLeaderEpochResponse =
            call(&mut conn, ApiKey::OffsetForLeaderEpoch, version, &body);
        let p = &answer.topics[0].partitions[0];
        assert_eq!(p.error_code, 0, "OffsetForLeaderEpoch v{version}");
        assert_eq!(p.end_offset, 3, "v{version}");
    }
    for version in 0..=9 {
        let committed = 100 + version as i64;
        let mut body = OffsetCommitRequest::default()
            .with_group_id(GroupId(s(GROUP)))
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(topic_name(TOPIC))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(committed)])]);
        if version >= 1 {
            body = body.with_generation_id_or_member_epoch(-1);
        }
        let answer: OffsetCommitResponse = call(&mut conn, ApiKey::OffsetCommit, version, &body);
        assert_eq!(
            answer.topics[0].partitions[0].error_code, 0,
            "OffsetCommit v{version}"
        );
        let fetched = offset_fetch(&mut conn, version);
        assert_eq!(
            fetched, committed,
            "OffsetFetch v{version} reads what v{version} committed"
        );
    }
    for version in 0..=4 {
        let body = DescribeLogDirsRequest::default().with_topics(Some(vec![
            DescribableLogDirTopic::default()
                .with_topic(topic_name(TOPIC))
                .with_partitions(vec![0]),
        ]));
        let answer: DescribeLogDirsResponse =
            call(&mut conn, ApiKey::DescribeLogDirs, version, &body);
        let dir = &answer.results[0];
        assert_eq!(dir.error_code, 0, "DescribeLogDirs v{version}");
        assert_eq!(dir.topics[0].partitions[0].partition_index, 0);
        assert!(dir.topics[0].partitions[0].partition_size > 0, "v{version}");
        if version >= 4 {
            assert!(
                dir.total_bytes > 0 && dir.usable_bytes > 0,
                "v4 sizes the volume"
            );
        }
    }
    // One broker leads all it has: no election is ever needed, and asking for every
    // partition lists none (Kafka drops ELECTION_NOT_NEEDED then).
    for version in 0..=2 {
        let one = ElectLeadersRequest::default()
            .with_timeout_ms(1000)
            .with_topic_partitions(Some(vec![ElectTopicPartitions::default()
                .with_topic(topic_name(TOPIC))
                .with_partitions(vec![0, 99])]));
        let answer: ElectLeadersResponse = call(&mut conn, ApiKey::ElectLeaders, version, &one);
        let codes: Vec<i16> = answer.replica_election_results[0]
            .partition_result
            .iter()
            .map(|p| p.error_code)
            .collect();
        assert_eq!(codes, [84, 3], "ElectLeaders v{version}");
        let every: ElectLeadersResponse = call(
            &mut conn,
            ApiKey::ElectLeaders,
            version,
            &ElectLeadersRequest::default().with_topic_partitions(None),
        );
        assert!(every.replica_election_results.is_empty(), "v{version}");
    }
    // One broker is the only live broker: a target of itself moves nothing, any other broker
    // is INVALID_REPLICA_ASSIGNMENT, a cancel finds nothing in progress, nothing is listed.
    {
        use kafka_protocol::messages::alter_partition_reassignments_request::{
            ReassignablePartition, ReassignableTopic,
        };
        let partition = |index: i32, replicas: Option<Vec<i32>>| {
            ReassignablePartition::default()
                .with_partition_index(index)
                .with_replicas(replicas.map(|r| r.into_iter().map(BrokerId).collect()))
        };
        let mut code_of = |partitions: Vec<ReassignablePartition>| {
            let body = AlterPartitionReassignmentsRequest::default().with_topics(vec![
                ReassignableTopic::default()
                    .with_name(topic_name(TOPIC))
                    .with_partitions(partitions),
            ]);
            let answer: AlterPartitionReassignmentsResponse =
                call(&mut conn, ApiKey::AlterPartitionReassignments, 0, &body);
            let codes: Vec<(i32, i16)> = answer.responses[0]
                .partitions
                .iter()
                .map(|p| (p.partition_index, p.error_code))
                .collect();
            codes
        };
        assert_eq!(
            code_of(vec![
                partition(0, Some(vec![0])),
                partition(99, Some(vec![0]))
            ]),
            [(0, 0), (99, 3)]
        );
        assert_eq!(code_of(vec![partition(0, Some(vec![5]))]), [(0, 39)]);
        assert_eq!(code_of(vec![partition(0, Some(vec![0, 0]))]), [(0, 39)]);
        assert_eq!(code_of(vec![partition(0, None)]), [(0, 85)]);
        assert_eq!(
            code_of(vec![partition(0, None), partition(0, Some(vec![0]))]),
            [(0, 0)],
            "a partition named twice is answered once, for the last"
        );
        let listed: ListPartitionReassignmentsResponse = call(
            &mut conn,
            ApiKey::ListPartitionReassignments,
            0,
            &ListPartitionReassignmentsRequest::default().with_topics(None),
        );
        assert_eq!((listed.error_code, listed.topics.len()), (0, 0));
    }
    // Three records: each DeleteRecords version moves the log start one further.
    for version in 0..=2 {
        let body = DeleteRecordsRequest::default()
            .with_timeout_ms(10_000)
            .with_topics(vec![DeleteRecordsTopic::default()
                .with_name(topic_name(TOPIC))
                .with_partitions(vec![DeleteRecordsPartition::default()
                    .with_partition_index(0)
                    .with_offset(version as i64 + 1)])]);
        let answer: DeleteRecordsResponse = call(&mut conn, ApiKey::DeleteRecords, version, &body);
        let p = &answer.topics[0].partitions[0];
        assert_eq!(
            (p.error_code, p.low_watermark),
            (0, version as i64 + 1),
            "DeleteRecords v{version}"
        );
    }
}

fn offset_fetch(conn: &mut TcpStream, version: i16) -> i64 {
    let body = if version >= 8 {
        OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(s(GROUP)))
            .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                .with_name(topic_name(TOPIC))
                .with_partition_indexes(vec![0])]))])
    } else {
        OffsetFetchRequest::default()
            .with_group_id(GroupId(s(GROUP)))
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(topic_name(TOPIC))
                .with_partition_indexes(vec![0])]))
    };
    let answer: OffsetFetchResponse = call(conn, ApiKey::OffsetFetch, version, &body);
    if version >= 8 {
        let p = &answer.groups[0].topics[0].partitions[0];
        assert_eq!(p.error_code, 0);
        p.committed_offset
    } else {
        let p = &answer.topics[0].partitions[0];
        assert_eq!(p.error_code, 0);
        p.committed_offset
    }
}

#[test]
fn group_apis_answer_in_every_version() {
    let broker = broker();
    let mut conn = connect(&broker);
    for version in 0..=6 {
        let body = if version >= 4 {
            FindCoordinatorRequest::default().with_coordinator_keys(vec![s(GROUP)])
        } else {
            FindCoordinatorRequest::default().with_key(s(GROUP))
        };
        let answer: FindCoordinatorResponse =
            call(&mut conn, ApiKey::FindCoordinator, version, &body);
        let code = if version >= 4 {
            answer.coordinators[0].error_code
        } else {
            answer.error_code
        };
        assert!(
            code == 0 || code == 15,
            "FindCoordinator v{version}: {code}"
        );
    }
    for version in 0..=9 {
        let group = format!("join-v{version}");
        let mut body = JoinGroupRequest::default()
            .with_group_id(GroupId(s(&group)))
            .with_session_timeout_ms(10_000)
            .with_protocol_type(s("consumer"))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(s("range"))
                .with_metadata(Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 0]))]);
        if version >= 1 {
            body = body.with_rebalance_timeout_ms(10_000);
        }
        let answer: JoinGroupResponse = call(&mut conn, ApiKey::JoinGroup, version, &body);
        let expected = if version >= 4 { 79 } else { 0 };
        assert_eq!(answer.error_code, expected, "JoinGroup v{version}");
    }
    for version in 0..=4 {
        let body = HeartbeatRequest::default()
            .with_group_id(GroupId(s("join-v0")))
            .with_generation_id(1)
            .with_member_id(s("nobody"));
        let answer: HeartbeatResponse = call(&mut conn, ApiKey::Heartbeat, version, &body);
        assert_eq!(
            answer.error_code, 25,
            "Heartbeat v{version}: UNKNOWN_MEMBER_ID"
        );
    }
    for version in 0..=5 {
        let body = SyncGroupRequest::default()
            .with_group_id(GroupId(s("join-v0")))
            .with_generation_id(1)
            .with_member_id(s("nobody"));
        let answer: SyncGroupResponse = call(&mut conn, ApiKey::SyncGroup, version, &body);
        assert_eq!(
            answer.error_code, 25,
            "SyncGroup v{version}: UNKNOWN_MEMBER_ID"
        );
    }
    for version in 0..=5 {
        let body = DescribeGroupsRequest::default().with_groups(vec![GroupId(s("join-v0"))]);
        let answer: DescribeGroupsResponse =
            call(&mut conn, ApiKey::DescribeGroups, version, &body);
        assert_eq!(answer.groups[0].error_code, 0, "DescribeGroups v{version}");
    }
    for version in 0..=5 {
        let answer: ListGroupsResponse = call(
            &mut conn,
            ApiKey::ListGroups,
            version,
            &ListGroupsRequest::default(),
        );
        assert_eq!(answer.error_code, 0, "ListGroups v{version}");
        assert!(answer
            .groups
            .iter()
            .any(|g| g.group_id.as_str() == "join-v0"));
    }
    for version in 0..=5 {
        let body = if version >= 3 {
            LeaveGroupRequest::default()
                .with_group_id(GroupId(s("join-v1")))
                .with_members(vec![MemberIdentity::default().with_member_id(s("nobody"))])
        } else {
            LeaveGroupRequest::default()
                .with_group_id(GroupId(s("join-v1")))
                .with_member_id(s("nobody"))
        };
        let _: LeaveGroupResponse = call(&mut conn, ApiKey::LeaveGroup, version, &body);
    }
    for version in 0..=2 {
        let body = DeleteGroupsRequest::default()
            .with_groups_names(vec![GroupId(s(&format!("never-v{version}")))]);
        let answer: DeleteGroupsResponse = call(&mut conn, ApiKey::DeleteGroups, version, &body);
        assert_eq!(
            answer.results[0].error_code, 69,
            "DeleteGroups v{version}: GROUP_ID_NOT_FOUND"
        );
    }
    for version in 0..=5 {
        let body = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000);
        let answer: InitProducerIdResponse =
            call(&mut conn, ApiKey::InitProducerId, version, &body);
        assert_eq!(answer.error_code, 0, "InitProducerId v{version}");
        assert!(answer.producer_id.0 >= 0);
    }
}

/// The response header version of `key` at `version`, checked against the codec's table.
#[test]
fn old_versions_use_the_non_flexible_headers() {
    assert_eq!(ProduceResponse::header_version(2), 0);
    assert_eq!(FetchResponse::header_version(3), 0);
    assert_eq!(FetchResponse::header_version(13), 1);
}
