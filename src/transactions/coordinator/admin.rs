//! What operators ask of the coordinator: DescribeTransactions and ListTransactions (KIP-664).

use super::*;
use crate::transactions::state::TxnState;
use ferrite_shards::types::now_ms;

/// A transactional id as DescribeTransactions shows it.
#[derive(Clone, Debug)]
pub struct DescribedTxn {
    pub state: &'static str,
    pub timeout_ms: i32,
    pub start_ms: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub partitions: Vec<(String, i32)>,
}

/// A transactional id as ListTransactions shows it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ListedTxn {
    pub transactional_id: String,
    pub producer_id: i64,
    pub state: &'static str,
}

impl TxnCoordinator {
    /// TRANSACTIONAL_ID_NOT_FOUND for an id this coordinator does not have (or has let expire).
    pub fn describe(&self, id: &str) -> Result<DescribedTxn, ErrorCode> {
        let txn = self.get(id).ok_or(ErrorCode::TRANSACTIONAL_ID_NOT_FOUND)?;
        let t = txn.borrow();
        if t.state == TxnState::Dead {
            return Err(ErrorCode::TRANSACTIONAL_ID_NOT_FOUND);
        }
        Ok(DescribedTxn {
            state: t.state.name(),
            timeout_ms: t.timeout_ms,
            start_ms: t.start_ms,
            producer_id: t.producer_id,
            producer_epoch: t.producer_epoch,
            partitions: t.partitions.iter().cloned().collect(),
        })
    }

    /// The ids in any of `states` (all when empty), of any of `producer_ids` (all when empty),
    /// open for longer than `min_duration_ms` (v1's duration filter; -1: any); COORDINATOR_LOAD_IN_PROGRESS
    /// while a partition is being read.
    pub fn list(
        &self,
        states: &[String],
        producer_ids: &[i64],
        min_duration_ms: i64,
    ) -> Result<Vec<ListedTxn>, ErrorCode> {
        if !self.loading.borrow().is_empty() {
            return Err(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS);
        }
        let now = now_ms();
        let mut out: Vec<ListedTxn> = self
            .txns
            .borrow()
            .iter()
            .filter_map(|(id, t)| {
                let t = t.borrow();
                let name = t.state.name();
                let keep = t.state != TxnState::Dead
                    && (states.is_empty() || states.iter().any(|s| s == name))
                    && (producer_ids.is_empty() || producer_ids.contains(&t.producer_id))
                    && (min_duration_ms < 0
                        || (t.start_ms >= 0 && now - t.start_ms > min_duration_ms));
                keep.then(|| ListedTxn {
                    transactional_id: id.clone(),
                    producer_id: t.producer_id,
                    state: name,
                })
            })
            .collect();
        out.sort();
        Ok(out)
    }
}

/// Whether `name` is one of Kafka's state names (ListTransactions echoes the others back).
pub fn is_state_name(name: &str) -> bool {
    (0..=7)
        .filter_map(TxnState::from_id)
        .any(|s| s.name() == name)
}
