//! Kafka's error codes as one type: what every response carries, and how the data plane's
//! refusals (`ferrite_shards::Error`, `BatchError`) map onto them.
//!
//! The numbers come from the codec's table (`kafka_protocol::ResponseError`, generated from
//! Kafka's `Errors.java`), so no code here is written as a bare number.

use ferrite_shards::batch::record_checks::RecordErrorKind;
use ferrite_shards::batch::BatchError;
use ferrite_shards::Error;
use kafka_protocol::ResponseError;

/// A Kafka error code as a response carries it; `ErrorCode::NONE` is success.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ErrorCode(i16);

impl ErrorCode {
    pub const NONE: ErrorCode = ErrorCode(0);
    pub const UNKNOWN_SERVER_ERROR: ErrorCode = ErrorCode::of(ResponseError::UnknownServerError);
    pub const OFFSET_OUT_OF_RANGE: ErrorCode = ErrorCode::of(ResponseError::OffsetOutOfRange);
    pub const CORRUPT_MESSAGE: ErrorCode = ErrorCode::of(ResponseError::CorruptMessage);
    pub const UNKNOWN_TOPIC_OR_PARTITION: ErrorCode =
        ErrorCode::of(ResponseError::UnknownTopicOrPartition);
    pub const LEADER_NOT_AVAILABLE: ErrorCode = ErrorCode::of(ResponseError::LeaderNotAvailable);
    pub const LISTENER_NOT_FOUND: ErrorCode = ErrorCode::of(ResponseError::ListenerNotFound);
    pub const REPLICA_NOT_AVAILABLE: ErrorCode = ErrorCode::of(ResponseError::ReplicaNotAvailable);
    pub const NOT_LEADER_OR_FOLLOWER: ErrorCode = ErrorCode::of(ResponseError::NotLeaderOrFollower);
    pub const REQUEST_TIMED_OUT: ErrorCode = ErrorCode::of(ResponseError::RequestTimedOut);
    pub const MESSAGE_TOO_LARGE: ErrorCode = ErrorCode::of(ResponseError::MessageTooLarge);
    pub const MISMATCHED_ENDPOINT_TYPE: ErrorCode =
        ErrorCode::of(ResponseError::MismatchedEndpointType);
    pub const UNSUPPORTED_ENDPOINT_TYPE: ErrorCode =
        ErrorCode::of(ResponseError::UnsupportedEndpointType);
    pub const ELECTION_NOT_NEEDED: ErrorCode = ErrorCode::of(ResponseError::ElectionNotNeeded);
    pub const UNSUPPORTED_SASL_MECHANISM: ErrorCode =
        ErrorCode::of(ResponseError::UnsupportedSaslMechanism);
    pub const ILLEGAL_SASL_STATE: ErrorCode = ErrorCode::of(ResponseError::IllegalSaslState);
    pub const SECURITY_DISABLED: ErrorCode = ErrorCode::of(ResponseError::SecurityDisabled);
    pub const TOPIC_AUTHORIZATION_FAILED: ErrorCode =
        ErrorCode::of(ResponseError::TopicAuthorizationFailed);
    pub const GROUP_AUTHORIZATION_FAILED: ErrorCode =
        ErrorCode::of(ResponseError::GroupAuthorizationFailed);
    pub const CLUSTER_AUTHORIZATION_FAILED: ErrorCode =
        ErrorCode::of(ResponseError::ClusterAuthorizationFailed);
    pub const SASL_AUTHENTICATION_FAILED: ErrorCode =
        ErrorCode::of(ResponseError::SaslAuthenticationFailed);
    pub const RESOURCE_NOT_FOUND: ErrorCode = ErrorCode::of(ResponseError::ResourceNotFound);
    pub const DUPLICATE_RESOURCE: ErrorCode = ErrorCode::of(ResponseError::DuplicateResource);
    pub const UNACCEPTABLE_CREDENTIAL: ErrorCode =
        ErrorCode::of(ResponseError::UnacceptableCredential);
    pub const INVALID_REPLICA_ASSIGNMENT: ErrorCode =
        ErrorCode::of(ResponseError::InvalidReplicaAssignment);
    pub const NO_REASSIGNMENT_IN_PROGRESS: ErrorCode =
        ErrorCode::of(ResponseError::NoReassignmentInProgress);
    pub const PREFERRED_LEADER_NOT_AVAILABLE: ErrorCode =
        ErrorCode::of(ResponseError::PreferredLeaderNotAvailable);
    pub const ELIGIBLE_LEADERS_NOT_AVAILABLE: ErrorCode =
        ErrorCode::of(ResponseError::EligibleLeadersNotAvailable);
    pub const POLICY_VIOLATION: ErrorCode = ErrorCode::of(ResponseError::PolicyViolation);
    pub const GROUP_SUBSCRIBED_TO_TOPIC: ErrorCode =
        ErrorCode::of(ResponseError::GroupSubscribedToTopic);
    pub const THROTTLING_QUOTA_EXCEEDED: ErrorCode =
        ErrorCode::of(ResponseError::ThrottlingQuotaExceeded);
    pub const RECORD_LIST_TOO_LARGE: ErrorCode = ErrorCode::of(ResponseError::RecordListTooLarge);
    pub const INVALID_COMMIT_OFFSET_SIZE: ErrorCode =
        ErrorCode::of(ResponseError::InvalidCommitOffsetSize);
    pub const OFFSET_METADATA_TOO_LARGE: ErrorCode =
        ErrorCode::of(ResponseError::OffsetMetadataTooLarge);
    pub const COORDINATOR_LOAD_IN_PROGRESS: ErrorCode =
        ErrorCode::of(ResponseError::CoordinatorLoadInProgress);
    pub const COORDINATOR_NOT_AVAILABLE: ErrorCode =
        ErrorCode::of(ResponseError::CoordinatorNotAvailable);
    pub const NOT_COORDINATOR: ErrorCode = ErrorCode::of(ResponseError::NotCoordinator);
    pub const INVALID_TOPIC_EXCEPTION: ErrorCode =
        ErrorCode::of(ResponseError::InvalidTopicException);
    pub const NOT_ENOUGH_REPLICAS: ErrorCode = ErrorCode::of(ResponseError::NotEnoughReplicas);
    pub const NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode =
        ErrorCode::of(ResponseError::NotEnoughReplicasAfterAppend);
    pub const INVALID_REQUIRED_ACKS: ErrorCode = ErrorCode::of(ResponseError::InvalidRequiredAcks);
    pub const ILLEGAL_GENERATION: ErrorCode = ErrorCode::of(ResponseError::IllegalGeneration);
    pub const INCONSISTENT_GROUP_PROTOCOL: ErrorCode =
        ErrorCode::of(ResponseError::InconsistentGroupProtocol);
    pub const INVALID_GROUP_ID: ErrorCode = ErrorCode::of(ResponseError::InvalidGroupId);
    pub const UNKNOWN_MEMBER_ID: ErrorCode = ErrorCode::of(ResponseError::UnknownMemberId);
    pub const INVALID_SESSION_TIMEOUT: ErrorCode =
        ErrorCode::of(ResponseError::InvalidSessionTimeout);
    pub const REBALANCE_IN_PROGRESS: ErrorCode = ErrorCode::of(ResponseError::RebalanceInProgress);
    pub const INVALID_TIMESTAMP: ErrorCode = ErrorCode::of(ResponseError::InvalidTimestamp);
    pub const UNSUPPORTED_VERSION: ErrorCode = ErrorCode::of(ResponseError::UnsupportedVersion);
    pub const TOPIC_ALREADY_EXISTS: ErrorCode = ErrorCode::of(ResponseError::TopicAlreadyExists);
    pub const INVALID_PARTITIONS: ErrorCode = ErrorCode::of(ResponseError::InvalidPartitions);
    pub const INVALID_REPLICATION_FACTOR: ErrorCode =
        ErrorCode::of(ResponseError::InvalidReplicationFactor);
    pub const INVALID_CONFIG: ErrorCode = ErrorCode::of(ResponseError::InvalidConfig);
    pub const INVALID_REQUEST: ErrorCode = ErrorCode::of(ResponseError::InvalidRequest);
    pub const OUT_OF_ORDER_SEQUENCE_NUMBER: ErrorCode =
        ErrorCode::of(ResponseError::OutOfOrderSequenceNumber);
    pub const INVALID_PRODUCER_EPOCH: ErrorCode =
        ErrorCode::of(ResponseError::InvalidProducerEpoch);
    pub const INVALID_TXN_STATE: ErrorCode = ErrorCode::of(ResponseError::InvalidTxnState);
    pub const INVALID_PRODUCER_ID_MAPPING: ErrorCode =
        ErrorCode::of(ResponseError::InvalidProducerIdMapping);
    pub const INVALID_TRANSACTION_TIMEOUT: ErrorCode =
        ErrorCode::of(ResponseError::InvalidTransactionTimeout);
    pub const CONCURRENT_TRANSACTIONS: ErrorCode =
        ErrorCode::of(ResponseError::ConcurrentTransactions);
    pub const TRANSACTION_COORDINATOR_FENCED: ErrorCode =
        ErrorCode::of(ResponseError::TransactionCoordinatorFenced);
    pub const OPERATION_NOT_ATTEMPTED: ErrorCode =
        ErrorCode::of(ResponseError::OperationNotAttempted);
    pub const UNSTABLE_OFFSET_COMMIT: ErrorCode =
        ErrorCode::of(ResponseError::UnstableOffsetCommit);
    pub const PRODUCER_FENCED: ErrorCode = ErrorCode::of(ResponseError::ProducerFenced);
    pub const TRANSACTIONAL_ID_NOT_FOUND: ErrorCode =
        ErrorCode::of(ResponseError::TransactionalIdNotFound);
    pub const TRANSACTION_ABORTABLE: ErrorCode = ErrorCode::of(ResponseError::TransactionAbortable);
    pub const FETCH_SESSION_ID_NOT_FOUND: ErrorCode =
        ErrorCode::of(ResponseError::FetchSessionIdNotFound);
    pub const INVALID_FETCH_SESSION_EPOCH: ErrorCode =
        ErrorCode::of(ResponseError::InvalidFetchSessionEpoch);
    pub const FETCH_SESSION_TOPIC_ID_ERROR: ErrorCode =
        ErrorCode::of(ResponseError::FetchSessionTopicIdError);
    pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: ErrorCode =
        ErrorCode::of(ResponseError::TransactionalIdAuthorizationFailed);
    pub const KAFKA_STORAGE_ERROR: ErrorCode = ErrorCode::of(ResponseError::KafkaStorageError);
    pub const NON_EMPTY_GROUP: ErrorCode = ErrorCode::of(ResponseError::NonEmptyGroup);
    pub const GROUP_ID_NOT_FOUND: ErrorCode = ErrorCode::of(ResponseError::GroupIdNotFound);
    pub const TOPIC_DELETION_DISABLED: ErrorCode =
        ErrorCode::of(ResponseError::TopicDeletionDisabled);
    pub const FENCED_LEADER_EPOCH: ErrorCode = ErrorCode::of(ResponseError::FencedLeaderEpoch);
    pub const UNKNOWN_LEADER_EPOCH: ErrorCode = ErrorCode::of(ResponseError::UnknownLeaderEpoch);
    pub const UNSUPPORTED_COMPRESSION_TYPE: ErrorCode =
        ErrorCode::of(ResponseError::UnsupportedCompressionType);
    pub const MEMBER_ID_REQUIRED: ErrorCode = ErrorCode::of(ResponseError::MemberIdRequired);
    pub const FENCED_INSTANCE_ID: ErrorCode = ErrorCode::of(ResponseError::FencedInstanceId);
    pub const INVALID_RECORD: ErrorCode = ErrorCode::of(ResponseError::InvalidRecord);
    pub const UNKNOWN_TOPIC_ID: ErrorCode = ErrorCode::of(ResponseError::UnknownTopicId);

