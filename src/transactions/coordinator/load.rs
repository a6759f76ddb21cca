//! Rebuilding a `__transaction_state` partition's ids from its log
//! (`TransactionStateManager.loadTransactionsForTxnTopicPartition`): the last record of each id
//! wins, a tombstone removes it; transactions found preparing are completed again (their
//! markers may not all have been written), those found open stay open until they end or time
//! out.

use super::*;
use crate::transactions::records::{decode_key, TxnValue};
use ferrite_shards::batch::build::decode_records;
use ferrite_shards::batch::split_batches;
use ferrite_shards::partition::Partition;

/// Bytes read at once when loading.
const LOAD_READ_BYTES: usize = 8 << 20;

impl TxnCoordinator {
    /// Loads one partition this broker leads; returns how many ids it holds.
    pub async fn load(&self, partition: &Rc<Partition>) -> Result<usize, String> {
        let index = partition.index();
        self.loading.borrow_mut().insert(index);
        let read = read_ids(partition).await;
        self.loading.borrow_mut().remove(&index);
        let ids = read?;
        self.forget_partition(index);
        self.epochs
            .borrow_mut()
            .insert(index, partition.leader_epoch());
        let mut preparing = Vec::new();
        let count = ids.len();
        {
            let mut txns = self.txns.borrow_mut();
            for (id, value) in ids {
                if value.state.is_preparing() {
                    preparing.push(id.clone());
                }
                txns.insert(id, Rc::new(RefCell::new(TxnMetadata::from_value(value))));
            }
        }
        for id in preparing {
            self.spawn_completion(id);
        }
        Ok(count)
    }
}

/// Every id's last state in the partition's log.
async fn read_ids(partition: &Rc<Partition>) -> Result<HashMap<String, TxnValue>, String> {
    let log = partition.log();
    let end = log.log_end_offset();
    let mut at = log.log_start_offset();
    let mut ids = HashMap::new();
    while at < end {
        let read = log
            .read(at, LOAD_READ_BYTES, end)
            .await
            .map_err(|e| e.to_string())?;
        if read.next_offset <= at {
            break;
        }
        let bytes = read.to_bytes().await.map_err(|e| e.to_string())?;
        for batch in split_batches(&bytes).unwrap_or_default() {
            let Ok(records) = decode_records(&batch) else {
                tracing::warn!(
                    partition = partition.index(),
                    "skipping an unreadable batch in __transaction_state"
                );
                continue;
            };
            for r in records {
                let Some(Ok(Some(id))) = r.key.map(decode_key) else {
                    continue;
                };
                match r.value.map(TxnValue::decode) {
                    Some(Ok(v)) => {
                        ids.insert(id, v);
                    }
                    Some(Err(e)) => {
                        tracing::warn!(transactional_id = %id, error = %e, "skipping a transaction state record");
                    }
                    None => {
                        ids.remove(&id);
                    }
                }
            }
        }
        at = read.next_offset;
    }
    Ok(ids)
}
