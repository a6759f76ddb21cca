//! OffsetCommit and OffsetFetch: committed positions, stored as records before they count.

use super::*;

/// The records of an offset commit (plain or transactional) and, per offset, whether it is
/// taken: an unknown partition or metadata over `offset.metadata.max.bytes` is refused.
pub(super) struct OffsetRecords {
    /// One code per offset, in order; NONE for those with a record.
    pub codes: Vec<ErrorCode>,
    pub records: Vec<(Bytes, Option<Bytes>)>,
    /// (index in the commit, partition, value) of each record.
    pub accepted: Vec<(usize, (String, i32), OffsetValue)>,
}

impl Coordinator {
    pub(super) fn offset_records(&self, host: &dyn GroupHost, a: &CommitArgs) -> OffsetRecords {
        let codes: Vec<ErrorCode> = a
            .offsets
            .iter()
            .map(|o| {
                if !host.has_partition(&o.topic, o.partition) {
                    ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
                } else if o
                    .metadata
                    .as_ref()
                    .is_some_and(|m| m.len() > self.config.offset_metadata_max_bytes)
                {
                    ErrorCode::OFFSET_METADATA_TOO_LARGE
                } else {
                    ErrorCode::NONE
                }
            })
            .collect();
        let now = now_ms();
        let mut records = Vec::new();
        let mut accepted = Vec::new();
        for (i, o) in a.offsets.iter().enumerate() {
            if codes[i] != ErrorCode::NONE {
                continue;
            }
            let value = OffsetValue {
                offset: o.offset,
                leader_epoch: o.leader_epoch,
                metadata: o.metadata.clone().unwrap_or_default(),
                commit_timestamp_ms: now,
            };
            let key = Key::Offset {
                group: a.group_id.clone(),
                topic: o.topic.clone(),
                partition: o.partition,
            };
            records.push((key.encode(), Some(value.encode())));
            accepted.push((i, (o.topic.clone(), o.partition), value));
        }
        OffsetRecords {
            codes,
            records,
            accepted,
        }
    }

    /// Commits offsets; one code per offset, in order.
    pub async fn commit(self: &Rc<Self>, partition: i32, a: CommitArgs) -> Vec<ErrorCode> {
        let Some(host) = self.host() else {
            return vec![ErrorCode::NOT_COORDINATOR; a.offsets.len()];
        };
        let group = if a.generation < 0 && a.member_id.is_empty() {
            let g = self.group_or_create(&a.group_id);
            if !g.borrow().members.is_empty() {
                // A group with members takes commits from its members only.
                return vec![ErrorCode::UNKNOWN_MEMBER_ID; a.offsets.len()];
            }
            g
        } else {
            let Some(g) = self.group(&a.group_id) else {
                return vec![ErrorCode::UNKNOWN_MEMBER_ID; a.offsets.len()];
            };
            let check = {
                let gb = g.borrow();
                check_member(&gb, &a.member_id, &a.instance_id, a.generation).and_then(|()| {
                    if gb.state == State::CompletingRebalance {
                        Err(ErrorCode::REBALANCE_IN_PROGRESS)
                    } else {
                        Ok(())
                    }
                })
            };
            if let Err(code) = check {
                return vec![code; a.offsets.len()];
            }
            g
        };
        let OffsetRecords {
            codes: mut codes_out,
            records,
            accepted,
        } = self.offset_records(host.as_ref(), &a);
        if records.is_empty() {
            return codes_out;
        }
        match self.append(partition, records).await {
            Ok(position) => {
                let mut g = group.borrow_mut();
                for (_, tp, value) in accepted {
                    g.set_offset(tp, value, position);
                }
            }
            Err(code) => {
                for (i, _, _) in accepted {
                    codes_out[i] = code;
                }
            }
        }
        codes_out
    }

    /// Committed offsets of `topics` (all of the group's when `None`), by topic;
    /// `require_stable`: those a pending transaction holds are `Unstable`.
    pub fn fetch(
        &self,
        group_id: &str,
        topics: Option<Vec<(String, Vec<i32>)>>,
        require_stable: bool,
    ) -> CommittedOffsets {
        let group = self.group(group_id);
        let g = group.as_ref().map(|g| g.borrow());
        let answer = |tp: &(String, i32), v: Option<OffsetValue>| match &g {
            Some(g) if require_stable && g.has_pending_offset(tp) => Fetched::Unstable,
            _ => Fetched::Committed(v),
        };
        match topics {
            Some(wanted) => wanted
                .into_iter()
                .map(|(topic, partitions)| {
                    let offsets = partitions
                        .into_iter()
                        .map(|p| {
                            let tp = (topic.clone(), p);
                            let v = g.as_ref().and_then(|g| g.offsets.get(&tp).cloned());
                            (p, answer(&tp, v))
                        })
                        .collect();
                    (topic, offsets)
                })
                .collect(),
            None => {
                let mut by_topic: HashMap<String, Vec<(i32, Fetched)>> = HashMap::new();
                if let Some(gb) = &g {
                    for (tp, v) in &gb.offsets {
                        by_topic
                            .entry(tp.0.clone())
                            .or_default()
                            .push((tp.1, answer(tp, Some(v.clone()))));
                    }
                }
                let mut out: Vec<_> = by_topic.into_iter().collect();
                out.sort_by(|a, b| a.0.cmp(&b.0));
                for (_, ps) in out.iter_mut() {
                    ps.sort_by_key(|(p, _)| *p);
                }
                out
            }
        }
    }
}
