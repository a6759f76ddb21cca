//! InitProducerId with a transactional id (`TransactionCoordinator.handleInitProducerId`): the
//! id's producer id, its epoch bumped, and an ongoing transaction of the old epoch aborted
//! first, so a zombie producer is fenced at the coordinator and at every partition.

use super::*;
use crate::transactions::state::TxnState;
use ferrite_shards::types::now_ms;

pub struct InitArgs {
    pub transactional_id: String,
    pub timeout_ms: i32,
    /// v3+ (KIP-360): the producer id and epoch the producer had, when it had one.
    pub expected: Option<(i64, i16)>,
}

impl TxnCoordinator {
    /// The producer id and epoch the producer is to use.
    pub async fn init_producer_id(&self, args: InitArgs) -> Result<(i64, i16), ErrorCode> {
        let id = args.transactional_id;
        if args.timeout_ms <= 0 || args.timeout_ms > self.config.max_timeout_ms {
            return Err(ErrorCode::INVALID_TRANSACTION_TIMEOUT);
        }
        let txn = match self.get(&id) {
            Some(t) => t,
            None => {
                let host = self.host().ok_or(ErrorCode::COORDINATOR_NOT_AVAILABLE)?;
                let pid = host.allocate_producer_id().await?;
                // Another request for the id may have created it meanwhile.
                self.txns
                    .borrow_mut()
                    .entry(id.clone())
                    .or_insert_with(|| {
                        Rc::new(RefCell::new(TxnMetadata::new(
                            pid,
                            args.timeout_ms,
                            now_ms(),
                        )))
                    })
                    .clone()
            }
        };
        let current = txn.borrow().clone();
        if current.pending {
            return Err(ErrorCode::CONCURRENT_TRANSACTIONS);
        }
        if let Some((pid, epoch)) = args.expected {
            // `isValidProducerId`.
            let valid = current.producer_epoch == -1
                || pid == current.producer_id
                || (pid == current.last_producer_id && epoch >= EPOCH_EXHAUSTED);
            if !valid {
                return Err(ErrorCode::PRODUCER_FENCED);
            }
        }
        match current.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                Err(ErrorCode::CONCURRENT_TRANSACTIONS)
            }
            TxnState::Ongoing => {
                // Fence the producer of the open transaction: abort it with the epoch bumped
                // (its batches and markers are then refused everywhere), and have this one
                // retry once the abort completes (it bumps the epoch again then).
                let mut next = current.clone();
                next.producer_epoch = current.producer_epoch.saturating_add(1);
                next.state = TxnState::PrepareAbort;
                next.last_update_ms = now_ms();
                self.transit(&id, &txn, next).await?;
                self.spawn_completion(id);
                Err(ErrorCode::CONCURRENT_TRANSACTIONS)
            }
            TxnState::Empty
            | TxnState::CompleteCommit
            | TxnState::CompleteAbort
            | TxnState::Dead
            | TxnState::PrepareEpochFence => {
                let mut next = current.clone();
                let exhausted = current.producer_epoch >= EPOCH_EXHAUSTED;
                let expected_epoch = args.expected.map(|(_, e)| e);
                if exhausted && expected_epoch.is_none_or(|e| e == current.producer_epoch) {
                    let host = self.host().ok_or(ErrorCode::COORDINATOR_NOT_AVAILABLE)?;
                    next.last_producer_id = current.producer_id;
                    next.last_producer_epoch =
                        expected_epoch.map_or(-1, |_| current.producer_epoch);
                    next.producer_id = host.allocate_producer_id().await?;
                    next.producer_epoch = 0;
                } else {
                    match expected_epoch {
                        None => {
                            next.producer_epoch = current.producer_epoch + 1;
                            next.last_producer_epoch = -1;
                        }
                        Some(e) if e == current.producer_epoch || current.producer_epoch == -1 => {
                            next.producer_epoch = current.producer_epoch + 1;
                            next.last_producer_epoch = current.producer_epoch;
                        }
                        // A retry of an InitProducerId that succeeded: the same answer.
                        Some(e) if e == current.last_producer_epoch => {
                            return Ok((current.producer_id, current.producer_epoch))
                        }
                        Some(_) => return Err(ErrorCode::PRODUCER_FENCED),
                    }
                }
                next.state = TxnState::Empty;
                next.partitions.clear();
                next.start_ms = -1;
                next.timeout_ms = args.timeout_ms;
                next.last_update_ms = now_ms();
                let answer = (next.producer_id, next.producer_epoch);
                self.transit(&id, &txn, next).await?;
                Ok(answer)
            }
        }
    }
}
