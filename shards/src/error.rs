//! The one error type of the data plane. Handlers map it to Kafka error codes.

use crate::batch::BatchError;
use std::io;
use std::path::PathBuf;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A batch failed validation; nothing was written.
    #[error("invalid record batch: {0}")]
    InvalidBatch(#[from] BatchError),

    /// An I/O call failed. `op` names the call, `path` the file.
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// Bytes inside the log that were flushed and validated once no longer are.
    #[error("corrupt log data in {path} at byte {position}: {reason}")]
    Corrupt {
        path: PathBuf,
        position: u64,
        reason: String,
    },

    /// The offset is below the log start or beyond the log end.
    #[error("offset {offset} is outside the log [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        offset: i64,
        log_start: i64,
        log_end: i64,
    },

    /// The log was closed while the operation waited.
    #[error("log {0} is closed")]
    Closed(PathBuf),

    /// The log was deleted (its topic is gone): nothing can be read or written any more.
    #[error("log {0} was deleted")]
    Deleted(PathBuf),

    /// An idempotent producer's batch does not follow its previous one.
    #[error("producer {producer_id}: sequence {got} does not follow (expected {expected})")]
    OutOfOrderSequence {
        producer_id: i64,
        expected: i32,
        got: i32,
    },

    /// This replica does not lead the partition: only its leader takes producers' batches.
    #[error("{0} is not the leader")]
    NotLeader(PathBuf),

    /// A compaction pass could not run; the log is unchanged.
    #[error("cannot clean {path}: {reason}")]
    Cleaner { path: PathBuf, reason: &'static str },

    /// An idempotent producer's batch carries an epoch older than the one already seen.
    #[error("producer {producer_id}: epoch {got} is older than {current}")]
    InvalidProducerEpoch {
        producer_id: i64,
        current: i16,
        got: i16,
    },

    /// A producer's batch does not fit where its transaction stands: a transactional batch
    /// that was not verified to be in an ongoing transaction, or a plain batch while the
    /// producer's transaction is open (INVALID_TXN_STATE).
    #[error("producer {producer_id}: {reason}")]
    InvalidTxnState {
        producer_id: i64,
        reason: &'static str,
    },

    /// A marker from a transaction coordinator older than the one that wrote the producer's
    /// last marker (TRANSACTION_COORDINATOR_FENCED).
    #[error("producer {producer_id}: coordinator epoch {got} is older than {current}")]
    CoordinatorFenced {
        producer_id: i64,
        current: i32,
        got: i32,
    },
}

impl Error {
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Error {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// The filesystem is out of space (or quota): the operation fails, the process keeps serving.
    pub fn is_disk_full(&self) -> bool {
        match self {
            Error::Io { source, .. } => {
                matches!(
                    source.raw_os_error(),
                    Some(libc::ENOSPC) | Some(libc::EDQUOT)
                )
            }
            _ => false,
        }
    }

    /// A copy for each of several waiters failed by one cause (io::Error is not Clone).
    pub fn duplicate(&self) -> Error {
        match self {
            Error::InvalidBatch(e) => Error::InvalidBatch(e.clone()),
            Error::Io { op, path, source } => Error::Io {
                op,
                path: path.clone(),
                source: match source.raw_os_error() {
                    Some(code) => io::Error::from_raw_os_error(code),
                    None => io::Error::new(source.kind(), source.to_string()),
                },
            },
            Error::Corrupt {
                path,
                position,
                reason,
            } => Error::Corrupt {
                path: path.clone(),
                position: *position,
                reason: reason.clone(),
            },
            Error::OffsetOutOfRange {
                offset,
                log_start,
                log_end,
            } => Error::OffsetOutOfRange {
                offset: *offset,
                log_start: *log_start,
                log_end: *log_end,
            },
            Error::Closed(p) => Error::Closed(p.clone()),
            Error::Deleted(p) => Error::Deleted(p.clone()),
            Error::NotLeader(p) => Error::NotLeader(p.clone()),
            Error::Cleaner { path, reason } => Error::Cleaner {
                path: path.clone(),
                reason,
            },
            Error::OutOfOrderSequence {
                producer_id,
                expected,
                got,
            } => Error::OutOfOrderSequence {
                producer_id: *producer_id,
                expected: *expected,
                got: *got,
            },
            Error::InvalidProducerEpoch {
                producer_id,
                current,
                got,
            } => Error::InvalidProducerEpoch {
                producer_id: *producer_id,
                current: *current,
                got: *got,
            },
            Error::InvalidTxnState {
                producer_id,
                reason,
            } => Error::InvalidTxnState {
                producer_id: *producer_id,
                reason,
            },
            Error::CoordinatorFenced {
                producer_id,
                current,
                got,
            } => Error::CoordinatorFenced {
                producer_id: *producer_id,
                current: *current,
                got: *got,
            },
        }
    }
}
