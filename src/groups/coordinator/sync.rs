//! SyncGroup (the leader's assignment, stored before anyone is told), Heartbeat, LeaveGroup,
//! and session expiry.

use super::*;

impl Coordinator {
    pub async fn sync(self: &Rc<Self>, partition: i32, a: SyncArgs) -> SyncReply {
        let Some(group) = self.group(&a.group_id) else {
            return SyncReply::error(ErrorCode::UNKNOWN_MEMBER_ID);
        };
        let waiter = {
            let mut g = group.borrow_mut();
            if let Err(code) = check_member(&g, &a.member_id, &a.instance_id, a.generation) {
                return SyncReply::error(code);
            }
            if a.protocol_type
                .as_ref()
                .is_some_and(|t| Some(t) != g.protocol_type.as_ref())
                || a.protocol
                    .as_ref()
                    .is_some_and(|p| Some(p) != g.protocol.as_ref())
            {
                return SyncReply::error(ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
            }
            let reply = |g: &Group, assignment: Bytes| SyncReply {
                error: ErrorCode::NONE,
                protocol_type: g.protocol_type.clone(),
                protocol: g.protocol.clone(),
                assignment,
            };
            g.members
                .get_mut(&a.member_id)
                .expect("checked")
                .last_heartbeat = Instant::now();
            match g.state {
                State::PreparingRebalance => {
                    return SyncReply::error(ErrorCode::REBALANCE_IN_PROGRESS)
                }
                State::Stable => {
                    let assignment = g.members[&a.member_id].assignment.clone();
                    return reply(&g, assignment);
                }
                State::Empty | State::Dead => {
                    return SyncReply::error(ErrorCode::UNKNOWN_MEMBER_ID)
                }
                State::CompletingRebalance => {}
            }
            if g.leader.as_deref() != Some(a.member_id.as_str()) {
                let (tx, rx) = oneshot::channel();
                g.members
                    .get_mut(&a.member_id)
                    .expect("checked")
                    .sync_waiter = Some(tx);
                Some(rx)
            } else {
                let assignments: HashMap<String, Bytes> = a.assignments.into_iter().collect();
                for m in g.members.values_mut() {
                    m.assignment = assignments.get(&m.id).cloned().unwrap_or_default();
                }
                None
            }
        };
        if let Some(rx) = waiter {
            return rx
                .await
                .unwrap_or_else(|_| SyncReply::error(ErrorCode::REBALANCE_IN_PROGRESS));
        }
        // The leader: the assignment is stored before anyone is told.
        let (value, generation) = {
            let g = group.borrow();
            (g.to_value(), g.generation)
        };
        let stored = self
            .append(
                partition,
                vec![(
                    Key::Group {
                        group: a.group_id.clone(),
                    }
                    .encode(),
                    Some(value.encode()),
                )],
            )
            .await;
        let mut g = group.borrow_mut();
        if g.state != State::CompletingRebalance || g.generation != generation {
            return SyncReply::error(ErrorCode::REBALANCE_IN_PROGRESS);
        }
        if let Err(code) = stored {
            tracing::warn!(group = %g.id, %code, "storing the group failed; rebalancing");
            let epoch = self.start_rebalance(&mut g);
            drop(g);
            if let Some(epoch) = epoch {
                self.spawn_rebalance_timer(partition, &group, epoch);
            }
            return SyncReply::error(ErrorCode::COORDINATOR_NOT_AVAILABLE);
        }
        g.set_state(State::Stable);
        let (pt, p) = (g.protocol_type.clone(), g.protocol.clone());
        for m in g.members.values_mut() {
            if let Some(w) = m.sync_waiter.take() {
                m.last_heartbeat = Instant::now();
                let _ = w.send(SyncReply {
                    error: ErrorCode::NONE,
                    protocol_type: pt.clone(),
                    protocol: p.clone(),
                    assignment: m.assignment.clone(),
                });
            }
        }
        tracing::info!(group = %g.id, generation, "group stable");
        SyncReply {
            error: ErrorCode::NONE,
            protocol_type: pt,
            protocol: p,
            assignment: g.members[&a.member_id].assignment.clone(),
        }
    }

    pub fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: &Option<String>,
        generation: i32,
    ) -> ErrorCode {
        let Some(group) = self.group(group_id) else {
            return ErrorCode::UNKNOWN_MEMBER_ID;
        };
        let mut g = group.borrow_mut();
        if let Err(code) = check_member(&g, member_id, instance_id, generation) {
            return code;
        }
        g.members
            .get_mut(member_id)
            .expect("checked")
            .last_heartbeat = Instant::now();
        match g.state {
            State::PreparingRebalance => ErrorCode::REBALANCE_IN_PROGRESS,
            State::Empty | State::Dead => ErrorCode::UNKNOWN_MEMBER_ID,
            State::CompletingRebalance | State::Stable => ErrorCode::NONE,
        }
    }

