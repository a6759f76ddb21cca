// Real requests of every API Ferrite serves, populated so that decoding reaches nested
// lists, for the fuzz target of the request decoder (`src/handlers/decode_fuzz.rs` includes
// this file) and the wire-level mutation test (`tests/mutation.rs`).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{encode_request_header_into_buffer, StrBytes};

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// A request of `api` with something in each list, so mutations reach nested decoding.
pub fn populated(api: ApiKey) -> RequestKind {
    let topic = TopicName(s("fuzzed"));
    let group = GroupId(s("group"));
    match api {
        ApiKey::Produce => {
            RequestKind::Produce(ProduceRequest::default().with_acks(-1).with_topic_data(
                vec![produce_request::TopicProduceData::default()
                    .with_name(topic)
                    .with_partition_data(vec![
                        produce_request::PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(Bytes::from_static(&[0u8; 70]))),
                    ])],
            ))
        }
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
        ApiKey::AddPartitionsToTxn => RequestKind::AddPartitionsToTxn(
            AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(TransactionalId(s("fuzzed-txn")))
                .with_v3_and_below_topics(vec![
                    add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                        .with_name(topic.clone())
                        .with_partitions(vec![0]),
                ]),
        ),
        ApiKey::AddOffsetsToTxn => RequestKind::AddOffsetsToTxn(
            AddOffsetsToTxnRequest::default()
                .with_transactional_id(TransactionalId(s("fuzzed-txn")))
                .with_group_id(group.clone()),
        ),
        ApiKey::TxnOffsetCommit => RequestKind::TxnOffsetCommit(
            TxnOffsetCommitRequest::default()
                .with_transactional_id(TransactionalId(s("fuzzed-txn")))
                .with_group_id(group.clone())
                .with_topics(vec![txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                    .with_name(topic.clone())
                    .with_partitions(vec![
                        txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                            .with_committed_offset(1),
                    ])]),
        ),
        ApiKey::DescribeProducers => RequestKind::DescribeProducers(
            DescribeProducersRequest::default().with_topics(vec![
                describe_producers_request::TopicRequest::default()
                    .with_name(topic.clone())
                    .with_partition_indexes(vec![0]),
            ]),
        ),
        ApiKey::DescribeTransactions => RequestKind::DescribeTransactions(
            DescribeTransactionsRequest::default()
                .with_transactional_ids(vec![TransactionalId(s("fuzzed-txn"))]),
        ),
        ApiKey::ListTransactions => RequestKind::ListTransactions(
            ListTransactionsRequest::default()
                .with_state_filters(vec![s("Ongoing")])
                .with_producer_id_filters(vec![ProducerId(1)]),
        ),
        ApiKey::WriteTxnMarkers => RequestKind::WriteTxnMarkers(
            WriteTxnMarkersRequest::default().with_markers(vec![
                write_txn_markers_request::WritableTxnMarker::default()
                    .with_producer_id(ProducerId(1))
                    .with_topics(vec![
                        write_txn_markers_request::WritableTxnMarkerTopic::default()
                            .with_name(topic.clone())
                            .with_partition_indexes(vec![0]),
                    ]),
            ]),
        ),
        ApiKey::EndTxn => RequestKind::EndTxn(
            EndTxnRequest::default().with_transactional_id(TransactionalId(s("fuzzed-txn"))),
        ),
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
        ApiKey::DeleteRecords => {
            RequestKind::DeleteRecords(DeleteRecordsRequest::default().with_topics(vec![
                delete_records_request::DeleteRecordsTopic::default()
                    .with_name(topic)
                    .with_partitions(vec![delete_records_request::DeleteRecordsPartition::default()
                        .with_partition_index(0)
                        .with_offset(-1)]),
            ]))
        }
        ApiKey::DescribeLogDirs => {
            RequestKind::DescribeLogDirs(DescribeLogDirsRequest::default().with_topics(Some(vec![
                describe_log_dirs_request::DescribableLogDirTopic::default()
                    .with_topic(topic)
                    .with_partitions(vec![0, 1]),
            ])))
        }
        ApiKey::OffsetDelete => RequestKind::OffsetDelete(
            OffsetDeleteRequest::default()
                .with_group_id(group)
                .with_topics(vec![
                    offset_delete_request::OffsetDeleteRequestTopic::default()
                        .with_name(topic)
                        .with_partitions(vec![
                            offset_delete_request::OffsetDeleteRequestPartition::default(),
                        ]),
                ]),
        ),
        ApiKey::AlterConfigs => {
            RequestKind::AlterConfigs(AlterConfigsRequest::default().with_resources(
                vec![alter_configs_request::AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s("fuzzed"))
                .with_configs(vec![alter_configs_request::AlterableConfig::default()
                    .with_name(s("retention.ms"))
                    .with_value(Some(s("1000")))])],
            ))
        }
        ApiKey::IncrementalAlterConfigs => RequestKind::IncrementalAlterConfigs(
            IncrementalAlterConfigsRequest::default().with_resources(vec![
                incremental_alter_configs_request::AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s("fuzzed"))
                    .with_configs(vec![
                        incremental_alter_configs_request::AlterableConfig::default()
                            .with_name(s("cleanup.policy"))
                            .with_config_operation(2)
                            .with_value(Some(s("compact"))),
                    ]),
            ]),
        ),
        ApiKey::ElectLeaders => RequestKind::ElectLeaders(
            ElectLeadersRequest::default()
                .with_timeout_ms(100)
                .with_topic_partitions(Some(vec![
                    elect_leaders_request::TopicPartitions::default()
                        .with_topic(topic)
                        .with_partitions(vec![0]),
                ])),
        ),
        ApiKey::AlterPartitionReassignments => RequestKind::AlterPartitionReassignments(
            AlterPartitionReassignmentsRequest::default()
                .with_timeout_ms(100)
                .with_topics(vec![alter_partition_reassignments_request::ReassignableTopic::default()
                    .with_name(topic)
                    .with_partitions(vec![
                        alter_partition_reassignments_request::ReassignablePartition::default()
                            .with_partition_index(0)
                            .with_replicas(Some(vec![BrokerId(0)])),
                    ])]),
        ),
        ApiKey::ListPartitionReassignments => RequestKind::ListPartitionReassignments(
            ListPartitionReassignmentsRequest::default()
                .with_timeout_ms(100)
                .with_topics(Some(vec![
                    list_partition_reassignments_request::ListPartitionReassignmentsTopics::default()
                        .with_name(topic)
                        .with_partition_indexes(vec![0]),
                ])),
        ),
        ApiKey::DescribeClientQuotas => RequestKind::DescribeClientQuotas(
            DescribeClientQuotasRequest::default().with_components(vec![
                describe_client_quotas_request::ComponentData::default()
                    .with_entity_type(s("client-id"))
                    .with_match_type(0)
                    .with_match(Some(s("fuzz"))),
            ]),
        ),
        ApiKey::AlterClientQuotas => RequestKind::AlterClientQuotas(
            AlterClientQuotasRequest::default().with_entries(vec![
                alter_client_quotas_request::EntryData::default()
                    .with_entity(vec![alter_client_quotas_request::EntityData::default()
                        .with_entity_type(s("client-id"))
                        .with_entity_name(Some(s("fuzz")))])
                    .with_ops(vec![alter_client_quotas_request::OpData::default()
                        .with_key(s("producer_byte_rate"))
                        .with_value(1e6)]),
            ]),
        ),
        ApiKey::DescribeUserScramCredentials => RequestKind::DescribeUserScramCredentials(
            DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
                describe_user_scram_credentials_request::UserName::default().with_name(s("fuzz")),
            ])),
        ),
        ApiKey::AlterUserScramCredentials => RequestKind::AlterUserScramCredentials(
            AlterUserScramCredentialsRequest::default()
                .with_upsertions(vec![
                    alter_user_scram_credentials_request::ScramCredentialUpsertion::default()
                        .with_name(s("fuzz"))
                        .with_mechanism(1)
                        .with_iterations(4096)
                        .with_salt(Bytes::from_static(b"salt"))
                        .with_salted_password(Bytes::from_static(&[7; 32])),
                ])
                .with_deletions(vec![
                    alter_user_scram_credentials_request::ScramCredentialDeletion::default()
                        .with_name(s("other"))
                        .with_mechanism(2),
                ]),
        ),
        ApiKey::CreateAcls => RequestKind::CreateAcls(CreateAclsRequest::default().with_creations(
            vec![create_acls_request::AclCreation::default()
                .with_resource_type(2)
                .with_resource_name(s("fuzz"))
                .with_resource_pattern_type(3)
                .with_principal(s("User:fuzz"))
                .with_host(s("*"))
                .with_operation(3)
                .with_permission_type(3)],
        )),
        ApiKey::DescribeAcls => RequestKind::DescribeAcls(
            DescribeAclsRequest::default()
                .with_resource_type_filter(1)
                .with_resource_name_filter(None)
                .with_pattern_type_filter(1)
                .with_principal_filter(None)
                .with_host_filter(None)
                .with_operation(1)
                .with_permission_type(1),
        ),
        ApiKey::DeleteAcls => RequestKind::DeleteAcls(DeleteAclsRequest::default().with_filters(
            vec![delete_acls_request::DeleteAclsFilter::default()
                .with_resource_type_filter(2)
                .with_resource_name_filter(Some(s("fuzz")))
                .with_pattern_type_filter(3)
                .with_principal_filter(None)
                .with_host_filter(None)
                .with_operation(1)
                .with_permission_type(1)],
        )),
        ApiKey::SaslHandshake => RequestKind::SaslHandshake(
            SaslHandshakeRequest::default().with_mechanism(s("SCRAM-SHA-512")),
        ),
        ApiKey::SaslAuthenticate => RequestKind::SaslAuthenticate(
            SaslAuthenticateRequest::default()
                .with_auth_bytes(Bytes::from_static(b"n,,n=fuzz,r=abcdef")),
        ),
        ApiKey::DescribeCluster => RequestKind::DescribeCluster(
            DescribeClusterRequest::default()
                .with_include_cluster_authorized_operations(true)
                .with_endpoint_type(1),
        ),
        other => panic!("{other:?} is served but has no sample request here"),
    }
}