    const fn of(e: ResponseError) -> ErrorCode {
        ErrorCode(e.code())
    }

    /// The number on the wire.
    pub const fn code(self) -> i16 {
        self.0
    }

    /// The code a response carried (0: none).
    pub const fn from_code(code: i16) -> ErrorCode {
        ErrorCode(code)
    }

    pub const fn is_error(self) -> bool {
        self.0 != 0
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match ResponseError::try_from_code(self.0) {
            None => write!(f, "NONE (0)"),
            Some(e) => write!(f, "{e} ({})", self.0),
        }
    }
}

/// The code for a data-plane error, as Kafka would answer it.
pub fn code_for(e: &Error) -> ErrorCode {
    match e {
        Error::InvalidBatch(b) => batch_code(b),
        Error::OutOfOrderSequence { .. } => ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER,
        Error::InvalidProducerEpoch { .. } => ErrorCode::INVALID_PRODUCER_EPOCH,
        Error::InvalidTxnState { .. } => ErrorCode::INVALID_TXN_STATE,
        Error::CoordinatorFenced { .. } => ErrorCode::TRANSACTION_COORDINATOR_FENCED,
        Error::OffsetOutOfRange { .. } => ErrorCode::OFFSET_OUT_OF_RANGE,
        // The partition is closing (shutdown, deletion): the client looks it up again.
        Error::Closed(_) | Error::NotLeader(_) => ErrorCode::NOT_LEADER_OR_FOLLOWER,
        // The topic was deleted while the request waited: it is gone, as Kafka answers for a
        // partition it no longer has.
        Error::Deleted(_) => ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
        // A full disk or failing device, or corruption met by a read: retriable for the client,
        // and the operator sees the cause in the log.
        Error::Io { .. } | Error::Corrupt { .. } => ErrorCode::KAFKA_STORAGE_ERROR,
        // Never met by a request: the cleaner runs in the background.
        Error::Cleaner { .. } => ErrorCode::UNKNOWN_SERVER_ERROR,
    }
}

