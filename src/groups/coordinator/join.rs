//! JoinGroup: admitting members (KIP-394 member ids, static members), rebalances with their
//! initial delay and timeouts, and the end of the join phase.

use super::*;

impl Coordinator {
    pub async fn join(self: &Rc<Self>, partition: i32, a: JoinArgs) -> JoinReply {
        let c = &self.config;
        if a.session_timeout < c.min_session_timeout || a.session_timeout > c.max_session_timeout {
            return JoinReply::error(ErrorCode::INVALID_SESSION_TIMEOUT, &a.member_id);
        }
        let group = self.group_or_create(&a.group_id);
        let admitted = {
            let mut g = group.borrow_mut();
            if g.state == State::Dead {
                return JoinReply::error(ErrorCode::COORDINATOR_NOT_AVAILABLE, &a.member_id);
            }
            if !g.accepts(&a.protocol_type, &a.protocols) {
                return JoinReply::error(ErrorCode::INCONSISTENT_GROUP_PROTOCOL, &a.member_id);
            }
            let now = Instant::now();
            g.pending.retain(|_, deadline| *deadline > now);
            self.admit(&mut g, a, now)
        };
        let (waiter, rebalance) = match admitted {
            Admitted::Reply(r) => return r,
            Admitted::Wait(w, rebalance) => (w, rebalance),
            Admitted::AfterStoring(reply) => {
                return self.store_then_reply(partition, &group, reply).await;
            }
        };
        if let Some(epoch) = rebalance {
            self.spawn_rebalance_timer(partition, &group, epoch);
        }
        self.maybe_complete_join(partition, &group);
        waiter
            .await
            .unwrap_or_else(|_| JoinReply::error(ErrorCode::UNKNOWN_MEMBER_ID, ""))
    }

    /// Stores the group (a static member's new id) and replies, unless the group moved on.
    pub(super) async fn store_then_reply(
        &self,
        partition: i32,
        group: &GroupRef,
        reply: JoinReply,
    ) -> JoinReply {
        let (id, value, generation) = {
            let g = group.borrow();
            (g.id.clone(), g.to_value(), g.generation)
        };
        let key = Key::Group { group: id };
        if let Err(code) = self
            .append(partition, vec![(key.encode(), Some(value.encode()))])
            .await
        {
            return JoinReply::error(code, &reply.member_id);
        }
        if group.borrow().generation != generation {
            return JoinReply::error(ErrorCode::REBALANCE_IN_PROGRESS, &reply.member_id);
        }
        reply
    }

    pub(super) fn admit(&self, g: &mut Group, a: JoinArgs, now: Instant) -> Admitted {
        if a.member_id.is_empty() {
            let new_id = new_member_id(&a.client_id);
            if let Some(inst) = a.instance_id.clone() {
                if let Some(old_id) = g.instances.get(&inst).cloned() {
                    return self.rejoin_static(g, &old_id, new_id, a, now);
                }
                return self.add_member(g, new_id, a, now);
            }
            if a.version >= 4 {
                // KIP-394: the client learns its id first and joins again with it.
                g.pending.insert(new_id.clone(), now + a.session_timeout);
                return Admitted::Reply(JoinReply::error(ErrorCode::MEMBER_ID_REQUIRED, &new_id));
            }
            return self.add_member(g, new_id, a, now);
        }
        if g.pending.remove(&a.member_id).is_some() {
            let id = a.member_id.clone();
            return self.add_member(g, id, a, now);
        }
        let is_leader = g.leader.as_deref() == Some(a.member_id.as_str());
        let state = g.state;
        let Some(m) = g.members.get_mut(&a.member_id) else {
            return Admitted::Reply(JoinReply::error(ErrorCode::UNKNOWN_MEMBER_ID, &a.member_id));
        };
        if m.instance_id != a.instance_id {
            return Admitted::Reply(JoinReply::error(
                ErrorCode::FENCED_INSTANCE_ID,
                &a.member_id,
            ));
        }
        let unchanged = m.protocols == a.protocols;
        m.protocols = a.protocols;
        m.session_timeout = a.session_timeout;
        m.rebalance_timeout = a.rebalance_timeout;
        m.last_heartbeat = now;
        let member_id = a.member_id;
        match state {
            State::CompletingRebalance if unchanged => Admitted::Reply(current_join(g, &member_id)),
            State::Stable if unchanged && !is_leader => {
                Admitted::Reply(current_join(g, &member_id))
            }
            _ => {
                let (tx, rx) = oneshot::channel();
                g.members.get_mut(&member_id).expect("present").join_waiter = Some(tx);
                let rebalance = self.start_rebalance(g);
                Admitted::Wait(rx, rebalance)
            }
        }
    }

