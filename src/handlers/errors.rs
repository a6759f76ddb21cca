//! Kafka error codes, and how data-plane errors map onto them.

use crate::server::shard::Shard;
use ferrite_shards::batch::record_checks::RecordErrorKind;
use ferrite_shards::batch::BatchError;
use ferrite_shards::Error;
use kafka_protocol::messages::ApiKey;

pub const UNKNOWN_SERVER_ERROR: i16 = -1;
pub const NONE: i16 = 0;
pub const OFFSET_OUT_OF_RANGE: i16 = 1;
pub const CORRUPT_MESSAGE: i16 = 2;
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
pub const LEADER_NOT_AVAILABLE: i16 = 5;
pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
pub const REQUEST_TIMED_OUT: i16 = 7;
pub const MESSAGE_TOO_LARGE: i16 = 10;
pub const OFFSET_METADATA_TOO_LARGE: i16 = 12;
pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
pub const NOT_COORDINATOR: i16 = 16;
pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
pub const NOT_ENOUGH_REPLICAS: i16 = 19;
pub const NOT_ENOUGH_REPLICAS_AFTER_APPEND: i16 = 20;
pub const INVALID_REQUIRED_ACKS: i16 = 21;
pub const INVALID_TIMESTAMP: i16 = 32;
pub const UNSUPPORTED_VERSION: i16 = 35;
pub const ILLEGAL_GENERATION: i16 = 22;
pub const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
pub const INVALID_GROUP_ID: i16 = 24;
pub const UNKNOWN_MEMBER_ID: i16 = 25;
pub const INVALID_SESSION_TIMEOUT: i16 = 26;
pub const REBALANCE_IN_PROGRESS: i16 = 27;
pub const INVALID_REQUEST: i16 = 42;
pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
pub const INVALID_PRODUCER_EPOCH: i16 = 47;
pub const INVALID_TXN_STATE: i16 = 48;
pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
pub const KAFKA_STORAGE_ERROR: i16 = 56;
pub const NON_EMPTY_GROUP: i16 = 68;
pub const TOPIC_DELETION_DISABLED: i16 = 73;
pub const GROUP_ID_NOT_FOUND: i16 = 69;
pub const UNSUPPORTED_COMPRESSION_TYPE: i16 = 76;
pub const FENCED_LEADER_EPOCH: i16 = 74;
pub const UNKNOWN_LEADER_EPOCH: i16 = 75;
pub const MEMBER_ID_REQUIRED: i16 = 79;
pub const FENCED_INSTANCE_ID: i16 = 82;
pub const INVALID_RECORD: i16 = 87;
pub const UNKNOWN_TOPIC_ID: i16 = 100;

/// The code for a data-plane error, as Kafka would answer it.
pub fn code_for(e: &Error) -> i16 {
    match e {
        Error::InvalidBatch(b) => batch_code(b),
        Error::OutOfOrderSequence { .. } => OUT_OF_ORDER_SEQUENCE_NUMBER,
        Error::InvalidProducerEpoch { .. } => INVALID_PRODUCER_EPOCH,
        Error::OffsetOutOfRange { .. } => OFFSET_OUT_OF_RANGE,
        // The partition is closing (shutdown, deletion): the client looks it up again.
        Error::Closed(_) | Error::NotLeader(_) => NOT_LEADER_OR_FOLLOWER,
        // A full disk or failing device, or corruption met by a read: retriable for the client,
        // and the operator sees the cause in the log.
        Error::Io { .. } | Error::Corrupt { .. } => KAFKA_STORAGE_ERROR,
        // Never met by a request: the cleaner runs in the background.
        Error::Cleaner { .. } => UNKNOWN_SERVER_ERROR,
    }
}

