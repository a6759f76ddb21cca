//! What compaction does with transactions: Kafka's rules (`LogCleaner`'s
//! `CleanedTransactionMetadata` and `buildOffsetMap`), applied batch by batch in offset order.
//!
//! - An aborted transaction's batches go whole. They never enter the offset map either: an
//!   aborted value must not hide the committed value of its key written before it.
//! - A committed transaction's records are compacted like any others.
//! - A marker goes once no batch of its transaction is left, that is, once a pass saw none
//!   between the producer's previous marker and this one, and the marker is past the tombstone
//!   horizon. That horizon is the one tombstones wait for (see `state.rs`): a pass that drops
//!   a transaction's data keeps its marker, and a later pass, at least `delete.retention.ms`
//!   after the first that cleaned it, may drop it. A consumer that read aborted records just
//!   before they went still finds the marker that tells it to skip them. Kafka stamps the
//!   horizon in the batch (KIP-534); Ferrite keeps it beside the log, as for tombstones.
//! - An aborted transaction stays in the cleaned `.txnindex` exactly as long as its marker
//!   stays. A READ_COMMITTED consumer told of an abort skips the producer's batches until it
//!   reads the marker, so an entry without its marker would hide later, committed batches.
//!
//! Ferrite keeps no batch for the producer table's sake (Kafka's `isBatchLastRecordOfProducer`):
//! the cleaner only touches segments below the producer snapshot, which holds every producer.

use crate::batch::control::{parse_marker, Marker};
use crate::batch::{BatchHeader, HEADER_BYTES};
use crate::log::AbortedTxn;
use std::collections::{HashMap, HashSet};

/// The aborted transactions of the log, by producer: `(first offset, marker offset)`, ascending.
#[derive(Default)]
pub(crate) struct AbortedRanges {
    by_producer: HashMap<i64, Vec<(i64, i64)>>,
}

impl AbortedRanges {
    pub fn new<'a>(entries: impl IntoIterator<Item = &'a AbortedTxn>) -> AbortedRanges {
        let mut by_producer: HashMap<i64, Vec<(i64, i64)>> = HashMap::new();
        for e in entries {
            by_producer
                .entry(e.producer_id)
                .or_default()
                .push((e.first_offset, e.last_offset));
        }
        for ranges in by_producer.values_mut() {
            ranges.sort_unstable();
        }
        AbortedRanges { by_producer }
    }

    /// Whether the transactional batch of `producer_id` at `offset` belongs to an aborted
    /// transaction: one of the producer's aborted ranges holds it.
    pub fn contains(&self, producer_id: i64, offset: i64) -> bool {
        let Some(ranges) = self.by_producer.get(&producer_id) else {
            return false;
        };
        let after = ranges.partition_point(|&(first, _)| first <= offset);
        after > 0 && ranges[after - 1].1 >= offset
    }

    /// Whether the batch is left out of the offset map: a marker, or aborted data.
    pub fn unmapped(&self, h: &BatchHeader) -> bool {
        h.is_control() || (h.is_transactional() && self.contains(h.producer_id, h.base_offset))
    }
}

/// What a pass does with one batch, before looking at its records.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum BatchFate {
    /// Filter its records by key, as any batch.
    Filter,
    /// Keep it as it is (a marker still needed).
    Keep,
    /// Drop it whole (aborted data, a marker no longer needed).
    Drop,
}

/// One pass's walk through the transactions, across every run it rewrites.
pub(crate) struct TxnCleaning<'a> {
    aborted: &'a AbortedRanges,
    tombstone_horizon: i64,
    /// Producers with a transactional batch seen since their last marker. A producer has one
    /// transaction open at a time, so the producer names it.
    seen: HashSet<i64>,
    /// Offsets of the ABORT markers this pass dropped: their `.txnindex` entries go with them.
    dropped_aborts: HashSet<i64>,
}

