//! The coordinator's periodic duties (`TransactionCoordinator.abortTimedOutTransactions` and
//! `TransactionStateManager.removeExpiredTransactionalIds`): transactions open past their
//! timeout are aborted with the producer's epoch bumped (fencing it everywhere), and ids idle
//! for `transactional.id.expiration.ms` are removed with a tombstone.

use super::*;
use crate::transactions::state::TxnState;
use ferrite_shards::types::now_ms;

impl TxnCoordinator {
    /// Runs the duties until the shard stops.
    pub fn start_timers(&self) {
        let me = self.me.clone();
        let (abort_every, expire_every) = (self.config.abort_interval, self.config.expiry_interval);
        glommio::spawn_local(async move {
            let mut since_expiry = Duration::ZERO;
            loop {
                glommio::timer::sleep(abort_every).await;
                let Some(me) = me.upgrade() else { return };
                if me.host().is_none_or(|h| h.is_shutting_down()) {
                    return;
                }
                me.abort_timed_out().await;
                since_expiry += abort_every;
                if since_expiry >= expire_every {
                    since_expiry = Duration::ZERO;
                    me.remove_expired().await;
                }
            }
        })
        .detach();
    }

    /// Aborts every open transaction older than its timeout.
    pub async fn abort_timed_out(&self) {
        let now = now_ms();
        let due: Vec<(String, TxnRef)> = self
            .txns
            .borrow()
            .iter()
            .filter(|(id, t)| {
                let t = t.borrow();
                t.state == TxnState::Ongoing
                    && !t.pending
                    && t.start_ms + t.timeout_ms as i64 <= now
                    && !self.is_loading(self.partition_of(id))
            })
            .map(|(id, t)| (id.clone(), t.clone()))
            .collect();
        for (id, txn) in due {
            let mut next = txn.borrow().clone();
            if next.state != TxnState::Ongoing {
                continue;
            }
            next.producer_epoch = next.producer_epoch.saturating_add(1);
            next.state = TxnState::PrepareAbort;
            next.last_update_ms = now_ms();
            tracing::info!(transactional_id = %id, producer_id = next.producer_id,
                "aborting a transaction open past its timeout");
            match self.transit(&id, &txn, next).await {
                Ok(()) => self.spawn_completion(id),
                Err(code) => {
                    tracing::debug!(transactional_id = %id, %code, "aborting a timed-out transaction failed; next round")
                }
            }
        }
    }

    /// Removes the ids with no transaction for `transactional.id.expiration.ms`.
    pub async fn remove_expired(&self) {
        let horizon = now_ms() - self.config.id_expiration_ms;
        let due: Vec<(String, TxnRef)> = self
            .txns
            .borrow()
            .iter()
            .filter(|(_, t)| {
                let t = t.borrow();
                t.state.is_idle() && !t.pending && t.last_update_ms <= horizon
            })
            .map(|(id, t)| (id.clone(), t.clone()))
            .collect();
        for (id, txn) in due {
            {
                let t = txn.borrow();
                if !t.state.is_idle() || t.pending || t.last_update_ms > horizon {
                    continue; // used again meanwhile
                }
            }
            txn.borrow_mut().pending = true;
            let stored = self.store(&id, None).await;
            txn.borrow_mut().pending = false;
            match stored {
                Ok(()) if self.still_holds(&id, &txn) => {
                    self.txns.borrow_mut().remove(&id);
                    tracing::info!(transactional_id = %id, "transactional id expired");
                }
                Ok(()) => {}
                Err(code) => {
                    tracing::debug!(transactional_id = %id, %code, "expiring a transactional id failed; next round")
                }
            }
        }
    }
}
