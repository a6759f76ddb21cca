//! Completing a prepared transaction: its marker written to every partition in it
//! (`TransactionMarkerChannelManager`), then CompleteCommit/CompleteAbort stored.
//!
//! A partition that cannot take its marker yet (no leader here, a short ISR, a full disk) is
//! retried until it can; one that no longer exists is dropped, as Kafka drops partitions whose
//! leader is unknown. A partition that refuses the marker for its epoch (a newer producer
//! epoch or coordinator wrote there) ends the attempt: a newer coordinator owns the id.

use super::*;
use crate::transactions::host::{TopicPartition, TxnMarker};
use crate::transactions::state::TxnState;
use ferrite_shards::batch::control::{Marker, MarkerRecord};
use ferrite_shards::types::now_ms;

const RETRY_BACKOFF_MIN: Duration = Duration::from_millis(50);
const RETRY_BACKOFF_MAX: Duration = Duration::from_secs(1);

impl TxnCoordinator {
    /// Completes the id's prepared transaction in the background.
    pub(super) fn spawn_completion(&self, id: String) {
        let me = self.me.clone();
        glommio::spawn_local(async move {
            if let Some(me) = me.upgrade() {
                me.complete(&id).await;
            }
        })
        .detach();
    }

    async fn complete(&self, id: &str) {
        let Some(txn) = self.get(id) else { return };
        let (producer_id, producer_epoch, commit, partitions) = {
            let t = txn.borrow();
            let commit = match t.state {
                TxnState::PrepareCommit => true,
                TxnState::PrepareAbort => false,
                _ => return,
            };
            (
                t.producer_id,
                t.producer_epoch,
                commit,
                t.partitions.clone(),
            )
        };
        let marker = TxnMarker {
            producer_id,
            producer_epoch,
            marker: MarkerRecord {
                marker: if commit {
                    Marker::Commit
                } else {
                    Marker::Abort
                },
                coordinator_epoch: self.coordinator_epoch(id),
            },
        };
        if !self.write_until_done(id, &txn, marker, partitions).await {
            return;
        }
        let mut backoff = RETRY_BACKOFF_MIN;
        loop {
            if !self.still_holds(id, &txn) || self.host().is_none_or(|h| h.is_shutting_down()) {
                return;
            }
            let mut next = txn.borrow().clone();
            next.state = if commit {
                TxnState::CompleteCommit
            } else {
                TxnState::CompleteAbort
            };
            next.partitions.clear();
            next.last_update_ms = now_ms();
            match self.transit(id, &txn, next).await {
                Ok(()) => return,
                Err(code) => {
                    tracing::debug!(transactional_id = id, %code, "storing a completed transaction; retrying");
                }
            }
            glommio::timer::sleep(backoff).await;
            backoff = (backoff * 2).min(RETRY_BACKOFF_MAX);
        }
    }

    /// Writes the marker on every partition, retrying those that may still take it; false
    /// when the attempt must end.
    async fn write_until_done(
        &self,
        id: &str,
        txn: &TxnRef,
        marker: TxnMarker,
        partitions: impl IntoIterator<Item = TopicPartition>,
    ) -> bool {
        let mut pending: Vec<TopicPartition> = partitions.into_iter().collect();
        let mut backoff = RETRY_BACKOFF_MIN;
        loop {
            let Some(host) = self.host() else {
                return false;
            };
            if host.is_shutting_down() || !self.still_holds(id, txn) {
                return false;
            }
            pending.retain(|(topic, partition)| host.has_partition(topic, *partition));
            if pending.is_empty() {
                return true;
            }
            let outcomes = host.write_markers(marker, pending.clone()).await;
            let mut retry = Vec::new();
            for (tp, outcome) in pending.into_iter().zip(outcomes) {
                match outcome {
                    Ok(()) => {
                        txn.borrow_mut().partitions.remove(&tp);
                    }
                    Err(ErrorCode::INVALID_PRODUCER_EPOCH)
                    | Err(ErrorCode::TRANSACTION_COORDINATOR_FENCED) => {
                        tracing::warn!(transactional_id = id, topic = %tp.0, partition = tp.1,
                            "a newer producer epoch or coordinator wrote there; leaving the transaction to it");
                        return false;
                    }
                    Err(code) => {
                        ferrite_shards::repeated::error(
                            "writing a transaction marker failed; retrying",
                            &format_args!("{}-{} ({id})", tp.0, tp.1),
                            &code,
                        );
                        retry.push(tp);
                    }
                }
            }
            if retry.is_empty() {
                return true;
            }
            pending = retry;
            drop(host);
            glommio::timer::sleep(backoff).await;
            backoff = (backoff * 2).min(RETRY_BACKOFF_MAX);
        }
    }
}
