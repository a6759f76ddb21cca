//! An ISR change the leader has asked for and not yet seen in the metadata.
//!
//! The leader asks ZooKeeper for a new ISR and learns of it only when the metadata comes back.
//! A follower the change adds is in the ISR for the controller from the moment the write lands,
//! and may be elected leader then. So from the moment the leader asks until metadata at least as
//! new as its write arrives, the high watermark counts the joining followers too: otherwise it
//! could pass a joining follower's log end and acknowledge records the next leader lacks. This
//! is Kafka's "maximal ISR" (KIP-497; `Partition.scala`'s `PendingExpandIsr` computes the high
//! watermark over the committed ISR plus the replica being added, and `PendingShrinkIsr` keeps
//! the old ISR until the shrink is committed, which our metadata's ISR already does). Like
//! Kafka, the leader asks for no other change while one is pending.

use super::Partition;

#[derive(Clone, Debug)]
pub(super) struct PendingIsr {
    /// The leader epoch the change was asked in: a new epoch ends it.
    leader_epoch: i32,
    /// Followers the change adds, which hold the high watermark meanwhile.
    pub(super) joining: Vec<i32>,
    /// The partition epoch the write made, once ZooKeeper has answered.
    written_at: Option<i32>,
}

impl Partition {
    /// The leader is about to ask for `isr`: its new members count for the high watermark from
    /// now. Call it with no await between `wanted_isr` and the request.
    pub fn begin_isr_change(&self, isr: &[i32]) {
        let role = self.role();
        let joining = isr
            .iter()
            .copied()
            .filter(|r| !role.isr.contains(r))
            .collect();
        *self.replication.pending_isr.borrow_mut() = Some(PendingIsr {
            leader_epoch: self.leader_epoch(),
            joining,
            written_at: None,
        });
    }

    /// ZooKeeper's answer to the change: `Some` with the partition epoch the write made, `None`
    /// when it was refused or not made (the committed ISR stands, and the high watermark may
    /// move without the followers that were to join).
    pub fn end_isr_change(&self, written_at: Option<i32>) {
        match written_at {
            None => *self.replication.pending_isr.borrow_mut() = None,
            Some(epoch) => {
                if let Some(change) = self.replication.pending_isr.borrow_mut().as_mut() {
                    change.written_at = Some(epoch);
                }
                self.settle_isr_change();
            }
        }
        self.recompute_high_watermark();
        self.hw_moved.notify_all();
    }

    /// Whether an asked ISR change has not yet shown in the metadata.
    pub fn isr_change_pending(&self) -> bool {
        self.replication.pending_isr.borrow().is_some()
    }

    /// Ends the pending change once the role shows it committed (metadata at or past the
    /// change's partition epoch), or once this replica no longer leads in the epoch it was
    /// asked in. Metadata read before the write landed leaves it pending.
    pub(super) fn settle_isr_change(&self) {
        let role = self.role();
        let mut pending = self.replication.pending_isr.borrow_mut();
        let Some(change) = pending.as_ref() else {
            return;
        };
        let deposed = !role.is_leader() || change.leader_epoch != self.leader_epoch();
        let committed = change
            .written_at
            .is_some_and(|epoch| role.partition_epoch >= epoch);
        if deposed || committed {
            *pending = None;
        }
    }
}