    pub(super) fn add_member(
        &self,
        g: &mut Group,
        id: String,
        a: JoinArgs,
        now: Instant,
    ) -> Admitted {
        let (tx, rx) = oneshot::channel();
        if g.members.is_empty() {
            g.protocol_type = Some(a.protocol_type.clone());
        }
        if let Some(inst) = &a.instance_id {
            g.instances.insert(inst.clone(), id.clone());
        }
        let joined_at = g.next_order();
        let mut member = new_member(id.clone(), a, now, joined_at);
        member.join_waiter = Some(tx);
        g.members.insert(id, member);
        // New members arriving during a new group's initial delay extend it, within the
        // rebalance timeout, so a whole fleet of consumers lands in one first generation.
        if let (Some(until), Some(deadline)) = (g.initial_until, g.rebalance_deadline) {
            let extended = (now + self.config.initial_rebalance_delay).min(deadline);
            if extended > until {
                g.initial_until = Some(extended);
            }
        }
        let rebalance = self.start_rebalance(g);
        Admitted::Wait(rx, rebalance)
    }

    /// A static member restarting (same `group.instance.id`, no member id): it takes its old
    /// place under a new id; the old id is fenced. In a stable group whose protocol would not
    /// change, there is no rebalance: the member (even the leader) gets its old assignment
    /// back once the new id is stored, as Kafka does since KIP-814.
    pub(super) fn rejoin_static(
        &self,
        g: &mut Group,
        old_id: &str,
        new_id: String,
        a: JoinArgs,
        now: Instant,
    ) -> Admitted {
        let was_leader = g.leader.as_deref() == Some(old_id);
        let Some(old) = g.remove_member(old_id, ErrorCode::FENCED_INSTANCE_ID) else {
            return self.add_member(g, new_id, a, now);
        };
        let inst = a.instance_id.clone().expect("static member");
        g.instances.insert(inst, new_id.clone());
        if was_leader {
            g.leader = Some(new_id.clone());
        }
        let mut member = new_member(new_id.clone(), a, now, old.joined_at);
        member.assignment = old.assignment;
        g.members.insert(new_id.clone(), member);
        tracing::info!(group = %g.id, old = %old_id, new = %new_id, "static member rejoined");
        if g.state == State::Stable && g.select_protocol() == g.protocol {
            let mut reply = current_join(g, &new_id);
            reply.skip_assignment = was_leader;
            return Admitted::AfterStoring(reply);
        }
        let (tx, rx) = oneshot::channel();
        g.members.get_mut(&new_id).expect("inserted").join_waiter = Some(tx);
        let rebalance = self.start_rebalance(g);
        Admitted::Wait(rx, rebalance)
    }

    /// Moves the group to PreparingRebalance; returns the new rebalance's epoch when it
    /// started one (the caller starts its timer).
    pub(super) fn start_rebalance(&self, g: &mut Group) -> Option<u64> {
        if g.state == State::PreparingRebalance {
            return None;
        }
        let first = g.state == State::Empty;
        let now = Instant::now();
        for m in g.members.values_mut() {
            if let Some(w) = m.sync_waiter.take() {
                m.last_heartbeat = now;
                let _ = w.send(SyncReply::error(ErrorCode::REBALANCE_IN_PROGRESS));
            }
        }
        g.set_state(State::PreparingRebalance);
        g.rebalance_epoch += 1;
        g.rebalance_deadline = Some(now + g.largest_rebalance_timeout());
        let delay = self.config.initial_rebalance_delay;
        g.initial_until = (first && !delay.is_zero()).then(|| now + delay);
        tracing::debug!(group = %g.id, members = g.members.len(), "rebalance started");
        Some(g.rebalance_epoch)
    }

    pub(super) fn spawn_rebalance_timer(
        self: &Rc<Self>,
        partition: i32,
        group: &GroupRef,
        epoch: u64,
    ) {
        // Weak: a timer neither keeps the coordinator nor a deleted group alive.
        let (me, weak_group) = (Rc::downgrade(self), Rc::downgrade(group));
        glommio::spawn_local(async move {
            loop {
                let (deadline, initial) = {
                    let Some(group) = weak_group.upgrade() else {
                        return;
                    };
                    let g = group.borrow();
                    if g.rebalance_epoch != epoch || g.state != State::PreparingRebalance {
                        return;
                    }
                    (
                        g.rebalance_deadline.unwrap_or_else(Instant::now),
                        g.initial_until,
                    )
                };
                let now = Instant::now();
                let wake = initial
                    .filter(|t| *t > now)
                    .map_or(deadline, |t| t.min(deadline));
                if wake > now {
                    glommio::timer::sleep(wake - now).await;
                }
                let (Some(me), Some(group)) = (me.upgrade(), weak_group.upgrade()) else {
                    return;
                };
                let now = Instant::now();
                {
                    let mut g = group.borrow_mut();
                    if g.rebalance_epoch != epoch || g.state != State::PreparingRebalance {
                        return;
                    }
                    if g.initial_until.is_some_and(|t| now >= t) {
                        g.initial_until = None;
                    }
                }
                if now >= deadline {
                    me.complete_join(partition, &group);
                    return;
                }
                me.maybe_complete_join(partition, &group);
            }
        })
        .detach();
    }

