//! A transactional id's state at its coordinator, and Kafka's states (`TransactionState`,
//! `TransactionMetadata`).
//!
//! ```text
//! Empty         ← Empty, CompleteCommit, CompleteAbort       (InitProducerId: epoch bump)
//! Ongoing       ← Ongoing, Empty, CompleteCommit, CompleteAbort  (AddPartitions/AddOffsets)
//! PrepareCommit ← Ongoing                                     (EndTxn commit)
//! PrepareAbort  ← Ongoing                                     (EndTxn abort, fencing, timeout)
//! CompleteCommit ← PrepareCommit; CompleteAbort ← PrepareAbort (every marker written)
//! Dead          ← Empty, CompleteCommit, CompleteAbort        (expiry: a tombstone)
//! ```
//! PrepareEpochFence is Kafka's in-memory step between Ongoing and PrepareAbort when a new
//! producer fences an old one; here the fence is one write (PrepareAbort with the bumped epoch),
//! so the state is named for DescribeTransactions but never held.

use super::records::TxnValue;
use std::collections::BTreeSet;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    Dead,
    PrepareEpochFence,
}

impl TxnState {
    /// The status byte of `TransactionLogValue`.
    pub fn id(self) -> i8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
            TxnState::PrepareEpochFence => 7,
        }
    }

    pub fn from_id(id: i8) -> Option<TxnState> {
        Some(match id {
            0 => TxnState::Empty,
            1 => TxnState::Ongoing,
            2 => TxnState::PrepareCommit,
            3 => TxnState::PrepareAbort,
            4 => TxnState::CompleteCommit,
            5 => TxnState::CompleteAbort,
            6 => TxnState::Dead,
            7 => TxnState::PrepareEpochFence,
            _ => return None,
        })
    }

    /// The name DescribeTransactions and ListTransactions use (`TransactionState.name`).
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// No transaction in progress: a new one may begin.
    pub fn is_idle(self) -> bool {
        matches!(
            self,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        )
    }

    pub fn is_preparing(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }
}

/// One transactional id at its coordinator.
#[derive(Clone, Debug)]
pub struct TxnMetadata {
    pub producer_id: i64,
    /// The producer id and epoch before the last InitProducerId (KIP-360 retries); not stored,
    /// so -1 after a load, as in Kafka.
    pub last_producer_id: i64,
    pub last_producer_epoch: i16,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<(String, i32)>,
    pub start_ms: i64,
    pub last_update_ms: i64,
    /// A transition is being written: the next request gets CONCURRENT_TRANSACTIONS.
    pub pending: bool,
}

impl TxnMetadata {
    /// A transactional id seen for the first time, with a fresh producer id (epoch -1: the
    /// InitProducerId that created it bumps it to 0).
    pub fn new(producer_id: i64, timeout_ms: i32, now_ms: i64) -> TxnMetadata {
        TxnMetadata {
            producer_id,
            last_producer_id: -1,
            last_producer_epoch: -1,
            producer_epoch: -1,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: now_ms,
            pending: false,
        }
    }

    pub fn from_value(v: TxnValue) -> TxnMetadata {
        TxnMetadata {
            producer_id: v.producer_id,
            last_producer_id: -1,
            last_producer_epoch: -1,
            producer_epoch: v.producer_epoch,
            timeout_ms: v.timeout_ms,
            state: v.state,
            partitions: v.partitions,
            start_ms: v.start_ms,
            last_update_ms: v.last_update_ms,
            pending: false,
        }
    }

    /// The record of this state.
    pub fn value(&self) -> TxnValue {
        TxnValue {
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            timeout_ms: self.timeout_ms,
            state: self.state,
            partitions: self.partitions.clone(),
            last_update_ms: self.last_update_ms,
            start_ms: self.start_ms,
        }
    }
}
