//! The APIs Ferrite serves and their versions: what ApiVersions advertises and what the
//! dispatcher admits.

use kafka_protocol::messages::ApiKey;

/// APIs and version ranges Ferrite serves (what ApiVersions advertises): for each API, exactly
/// the versions Kafka 3.9 serves (its `clients/src/main/resources/common/message/*.json`
/// `validVersions`), old message formats and topic ids included.
pub const SUPPORTED: &[(ApiKey, i16, i16)] = &[
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

/// The API key's entry, if Ferrite serves it.
pub fn supported(api_key: i16) -> Option<(ApiKey, i16, i16)> {
    SUPPORTED
        .iter()
        .copied()
        .find(|(k, _, _)| *k as i16 == api_key)
}