    pub(super) fn maybe_complete_join(self: &Rc<Self>, partition: i32, group: &GroupRef) {
        let ready = {
            let g = group.borrow();
            g.state == State::PreparingRebalance
                && g.all_joined()
                && g.initial_until.is_none_or(|t| Instant::now() >= t)
        };
        if ready {
            self.complete_join(partition, group);
        }
    }

    /// Ends the join phase: members that did not rejoin are out; the rest get the new
    /// generation, and the leader everyone's metadata.
    pub(super) fn complete_join(self: &Rc<Self>, partition: i32, group: &GroupRef) {
        let mut g = group.borrow_mut();
        if g.state != State::PreparingRebalance {
            return;
        }
        g.remove_members_where("did not rejoin within the rebalance timeout", |m| {
            m.join_waiter.is_none()
        });
        g.generation += 1;
        g.rebalance_deadline = None;
        g.initial_until = None;
        if g.members.is_empty() {
            g.protocol = None;
            g.leader = None;
            g.set_state(State::Empty);
            tracing::info!(group = %g.id, generation = g.generation, "group empty");
            let value = g.to_value();
            let id = g.id.clone();
            drop(g);
            self.persist_group(partition, id, value);
            return;
        }
        g.protocol = g.select_protocol();
        if g.leader.as_ref().is_none_or(|l| !g.members.contains_key(l)) {
            g.leader = g
                .members
                .values()
                .min_by_key(|m| m.joined_at)
                .map(|m| m.id.clone());
        }
        g.set_state(State::CompletingRebalance);
        let protocol = g.protocol.clone().unwrap_or_default();
        let leader = g.leader.clone().unwrap_or_default();
        let everyone = g.members_in_join_order(&protocol);
        let (generation, protocol_type) = (g.generation, g.protocol_type.clone());
        tracing::info!(group = %g.id, generation, members = everyone.len(), protocol = %protocol, "join completed");
        for m in g.members.values_mut() {
            if let Some(w) = m.join_waiter.take() {
                // Its session runs from the answer: it could not heartbeat while waiting.
                m.last_heartbeat = Instant::now();
                let _ = w.send(JoinReply {
                    error: ErrorCode::NONE,
                    generation,
                    protocol_type: protocol_type.clone(),
                    protocol: Some(protocol.clone()),
                    leader: leader.clone(),
                    member_id: m.id.clone(),
                    members: if m.id == leader {
                        everyone.clone()
                    } else {
                        Vec::new()
                    },
                    skip_assignment: false,
                });
            }
        }
        let timeout = g.largest_rebalance_timeout();
        drop(g);
        self.spawn_sync_timer(partition, group, generation, timeout);
    }

    /// Members that have not sent SyncGroup within the rebalance timeout after the join are
    /// removed and the group rebalances, so a leader that never assigns cannot hold the group
    /// (even while it heartbeats).
    pub(super) fn spawn_sync_timer(
        self: &Rc<Self>,
        partition: i32,
        group: &GroupRef,
        generation: i32,
        timeout: Duration,
    ) {
        let (me, group) = (Rc::downgrade(self), Rc::downgrade(group));
        glommio::spawn_local(async move {
            glommio::timer::sleep(timeout).await;
            let (Some(me), Some(group)) = (me.upgrade(), group.upgrade()) else {
                return;
            };
            let removed = {
                let mut g = group.borrow_mut();
                if g.state != State::CompletingRebalance || g.generation != generation {
                    return;
                }
                g.remove_members_where("no SyncGroup within the rebalance timeout", |m| {
                    m.sync_waiter.is_none()
                })
            };
            if removed {
                me.after_removal(partition, &group);
            }
        })
        .detach();
    }
}

/// A member as its JoinGroup describes it: no assignment yet, nobody waiting.
fn new_member(id: String, a: JoinArgs, now: Instant, joined_at: u64) -> Member {
    Member {
        id,
        instance_id: a.instance_id,
        client_id: a.client_id,
        client_host: a.client_host,
        session_timeout: a.session_timeout,
        rebalance_timeout: a.rebalance_timeout,
        protocols: a.protocols,
        assignment: Bytes::new(),
        last_heartbeat: now,
        joined_at,
        join_waiter: None,
        sync_waiter: None,
    }
}
