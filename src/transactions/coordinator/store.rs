//! Writing an id's state to its `__transaction_state` partition, acknowledged once the in-sync
//! replicas have it, with Kafka's error translation (`TransactionStateManager.appendTransactionToLog`).

use super::*;
use crate::transactions::records::{encode_key, TxnValue};
use ferrite_shards::batch::build::{build_batch, NewRecord, ProducerFields};
use ferrite_shards::types::now_ms;

/// How long a state write waits for the ISR.
const STORE_TIMEOUT: Duration = Duration::from_secs(5);

impl TxnCoordinator {
    /// Appends the id's record (`None`: a tombstone) as one batch, as Kafka writes them.
    pub(super) async fn store(&self, id: &str, value: Option<TxnValue>) -> Result<(), ErrorCode> {
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
        match p
            .wait_committed(info.last_offset, epoch, STORE_TIMEOUT)
            .await
        {
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