/// The code Kafka answers for a refused batch (`Errors.forException` of what `UnifiedLog` and
/// `LogValidator` throw): CorruptRecordException is CORRUPT_MESSAGE, InvalidRecordException
/// INVALID_RECORD, and what Kafka reports as a bare KafkaException or IllegalArgumentException
/// (a failed decompression, a codec id above 4) UNKNOWN_SERVER_ERROR.
pub fn batch_code(b: &BatchError) -> i16 {
    match b {
        BatchError::TooLarge { .. } => MESSAGE_TOO_LARGE,
        BatchError::UnsupportedCompression { codec: 4 } => UNSUPPORTED_COMPRESSION_TYPE,
        BatchError::UnsupportedCompression { .. } | BatchError::BadCompressedData { .. } => {
            UNKNOWN_SERVER_ERROR
        }
        BatchError::BadRecordCount { .. }
        | BatchError::BadProducerFields { .. }
        | BatchError::NonZeroBaseOffset { .. }
        | BatchError::ControlBatchFromClient
        | BatchError::MalformedRecord { .. }
        | BatchError::InvalidLegacyMessage { .. }
        | BatchError::MixedMagic { .. }
        | BatchError::Empty => INVALID_RECORD,
        BatchError::RecordsRefused { errors, .. } => {
            if errors
                .iter()
                .any(|e| e.kind == RecordErrorKind::InvalidTimestamp)
            {
                INVALID_TIMESTAMP
            } else {
                INVALID_RECORD
            }
        }
        BatchError::TooShort { .. }
        | BatchError::BadMagic { .. }
        | BatchError::LengthMismatch { .. }
        | BatchError::CrcMismatch { .. }
        | BatchError::TrailingBytes { .. }
        | BatchError::BadRecords { .. }
        | BatchError::CorruptLegacyMessage { .. } => CORRUPT_MESSAGE,
    }
}

/// Kafka's name of an error code, for logs.
pub fn name(code: i16) -> &'static str {
    match code {
        UNKNOWN_SERVER_ERROR => "UNKNOWN_SERVER_ERROR",
        NONE => "NONE",
        OFFSET_OUT_OF_RANGE => "OFFSET_OUT_OF_RANGE",
        CORRUPT_MESSAGE => "CORRUPT_MESSAGE",
        UNKNOWN_TOPIC_OR_PARTITION => "UNKNOWN_TOPIC_OR_PARTITION",
        LEADER_NOT_AVAILABLE => "LEADER_NOT_AVAILABLE",
        NOT_LEADER_OR_FOLLOWER => "NOT_LEADER_OR_FOLLOWER",
        REQUEST_TIMED_OUT => "REQUEST_TIMED_OUT",
        MESSAGE_TOO_LARGE => "MESSAGE_TOO_LARGE",
        OFFSET_METADATA_TOO_LARGE => "OFFSET_METADATA_TOO_LARGE",
        COORDINATOR_LOAD_IN_PROGRESS => "COORDINATOR_LOAD_IN_PROGRESS",
        COORDINATOR_NOT_AVAILABLE => "COORDINATOR_NOT_AVAILABLE",
        NOT_COORDINATOR => "NOT_COORDINATOR",
        INVALID_TOPIC_EXCEPTION => "INVALID_TOPIC_EXCEPTION",
        NOT_ENOUGH_REPLICAS => "NOT_ENOUGH_REPLICAS",
        NOT_ENOUGH_REPLICAS_AFTER_APPEND => "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        INVALID_REQUIRED_ACKS => "INVALID_REQUIRED_ACKS",
        ILLEGAL_GENERATION => "ILLEGAL_GENERATION",
        INCONSISTENT_GROUP_PROTOCOL => "INCONSISTENT_GROUP_PROTOCOL",
        INVALID_GROUP_ID => "INVALID_GROUP_ID",
        UNKNOWN_MEMBER_ID => "UNKNOWN_MEMBER_ID",
        INVALID_SESSION_TIMEOUT => "INVALID_SESSION_TIMEOUT",
        REBALANCE_IN_PROGRESS => "REBALANCE_IN_PROGRESS",
        INVALID_TIMESTAMP => "INVALID_TIMESTAMP",
        UNSUPPORTED_VERSION => "UNSUPPORTED_VERSION",
        INVALID_REQUEST => "INVALID_REQUEST",
        OUT_OF_ORDER_SEQUENCE_NUMBER => "OUT_OF_ORDER_SEQUENCE_NUMBER",
        INVALID_PRODUCER_EPOCH => "INVALID_PRODUCER_EPOCH",
        INVALID_TXN_STATE => "INVALID_TXN_STATE",
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED => "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        KAFKA_STORAGE_ERROR => "KAFKA_STORAGE_ERROR",
        NON_EMPTY_GROUP => "NON_EMPTY_GROUP",
        GROUP_ID_NOT_FOUND => "GROUP_ID_NOT_FOUND",
        TOPIC_DELETION_DISABLED => "TOPIC_DELETION_DISABLED",
        FENCED_LEADER_EPOCH => "FENCED_LEADER_EPOCH",
        UNKNOWN_LEADER_EPOCH => "UNKNOWN_LEADER_EPOCH",
        UNSUPPORTED_COMPRESSION_TYPE => "UNSUPPORTED_COMPRESSION_TYPE",
        MEMBER_ID_REQUIRED => "MEMBER_ID_REQUIRED",
        FENCED_INSTANCE_ID => "FENCED_INSTANCE_ID",
        INVALID_RECORD => "INVALID_RECORD",
        UNKNOWN_TOPIC_ID => "UNKNOWN_TOPIC_ID",
        _ => "an error",
    }
}