/// The frame (without its size prefix) of `api` at `version`: the populated body where that
/// version can carry it, else the default body.
pub fn frame(api: ApiKey, version: i16) -> Vec<u8> {
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
            RequestKind::DescribeCluster(_) => RequestKind::DescribeCluster(Default::default()),
            RequestKind::SaslHandshake(_) => RequestKind::SaslHandshake(Default::default()),
            RequestKind::CreateAcls(_) => RequestKind::CreateAcls(Default::default()),
            RequestKind::DescribeAcls(_) => RequestKind::DescribeAcls(Default::default()),
            RequestKind::DeleteAcls(_) => RequestKind::DeleteAcls(Default::default()),
            RequestKind::SaslAuthenticate(_) => RequestKind::SaslAuthenticate(Default::default()),
            RequestKind::DeleteRecords(_) => RequestKind::DeleteRecords(Default::default()),
            RequestKind::ElectLeaders(_) => RequestKind::ElectLeaders(Default::default()),
            RequestKind::DescribeUserScramCredentials(_) => {
                RequestKind::DescribeUserScramCredentials(Default::default())
            }
            RequestKind::AlterUserScramCredentials(_) => {
                RequestKind::AlterUserScramCredentials(Default::default())
            }
            RequestKind::DescribeClientQuotas(_) => {
                RequestKind::DescribeClientQuotas(Default::default())
            }
            RequestKind::AlterClientQuotas(_) => RequestKind::AlterClientQuotas(Default::default()),
            RequestKind::AlterPartitionReassignments(_) => {
                RequestKind::AlterPartitionReassignments(Default::default())
            }
            RequestKind::ListPartitionReassignments(_) => {
                RequestKind::ListPartitionReassignments(Default::default())
            }
            RequestKind::AlterConfigs(_) => RequestKind::AlterConfigs(Default::default()),
            RequestKind::IncrementalAlterConfigs(_) => {
                RequestKind::IncrementalAlterConfigs(Default::default())
            }
            RequestKind::OffsetDelete(_) => RequestKind::OffsetDelete(Default::default()),
            RequestKind::DescribeLogDirs(_) => RequestKind::DescribeLogDirs(Default::default()),
            RequestKind::OffsetForLeaderEpoch(_) => {
                RequestKind::OffsetForLeaderEpoch(Default::default())
            }
            RequestKind::AddPartitionsToTxn(_) => {
                RequestKind::AddPartitionsToTxn(Default::default())
            }
            RequestKind::AddOffsetsToTxn(_) => RequestKind::AddOffsetsToTxn(Default::default()),
            RequestKind::EndTxn(_) => RequestKind::EndTxn(Default::default()),
            RequestKind::TxnOffsetCommit(_) => RequestKind::TxnOffsetCommit(Default::default()),
            RequestKind::WriteTxnMarkers(_) => RequestKind::WriteTxnMarkers(Default::default()),
            RequestKind::DescribeProducers(_) => RequestKind::DescribeProducers(Default::default()),
            RequestKind::DescribeTransactions(_) => {
                RequestKind::DescribeTransactions(Default::default())
            }
            RequestKind::ListTransactions(_) => RequestKind::ListTransactions(Default::default()),
            other => other,
        }
    }
}
