//! Kafka error codes, and how data-plane errors map onto them.

use ferrite_shards::batch::BatchError;
use ferrite_shards::Error;

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
pub const ILLEGAL_GENERATION: i16 = 22;
pub const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
pub const INVALID_GROUP_ID: i16 = 24;
pub const UNKNOWN_MEMBER_ID: i16 = 25;
pub const INVALID_SESSION_TIMEOUT: i16 = 26;
pub const REBALANCE_IN_PROGRESS: i16 = 27;
pub const INVALID_REQUEST: i16 = 42;
pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
pub const INVALID_PRODUCER_EPOCH: i16 = 47;
pub const KAFKA_STORAGE_ERROR: i16 = 56;
pub const NON_EMPTY_GROUP: i16 = 68;
pub const GROUP_ID_NOT_FOUND: i16 = 69;
pub const UNSUPPORTED_COMPRESSION_TYPE: i16 = 76;
pub const FENCED_LEADER_EPOCH: i16 = 74;
pub const UNKNOWN_LEADER_EPOCH: i16 = 75;
pub const MEMBER_ID_REQUIRED: i16 = 79;
pub const FENCED_INSTANCE_ID: i16 = 82;
pub const INVALID_RECORD: i16 = 87;

/// The code for a data-plane error, as Kafka would answer it.
pub fn code_for(e: &Error) -> i16 {
    match e {
        Error::InvalidBatch(b) => match b {
            BatchError::TooLarge { .. } => MESSAGE_TOO_LARGE,
            BatchError::UnsupportedCompression { .. } => UNSUPPORTED_COMPRESSION_TYPE,
            BatchError::BadRecordCount { .. } | BatchError::BadProducerFields { .. } => {
                INVALID_RECORD
            }
            BatchError::TooShort { .. }
            | BatchError::BadMagic { .. }
            | BatchError::LengthMismatch { .. }
            | BatchError::CrcMismatch { .. }
            | BatchError::TrailingBytes { .. }
            | BatchError::Empty
            | BatchError::BadCompressedData { .. }
            | BatchError::BadRecords { .. } => CORRUPT_MESSAGE,
        },
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