/// An error code put in a response: counted by API and code, and logged at debug with why.
/// The request's span (`handlers::dispatch`) adds the API, version and client id.
pub fn refused(shard: &Shard, api: ApiKey, code: i16, reason: &dyn std::fmt::Display) {
    if code == NONE {
        return;
    }
    shard.metrics.error(api, code);
    tracing::debug!(code, error = name(code), %reason, "refused");
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
            (BatchError::TooLarge { len: 2, max: 1 }, MESSAGE_TOO_LARGE),
            (
                BatchError::CrcMismatch {
                    stored: 1,
                    computed: 2,
                },
                CORRUPT_MESSAGE,
            ),
            (BatchError::BadMagic { magic: 7 }, CORRUPT_MESSAGE),
            (
                BatchError::LengthMismatch {
                    declared: 9,
                    available: 3,
                },
                CORRUPT_MESSAGE,
            ),
            (
                BatchError::NonZeroBaseOffset { base_offset: 3 },
                INVALID_RECORD,
            ),
            (BatchError::ControlBatchFromClient, INVALID_RECORD),
            (
                BatchError::BadRecordCount {
                    record_count: 0,
                    last_offset_delta: 0,
                },
                INVALID_RECORD,
            ),
            (
                BatchError::BadProducerFields {
                    producer_id: 1,
                    producer_epoch: 0,
                    base_sequence: -1,
                },
                INVALID_RECORD,
            ),
            (
                BatchError::MalformedRecord {
                    index: 0,
                    reason: "",
                },
                INVALID_RECORD,
            ),
            (
                BatchError::MixedMagic { first: 2, magic: 1 },
                INVALID_RECORD,
            ),
            (BatchError::Empty, INVALID_RECORD),
            (
                BatchError::UnsupportedCompression { codec: 4 },
                UNSUPPORTED_COMPRESSION_TYPE,
            ),
            (
                BatchError::UnsupportedCompression { codec: 6 },
                UNKNOWN_SERVER_ERROR,
            ),
            (
                BatchError::BadCompressedData {
                    reason: String::new(),
                },
                UNKNOWN_SERVER_ERROR,
            ),
            (
                BatchError::CorruptLegacyMessage {
                    reason: String::new(),
                },
                CORRUPT_MESSAGE,
            ),
            (
                BatchError::InvalidLegacyMessage {
                    reason: String::new(),
                },
                INVALID_RECORD,
            ),
            (refused(&[RecordErrorKind::InvalidRecord]), INVALID_RECORD),
            (
                refused(&[
                    RecordErrorKind::InvalidRecord,
                    RecordErrorKind::InvalidTimestamp,
                ]),
                INVALID_TIMESTAMP,
            ),
        ];
        for (error, code) in cases {
            assert_eq!(batch_code(&error), code, "{error:?}");
        }
    }
}
