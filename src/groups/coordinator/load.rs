//! Rebuilding groups and offsets from a `__consumer_offsets` partition.

use super::*;
use ferrite_shards::batch::{control, BatchHeader, HEADER_BYTES};

impl Coordinator {
    /// Rebuilds groups and offsets from one `__consumer_offsets` partition (start-up, or the
    /// partition just created); later records win, a null value deletes; a transaction's
    /// offsets wait for its marker (those of a transaction still open stay pending).
    pub async fn load(&self, partition: &Rc<Partition>) -> Result<(usize, usize), String> {
        let log = partition.log();
        let end = log.log_end_offset();
        let mut at = log.log_start_offset();
        let (mut offsets, mut groups) = (0usize, 0usize);
        while at < end {
            let read = log
                .read(at, LOAD_READ_BYTES, end)
                .await
                .map_err(|e| e.to_string())?;
            if read.next_offset <= at {
                break;
            }
            let bytes = read.to_bytes().await.map_err(|e| e.to_string())?;
            for batch in split_batches(&bytes).unwrap_or_default() {
                let Ok(header) = BatchHeader::parse(&batch) else {
                    continue;
                };
                // A transaction's marker: its offsets here apply or vanish. Checked first: a
                // marker's key would read as an offset key of version 0.
                if header.is_control() {
                    let records = batch.get(HEADER_BYTES..).unwrap_or_default();
                    if let Some(m) = control::parse_marker(&header, records) {
                        let partitions = self.host().map_or(1, |h| h.offsets_partition_count());
                        let commit = m.marker == control::Marker::Commit;
                        self.complete_transaction(
                            partition.index(),
                            partitions,
                            header.producer_id,
                            commit,
                        );
                    }
                    continue;
                }
                let Ok(records) = decode_records(&batch) else {
                    tracing::warn!(
                        partition = partition.index(),
                        "skipping an unreadable batch in __consumer_offsets"
                    );
                    continue;
                };
                // Offsets of a transaction pend until its marker.
                let producer = header.is_transactional().then_some(header.producer_id);
                for r in records {
                    let Some(key) = r.key.and_then(|k| Key::decode(k).ok()) else {
                        continue;
                    };
                    match key {
                        Key::Offset {
                            group,
                            topic,
                            partition: p,
                        } => {
                            let g = self.group_or_create(&group);
                            let mut g = g.borrow_mut();
                            match (r.value.map(OffsetValue::decode), producer) {
                                (Some(Ok(v)), Some(pid)) => {
                                    g.pending_txn_offsets
                                        .entry(pid)
                                        .or_default()
                                        .insert((topic, p), (v, r.offset));
                                    offsets += 1;
                                }
                                (Some(Ok(v)), None) => {
                                    g.set_offset((topic, p), v, r.offset);
                                    offsets += 1;
                                }
                                (Some(Err(_)), _) | (None, Some(_)) => {}
                                (None, None) => g.remove_offset(&(topic, p)),
                            }
                        }
                        Key::Group { group } => match r.value.map(GroupValue::decode) {
                            Some(Ok(v)) => {
                                self.group_or_create(&group).borrow_mut().restore(v);
                                groups += 1;
                            }
                            Some(Err(_)) => {}
                            None => {
                                self.groups.borrow_mut().remove(&group);
                            }
                        },
                    }
                }
            }
            at = read.next_offset;
        }
        Ok((groups, offsets))
    }
}
