//! The transaction coordinator of one shard: the transactional ids whose `__transaction_state`
//! partition this shard owns, Kafka's state machine over them (`TransactionCoordinator`), and
//! the markers that end their transactions.
//!
//! Every transition is a record appended to the id's `__transaction_state` partition (acks=all)
//! before it takes effect; while one is being written the id is `pending` and other requests
//! get CONCURRENT_TRANSACTIONS. After PrepareCommit/PrepareAbort is stored the client is
//! answered, the markers are written to every partition of the transaction, and then
//! CompleteCommit/CompleteAbort is stored (`complete.rs`). Loading a partition's ids resumes
//! the transactions found preparing (`load.rs`); timers abort those open past their timeout
//! and forget ids unused for `transactional.id.expiration.ms` (`timers.rs`).
//!
//! Lives on: every shard, for the transactional ids placed on it.

mod admin;
mod complete;
mod init;
mod load;
mod store;
mod timers;
mod txn;

pub use admin::{is_state_name, ListedTxn};
pub use init::InitArgs;

use super::host::TxnHost;
use super::state::TxnMetadata;
use crate::protocol::errors::ErrorCode;
use ferrite_shards::sync::Notify;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::{Rc, Weak};
use std::time::Duration;

/// Kafka's epoch limit (`TransactionMetadata.isEpochExhausted`): at Short.MAX_VALUE - 1 the
/// producer gets a new producer id instead of a bump.
const EPOCH_EXHAUSTED: i16 = i16::MAX - 1;

#[derive(Clone, Debug)]
pub struct TxnConfig {
    /// `transaction.max.timeout.ms`.
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`.
    pub id_expiration_ms: i64,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
    pub abort_interval: Duration,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`.
    pub expiry_interval: Duration,
}

type TxnRef = Rc<RefCell<TxnMetadata>>;

pub struct TxnCoordinator {
    /// Itself, for the background work it starts (completions, timers).
    me: Weak<TxnCoordinator>,
    txns: RefCell<HashMap<String, TxnRef>>,
    config: TxnConfig,
    host: Weak<dyn TxnHost>,
    /// `__transaction_state` partitions being read (after a leadership gain).
    loading: RefCell<HashSet<i32>>,
    /// The coordinator epoch of each partition led here: its leader epoch when loaded. Markers
    /// carry it, so a partition refuses those of a coordinator that lost the id.
    epochs: RefCell<HashMap<i32, i32>>,
    /// Notified whenever a transition ends: requests held while their id settles
    /// (`txn.rs`, `wait_until_settled`) look again.
    settled: Notify,
}

impl TxnCoordinator {
    pub fn new(config: TxnConfig, host: Weak<dyn TxnHost>) -> Rc<TxnCoordinator> {
        Rc::new_cyclic(|me| TxnCoordinator {
            me: me.clone(),
            txns: RefCell::new(HashMap::new()),
            config,
            host,
            loading: RefCell::new(HashSet::new()),
            epochs: RefCell::new(HashMap::new()),
            settled: Notify::new(),
        })
    }

    fn host(&self) -> Option<Rc<dyn TxnHost>> {
        self.host.upgrade()
    }

    pub fn is_loading(&self, partition: i32) -> bool {
        self.loading.borrow().contains(&partition)
    }

    fn partition_of(&self, id: &str) -> i32 {
        let count = self.host().map_or(1, |h| h.state_partition_count()).max(1);
        crate::groups::records::coordinator_partition(id, count)
    }

    fn get(&self, id: &str) -> Option<TxnRef> {
        self.txns.borrow().get(id).cloned()
    }

    /// The coordinator epoch of the partition holding `id`.
    fn coordinator_epoch(&self, id: &str) -> i32 {
        let partition = self.partition_of(id);
        self.epochs.borrow().get(&partition).copied().unwrap_or(0)
    }

    /// The id is still coordinated here as this very entry (not unloaded, not replaced).
    fn still_holds(&self, id: &str, txn: &TxnRef) -> bool {
        self.get(id).is_some_and(|t| Rc::ptr_eq(&t, txn))
    }

    /// Forgets the ids of a partition this broker no longer leads.
    pub fn forget_partition(&self, partition: i32) {
        let count = self.host().map_or(1, |h| h.state_partition_count()).max(1);
        self.txns
            .borrow_mut()
            .retain(|id, _| crate::groups::records::coordinator_partition(id, count) != partition);
        self.epochs.borrow_mut().remove(&partition);
    }

    /// Stores `next` as the id's state, then takes it; CONCURRENT_TRANSACTIONS while another
    /// transition is being written. Kafka's `prepareTransitionTo` / `completeTransitionTo`.
    async fn transit(&self, id: &str, txn: &TxnRef, next: TxnMetadata) -> Result<(), ErrorCode> {
        {
            let mut t = txn.borrow_mut();
            if t.pending {
                return Err(ErrorCode::CONCURRENT_TRANSACTIONS);
            }
            t.pending = true;
        }
        let stored = self.store(id, Some(next.value())).await;
        let taken = {
            let mut t = txn.borrow_mut();
            t.pending = false;
            stored.and_then(|()| {
                if !self.still_holds(id, txn) {
                    return Err(ErrorCode::NOT_COORDINATOR);
                }
                *t = TxnMetadata {
                    pending: false,
                    ..next
                };
                Ok(())
            })
        };
        self.settled.notify_all();
        taken
    }
}

/// The version from which AddPartitionsToTxn, AddOffsetsToTxn and EndTxn answer
/// PRODUCER_FENCED (InitProducerId: 4).
pub const TXN_APIS_FENCED_FROM: i16 = 2;

/// Kafka answers InitProducerId before v4 and the other transaction APIs before v2 with
/// INVALID_PRODUCER_EPOCH where later versions get PRODUCER_FENCED.
pub fn fenced_code_for(code: ErrorCode, version: i16, fenced_from: i16) -> ErrorCode {
    if code == ErrorCode::PRODUCER_FENCED && version < fenced_from {
        ErrorCode::INVALID_PRODUCER_EPOCH
    } else {
        code
    }
}
