//! A transaction's course: partitions added (AddPartitionsToTxn, AddOffsetsToTxn), the
//! produce path's check that a partition is in it (KIP-890), and its end (EndTxn), as
//! `TransactionCoordinator.handleAddPartitionsToTransaction`,
//! `handleVerifyPartitionsInTransaction` and `endTransaction` decide.

use super::*;
use crate::transactions::state::TxnState;
use ferrite_shards::types::now_ms;

/// Longest a request waits for its id to settle before CONCURRENT_TRANSACTIONS: a completion
/// normally takes milliseconds; one whose markers are being retried takes longer, and the
/// client then retries as it would against Kafka.
const SETTLE_WAIT_MAX: Duration = Duration::from_millis(200);

impl TxnCoordinator {
    /// The id's state, if the request's producer id and epoch are its current ones.
    fn current(&self, id: &str, producer_id: i64, epoch: i16) -> Result<TxnRef, ErrorCode> {
        let txn = self.get(id).ok_or(ErrorCode::INVALID_PRODUCER_ID_MAPPING)?;
        let t = txn.borrow();
        if t.producer_id != producer_id {
            return Err(ErrorCode::INVALID_PRODUCER_ID_MAPPING);
        }
        if t.producer_epoch != epoch {
            return Err(ErrorCode::PRODUCER_FENCED);
        }
        drop(t);
        Ok(txn)
    }

    /// The id's state once no transition is being written and no transaction is completing,
    /// waiting at most `SETTLE_WAIT_MAX`; CONCURRENT_TRANSACTIONS when it does not settle.
    ///
    /// Kafka answers CONCURRENT_TRANSACTIONS at once, and the client retries: the Java
    /// producer after 20 ms when it is beginning a transaction, librdkafka after its retry
    /// backoff. The usual case is the first AddPartitionsToTxn of a transaction arriving while
    /// the previous one's markers are written, which takes a few milliseconds here; holding
    /// the request that long answers it as its retry would have been, without the backoff.
    async fn wait_until_settled(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
    ) -> Result<TxnRef, ErrorCode> {
        let give_up = std::time::Instant::now() + SETTLE_WAIT_MAX;
        loop {
            let seen = self.settled.generation();
            let txn = self.current(id, producer_id, epoch)?;
            let busy = {
                let t = txn.borrow();
                t.pending || t.state.is_preparing()
            };
            if !busy {
                return Ok(txn);
            }
            let left = give_up.saturating_duration_since(std::time::Instant::now());
            if left.is_zero()
                || glommio::timer::timeout(left, async {
                    self.settled.wait_past(seen).await;
                    Ok(())
                })
                .await
                .is_err()
            {
                return Err(ErrorCode::CONCURRENT_TRANSACTIONS);
            }
        }
    }

    /// Adds partitions to the id's transaction, beginning it if none is open.
    pub async fn add_partitions(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: Vec<(String, i32)>,
    ) -> Result<(), ErrorCode> {
        let txn = self.wait_until_settled(id, producer_id, epoch).await?;
        let current = txn.borrow().clone();
        if current.state == TxnState::Ongoing
            && partitions.iter().all(|p| current.partitions.contains(p))
        {
            return Ok(());
        }
        let mut next = current.clone();
        let now = now_ms();
        if current.state != TxnState::Ongoing {
            next.start_ms = now;
            next.partitions.clear();
        }
        next.partitions.extend(partitions);
        next.state = TxnState::Ongoing;
        next.last_update_ms = now;
        self.transit(id, &txn, next).await
    }

    /// KIP-890's question from a partition about to take a transactional batch: is it in the
    /// producer's ongoing transaction? TRANSACTION_ABORTABLE when not.
    pub fn verify_partition(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partition: &(String, i32),
    ) -> Result<(), ErrorCode> {
        let txn = self.current(id, producer_id, epoch)?;
        let t = txn.borrow();
        if t.state.is_preparing() {
            return Err(ErrorCode::CONCURRENT_TRANSACTIONS);
        }
        if t.state == TxnState::Ongoing && t.partitions.contains(partition) {
            Ok(())
        } else {
            Err(ErrorCode::TRANSACTION_ABORTABLE)
        }
    }

    /// Ends the id's transaction: the client is answered once PrepareCommit/PrepareAbort is
    /// stored; the markers and the completion follow.
    pub async fn end_transaction(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        commit: bool,
    ) -> Result<(), ErrorCode> {
        let txn = self.current(id, producer_id, epoch)?;
        let current = txn.borrow().clone();
        if current.pending {
            return Err(ErrorCode::CONCURRENT_TRANSACTIONS);
        }
        let next_state = match (current.state, commit) {
            (TxnState::Ongoing, true) => TxnState::PrepareCommit,
            (TxnState::Ongoing, false) => TxnState::PrepareAbort,
            // A retry of an EndTxn whose answer was lost.
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                return Err(ErrorCode::CONCURRENT_TRANSACTIONS)
            }
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => return Ok(()),
            _ => return Err(ErrorCode::INVALID_TXN_STATE),
        };
        let mut next = current;
        next.state = next_state;
        next.last_update_ms = now_ms();
        self.transit(id, &txn, next).await?;
        self.spawn_completion(id.to_string());
        Ok(())
    }
}