    /// Removes the members; returns a code per member.
    pub fn leave(
        self: &Rc<Self>,
        partition: i32,
        group_id: &str,
        members: Vec<(String, Option<String>)>,
    ) -> Vec<ErrorCode> {
        let Some(group) = self.group(group_id) else {
            return members
                .iter()
                .map(|_| ErrorCode::UNKNOWN_MEMBER_ID)
                .collect();
        };
        let mut removed = false;
        let results = {
            let mut g = group.borrow_mut();
            members
                .into_iter()
                .map(|(member_id, instance_id)| {
                    let id = match (&instance_id, member_id.is_empty()) {
                        (Some(inst), true) => match g.instances.get(inst) {
                            Some(id) => id.clone(),
                            None => return ErrorCode::UNKNOWN_MEMBER_ID,
                        },
                        _ => member_id,
                    };
                    match g.members.get(&id) {
                        None => ErrorCode::UNKNOWN_MEMBER_ID,
                        Some(m) if instance_id.is_some() && m.instance_id != instance_id => {
                            ErrorCode::FENCED_INSTANCE_ID
                        }
                        Some(_) => {
                            g.remove_member(&id, ErrorCode::UNKNOWN_MEMBER_ID);
                            tracing::info!(group = %g.id, member = %id, "member left");
                            removed = true;
                            ErrorCode::NONE
                        }
                    }
                })
                .collect()
        };
        if removed {
            self.after_removal(partition, &group);
        }
        results
    }

    /// After members went away: the others rebalance, or the group is empty.
    pub(super) fn after_removal(self: &Rc<Self>, partition: i32, group: &GroupRef) {
        let epoch = {
            let mut g = group.borrow_mut();
            match g.state {
                State::Stable | State::CompletingRebalance | State::Empty => {
                    self.start_rebalance(&mut g)
                }
                State::PreparingRebalance | State::Dead => None,
            }
        };
        if let Some(epoch) = epoch {
            self.spawn_rebalance_timer(partition, group, epoch);
        }
        let empty = group.borrow().members.is_empty();
        if empty {
            self.complete_join(partition, group);
        } else {
            self.maybe_complete_join(partition, group);
        }
    }

    pub(super) fn expire_sessions(self: &Rc<Self>) {
        let now = Instant::now();
        let groups: Vec<GroupRef> = self.groups.borrow().values().cloned().collect();
        for group in groups {
            let expired = {
                let mut g = group.borrow_mut();
                g.pending.retain(|_, deadline| *deadline > now);
                // A member waiting for a JoinGroup or SyncGroup answer is alive (Kafka's
                // "awaiting a rebalance satisfies the heartbeat"); the rebalance timeout
                // bounds that wait instead.
                g.remove_members_where("session expired", |m| {
                    m.join_waiter.is_none()
                        && m.sync_waiter.is_none()
                        && now.duration_since(m.last_heartbeat) > m.session_timeout
                })
            };
            if expired {
                let partition = self.partition_of(&group);
                self.after_removal(partition, &group);
            }
        }
    }

    pub(super) fn partition_of(&self, group: &GroupRef) -> i32 {
        let partitions = self
            .host()
            .map_or(1, |h| h.offsets_partition_count())
            .max(1);
        crate::groups::records::coordinator_partition(&group.borrow().id, partitions)
    }
}
