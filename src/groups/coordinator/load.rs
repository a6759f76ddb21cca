//! Rebuilding groups and offsets from a `__consumer_offsets` partition.

use super::*;

impl Coordinator {
    /// Rebuilds groups and offsets from one `__consumer_offsets` partition (start-up, or the
    /// partition just created); later records win, a null value deletes.
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
                let Ok(records) = decode_records(&batch) else {
                    tracing::warn!(
                        partition = partition.index(),
                        "skipping an unreadable batch in __consumer_offsets"
                    );
                    continue;
                };
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
                            match r.value.map(OffsetValue::decode) {
                                Some(Ok(v)) => {
                                    g.borrow_mut().offsets.insert((topic, p), v);
                                    offsets += 1;
                                }
                                Some(Err(_)) => {}
                                None => {
                                    g.borrow_mut().offsets.remove(&(topic, p));
                                }
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
