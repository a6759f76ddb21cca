//! Writing an id's state to its `__transaction_state` partition, acknowledged once the in-sync
//! replicas have it, with Kafka's error translation (`TransactionStateManager.appendTransactionToLog`).

use super::*;
use crate::transactions::records::{encode_key, TxnValue};
use ferrite_shards::batch::build::{build_batch, NewRecord, ProducerFields};
use ferrite_shards::types::now_ms;

/// How long a tombstone (an expired transactional id) waits for the ISR: Kafka's
/// `removeExpiredTransactionalIds` appends with `request.timeout.ms`, 30 s by default.
const TOMBSTONE_TIMEOUT: Duration = Duration::from_secs(30);

impl TxnCoordinator {
    /// Appends the id's record (`None`: a tombstone) as one batch, as Kafka writes them, and
    /// waits for the ISR as long as Kafka's `appendTransactionToLog` does: the transaction's
    /// own timeout (`transaction.timeout.ms`); past it, COORDINATOR_NOT_AVAILABLE, which Kafka
    /// answers for REQUEST_TIMED_OUT, so the client retries.
    pub(super) async fn store(&self, id: &str, value: Option<TxnValue>) -> Result<(), ErrorCode> {
        let wait = value.as_ref().map_or(TOMBSTONE_TIMEOUT, |v| {
            Duration::from_millis(u64::try_from(v.timeout_ms).unwrap_or(0))
        });
        let partition = self.partition_of(id);
        let Some(p) = self.host().and_then(|h| h.state_partition(partition)) else {
            return Err(ErrorCode::NOT_COORDINATOR);
        };
        let record = NewRecord {
            key: Some(encode_key(id)),
            value: value.map(|v| v.encode()),
            timestamp_ms: now_ms(),
            headers: Vec::new(),
        };
        let batch = build_batch(&[record], ProducerFields::NONE);
        let epoch = p.leader_epoch();
        let info = p.produce(&batch).await.map_err(|e| {
            ferrite_shards::repeated::error(
                "writing to __transaction_state failed",
                &p.log().dir().display(),
                &e,
            );
            store_code(crate::protocol::errors::code_for(&e))
        })?;
        match p.wait_committed(info.last_offset, epoch, wait).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(ErrorCode::COORDINATOR_NOT_AVAILABLE),
            Err(_) => Err(ErrorCode::NOT_COORDINATOR),
        }
    }
}

/// What a failed append becomes for the client: wait and retry (the partition is not ready,
/// the ISR is short), or look for the coordinator again (leadership or the disk is gone).
fn store_code(code: ErrorCode) -> ErrorCode {
    match code {
        ErrorCode::NOT_LEADER_OR_FOLLOWER | ErrorCode::KAFKA_STORAGE_ERROR => {
            ErrorCode::NOT_COORDINATOR
        }
        ErrorCode::MESSAGE_TOO_LARGE | ErrorCode::RECORD_LIST_TOO_LARGE => {
            ErrorCode::UNKNOWN_SERVER_ERROR
        }
        _ => ErrorCode::COORDINATOR_NOT_AVAILABLE,
    }
}