/// The code Kafka answers for a refused batch (`Errors.forException` of what `UnifiedLog` and
/// `LogValidator` throw): CorruptRecordException is ErrorCode::CORRUPT_MESSAGE, InvalidRecordException
/// ErrorCode::INVALID_RECORD, and what Kafka reports as a bare KafkaException or IllegalArgumentException
/// (a failed decompression, a codec id above 4) ErrorCode::UNKNOWN_SERVER_ERROR.
pub fn batch_code(b: &BatchError) -> ErrorCode {
    match b {
        BatchError::TooLarge { .. } => ErrorCode::MESSAGE_TOO_LARGE,
        BatchError::UnsupportedCompression { codec: 4 } => ErrorCode::UNSUPPORTED_COMPRESSION_TYPE,
        BatchError::UnsupportedCompression { .. } | BatchError::BadCompressedData { .. } => {
            ErrorCode::UNKNOWN_SERVER_ERROR
        }
        BatchError::BadRecordCount { .. }
        | BatchError::BadProducerFields { .. }
        | BatchError::NonZeroBaseOffset { .. }
        | BatchError::ControlBatchFromClient
        | BatchError::MalformedRecord { .. }
        | BatchError::InvalidLegacyMessage { .. }
        | BatchError::MixedMagic { .. }
        | BatchError::Empty => ErrorCode::INVALID_RECORD,
        BatchError::RecordsRefused { errors, .. } => {
            if errors
                .iter()
                .any(|e| e.kind == RecordErrorKind::InvalidTimestamp)
            {
                ErrorCode::INVALID_TIMESTAMP
            } else {
                ErrorCode::INVALID_RECORD
            }
        }
        BatchError::TooShort { .. }
        | BatchError::BadMagic { .. }
        | BatchError::LengthMismatch { .. }
        | BatchError::CrcMismatch { .. }
        | BatchError::TrailingBytes { .. }
        | BatchError::BadRecords { .. }
        | BatchError::CorruptLegacyMessage { .. } => ErrorCode::CORRUPT_MESSAGE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_shards::batch::record_checks::RecordError;

    fn refused(kinds: &[RecordErrorKind]) -> BatchError {
        BatchError::RecordsRefused {
            errors: kinds
                .iter()
                .enumerate()
                .map(|(i, &kind)| RecordError {
                    index: i as i32,
                    kind,
                    message: String::new(),
                })
                .collect(),
            count: kinds.len(),
        }
    }

    /// Each refusal gets the code Kafka's exception for it maps to.
    #[test]
    fn batch_refusals_get_kafkas_codes() {
        let cases = [
            (
                BatchError::TooLarge { len: 2, max: 1 },
                ErrorCode::MESSAGE_TOO_LARGE,
            ),
            (
                BatchError::CrcMismatch {
                    stored: 1,
                    computed: 2,
                },
                ErrorCode::CORRUPT_MESSAGE,
            ),
            (
                BatchError::BadMagic { magic: 7 },
                ErrorCode::CORRUPT_MESSAGE,
            ),
            (
                BatchError::LengthMismatch {
                    declared: 9,
                    available: 3,
                },
                ErrorCode::CORRUPT_MESSAGE,
            ),
            (
                BatchError::NonZeroBaseOffset { base_offset: 3 },
                ErrorCode::INVALID_RECORD,
            ),
            (
                BatchError::ControlBatchFromClient,
                ErrorCode::INVALID_RECORD,
            ),
            (
                BatchError::BadRecordCount {
                    record_count: 0,
                    last_offset_delta: 0,
                },
                ErrorCode::INVALID_RECORD,
            ),
            (
                BatchError::BadProducerFields {
                    producer_id: 1,
                    producer_epoch: 0,
                    base_sequence: -1,
                },
                ErrorCode::INVALID_RECORD,
            ),
            (
                BatchError::MalformedRecord {
                    index: 0,
                    reason: "",
                },
                ErrorCode::INVALID_RECORD,
            ),
            (
                BatchError::MixedMagic { first: 2, magic: 1 },
                ErrorCode::INVALID_RECORD,
            ),
            (BatchError::Empty, ErrorCode::INVALID_RECORD),
            (
                BatchError::UnsupportedCompression { codec: 4 },
                ErrorCode::UNSUPPORTED_COMPRESSION_TYPE,
            ),
            (
                BatchError::UnsupportedCompression { codec: 6 },
                ErrorCode::UNKNOWN_SERVER_ERROR,
            ),
            (
                BatchError::BadCompressedData {
                    reason: String::new(),
                },
                ErrorCode::UNKNOWN_SERVER_ERROR,
            ),
            (
                BatchError::CorruptLegacyMessage {
                    reason: String::new(),
                },
                ErrorCode::CORRUPT_MESSAGE,
            ),
            (
                BatchError::InvalidLegacyMessage {
                    reason: String::new(),
                },
                ErrorCode::INVALID_RECORD,
            ),
            (
                refused(&[RecordErrorKind::InvalidRecord]),
                ErrorCode::INVALID_RECORD,
            ),
            (
                refused(&[
                    RecordErrorKind::InvalidRecord,
                    RecordErrorKind::InvalidTimestamp,
                ]),
                ErrorCode::INVALID_TIMESTAMP,
            ),
        ];
        for (error, code) in cases {
            assert_eq!(batch_code(&error), code, "{error:?}");
        }
    }
}