impl<'a> TxnCleaning<'a> {
    pub fn new(aborted: &'a AbortedRanges, tombstone_horizon: i64) -> TxnCleaning<'a> {
        TxnCleaning {
            aborted,
            tombstone_horizon,
            seen: HashSet::new(),
            dropped_aborts: HashSet::new(),
        }
    }

    /// The fate of the next batch of the walk (batches come in offset order).
    pub fn fate(&mut self, batch: &[u8], h: &BatchHeader) -> BatchFate {
        if h.is_control() {
            return self.marker_fate(batch, h);
        }
        if !h.is_transactional() {
            return BatchFate::Filter;
        }
        self.seen.insert(h.producer_id);
        if self.aborted.contains(h.producer_id, h.base_offset) {
            BatchFate::Drop
        } else {
            BatchFate::Filter
        }
    }

    fn marker_fate(&mut self, batch: &[u8], h: &BatchHeader) -> BatchFate {
        let past_horizon = h.base_offset < self.tombstone_horizon;
        if h.record_count == 0 {
            // An emptied control batch holds nothing anyone reads.
            return if past_horizon {
                BatchFate::Drop
            } else {
                BatchFate::Keep
            };
        }
        let Some(marker) = batch.get(HEADER_BYTES..).and_then(|r| parse_marker(h, r)) else {
            // Control records Kafka's transactions do not write: kept, as Kafka keeps them.
            return BatchFate::Keep;
        };
        let data_left = self.seen.remove(&h.producer_id);
        if data_left || !past_horizon {
            return BatchFate::Keep;
        }
        if marker.marker == Marker::Abort {
            self.dropped_aborts.insert(h.base_offset);
        }
        BatchFate::Drop
    }

    /// Whether a source segment's aborted transaction goes into the cleaned `.txnindex`.
    pub fn keeps_index_entry(&self, entry: &AbortedTxn) -> bool {
        !self.dropped_aborts.contains(&entry.last_offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::build::{build_transactional_batch, NewRecord, ProducerFields};
    use crate::batch::control::{build_marker, MarkerRecord};
    use bytes::Bytes;

    fn at(mut batch: Vec<u8>, offset: i64) -> (Vec<u8>, BatchHeader) {
        batch[..8].copy_from_slice(&offset.to_be_bytes());
        let h = BatchHeader::parse(&batch).unwrap();
        (batch, h)
    }

    fn data(pid: i64, offset: i64) -> (Vec<u8>, BatchHeader) {
        let record = NewRecord {
            key: Some(Bytes::from_static(b"k")),
            value: Some(Bytes::from_static(b"v")),
            ..Default::default()
        };
        let producer = ProducerFields {
            producer_id: pid,
            producer_epoch: 0,
            base_sequence: 0,
        };
        at(
            build_transactional_batch(&[record], producer).to_vec(),
            offset,
        )
    }

    fn marker(pid: i64, m: Marker, offset: i64) -> (Vec<u8>, BatchHeader) {
        let record = MarkerRecord {
            marker: m,
            coordinator_epoch: 0,
        };
        at(build_marker(pid, 0, record, 1).to_vec(), offset)
    }

    fn abort_entry(pid: i64, first: i64, last: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id: pid,
            first_offset: first,
            last_offset: last,
            last_stable_offset: last + 1,
        }
    }

    #[test]
    fn aborted_ranges_hold_only_their_producers_offsets() {
        let ranges = AbortedRanges::new(&[abort_entry(1, 10, 20), abort_entry(1, 40, 50)]);
        assert!(ranges.contains(1, 10) && ranges.contains(1, 15) && ranges.contains(1, 50));
        assert!(!ranges.contains(1, 9) && !ranges.contains(1, 30) && !ranges.contains(1, 51));
        assert!(!ranges.contains(2, 15));
    }

    #[test]
    fn markers_outlive_their_data_by_one_pass_and_the_horizon() {
        let entries = [abort_entry(1, 0, 2)];
        let ranges = AbortedRanges::new(&entries);
        let walk = |horizon: i64, batches: &[(Vec<u8>, BatchHeader)]| {
            let mut t = TxnCleaning::new(&ranges, horizon);
            let fates: Vec<BatchFate> = batches.iter().map(|(b, h)| t.fate(b, h)).collect();
            (fates, t.keeps_index_entry(&entries[0]))
        };
        // Producer 1 aborted (data at 0 and 1, marker at 2); producer 2 committed (3, 4).
        let full = [
            data(1, 0),
            data(1, 1),
            marker(1, Marker::Abort, 2),
            data(2, 3),
            marker(2, Marker::Commit, 4),
        ];
        use BatchFate::*;
        assert_eq!(
            walk(100, &full),
            (vec![Drop, Drop, Keep, Filter, Keep], true),
            "data of the transactions was there: both markers stay"
        );
        let markers_only = [marker(1, Marker::Abort, 2), marker(2, Marker::Commit, 4)];
        assert_eq!(
            walk(0, &markers_only),
            (vec![Keep, Keep], true),
            "not past the horizon yet"
        );
        assert_eq!(
            walk(3, &markers_only),
            (vec![Drop, Keep], false),
            "the abort is past the horizon, with its index entry; the commit is not"
        );
        assert_eq!(walk(100, &markers_only), (vec![Drop, Drop], false));
    }

    #[test]
    fn aborted_data_and_markers_stay_out_of_the_offset_map() {
        let ranges = AbortedRanges::new(&[abort_entry(1, 0, 2)]);
        assert!(ranges.unmapped(&data(1, 1).1));
        assert!(!ranges.unmapped(&data(2, 1).1), "committed data is mapped");
        assert!(ranges.unmapped(&marker(2, Marker::Commit, 4).1));
    }
}
