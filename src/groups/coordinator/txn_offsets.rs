//! Offsets committed inside a producer's transaction (KIP-98, KIP-447): TxnOffsetCommit
//! appends them to the group's `__consumer_offsets` partition as a transactional batch of the
//! producer; they stay pending until the transaction's marker reaches that partition, then
//! apply (commit) or vanish (abort), as `GroupMetadata`'s pending transactional offsets do.

use super::*;

impl Coordinator {
    /// KIP-890 for a transactional offset commit: a guard on the group's partition when the
    /// producer's transaction is not open there yet (then the caller verifies it with the
    /// transaction coordinator).
    pub fn start_txn_verification(&self, partition: i32, producer_id: i64) -> Option<u64> {
        let p = self.host()?.offsets_partition(partition)?;
        p.needs_verification(producer_id)
            .then(|| p.start_verification(producer_id))
    }

    /// Commits offsets in the producer's transaction; one code per offset, in order.
    pub async fn txn_commit(&self, partition: i32, t: TxnCommitArgs) -> Vec<ErrorCode> {
        let a = &t.commit;
        let n = a.offsets.len();
        let Some(host) = self.host() else {
            return vec![ErrorCode::NOT_COORDINATOR; n];
        };
        let Some(p) = host.offsets_partition(partition) else {
            return vec![ErrorCode::NOT_COORDINATOR; n];
        };
        let group = self.group_or_create(&a.group_id);
        // `validateOffsetCommit(isTransactional = true)`: a producer that names its member
        // (KIP-447) must be a current member of the current generation; one that does not is
        // taken whatever the group's state.
        let names_member = a.generation >= 0 || !a.member_id.is_empty() || a.instance_id.is_some();
        if names_member {
            if let Err(code) =
                check_member(&group.borrow(), &a.member_id, &a.instance_id, a.generation)
            {
                return vec![code; n];
            }
        }
        let super::offsets::OffsetRecords {
            mut codes,
            records,
            accepted,
        } = self.offset_records(host.as_ref(), a);
        if records.is_empty() {
            return codes;
        }
        let producer = ProducerFields {
            producer_id: t.producer_id,
            producer_epoch: t.producer_epoch,
            base_sequence: 0,
        };
        match store::append_transactional(&p, records, producer, t.guard).await {
            Ok(position) => {
                let mut g = group.borrow_mut();
                let pending = g.pending_txn_offsets.entry(t.producer_id).or_default();
                for (_, tp, value) in accepted {
                    pending.insert(tp, (value, position));
                }
            }
            Err(code) => {
                for (i, _, _) in accepted {
                    codes[i] = code;
                }
            }
        }
        codes
    }

    /// The producer's marker reached `__consumer_offsets` partition `partition` (of
    /// `partitions`): its pending offsets in the groups there apply or vanish.
    pub fn complete_transaction(
        &self,
        partition: i32,
        partitions: i32,
        producer_id: i64,
        commit: bool,
    ) {
        let groups: Vec<GroupRef> = self
            .groups
            .borrow()
            .iter()
            .filter(|(id, _)| {
                super::super::records::coordinator_partition(id, partitions) == partition
            })
            .map(|(_, g)| g.clone())
            .collect();
        for g in groups {
            g.borrow_mut().complete_transaction(producer_id, commit);
        }
    }
}
