//! A partition's part in replication: its role, and on the leader, what each follower has.
//!
//! The leader learns a follower's log end from the offset the follower fetches at (a follower
//! asks for what it lacks). The high watermark is the least log end over the ISR (the leader's
//! own included) and only moves up; consumers read below it and acks=all waits for it. A
//! follower that has not reached the leader's log end for `replica.lag.time.max.ms` should
//! leave the ISR, and one that has caught up to the high watermark should join it: the broker
//! asks ZooKeeper for those changes, and the new ISR comes back through the metadata. Until it
//! does, followers the asked change adds count for the high watermark too (`isr_change`).
//!
//! A follower's high watermark is the leader's, capped at its own log end.

use super::Partition;
use crate::error::{Error, Result};
use crate::types::now_ms;
use std::cell::RefCell;
use std::collections::HashMap;

/// What this broker is for the partition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Role {
    pub node_id: i32,
    pub leader: i32,
    /// The partition epoch of the metadata this role came from (`isr_change`).
    pub partition_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

impl Role {
    pub fn is_leader(&self) -> bool {
        self.leader >= 0 && self.leader == self.node_id
    }
}

/// How long ago a follower must have fetched to join the ISR: a live follower fetches at
/// least every fetch wait (500 ms); one the controller saw die must not be taken back.
const JOIN_FETCHED_WITHIN_MS: i64 = 1500;

/// A follower as its leader sees it.
#[derive(Copy, Clone, Debug)]
struct Progress {
    log_end: i64,
    /// When it was last caught up (ms), by Kafka's rule: its fetch reached the leader's log
    /// end as of its previous fetch.
    caught_up_ms: i64,
    last_fetch_ms: i64,
    /// The leader's log end at its last fetch.
    leader_end_at_last_fetch: i64,
    /// Its log start as its last fetch said (-1: not said).
    log_start: i64,
    /// Its last fetch asked at or past the high watermark of that moment. Kafka decides a
    /// follower's return to the ISR at its fetch (`Partition.maybeExpandIsr`, from
    /// `updateFollowerFetchState`); compared later with a high watermark that appends have
    /// moved since, a follower of a partition written every few milliseconds would never be
    /// found caught up, and a reassignment under load would never finish.
    reached_high_watermark: bool,
}

impl Progress {
    fn fresh(now: i64) -> Progress {
        Progress {
            log_end: -1,
            caught_up_ms: now,
            last_fetch_ms: 0,
            leader_end_at_last_fetch: i64::MAX,
            log_start: -1,
            reached_high_watermark: false,
        }
    }
}

/// The high watermark of a replicated partition, as last stored (Kafka keeps the same in its
/// `replication-offset-checkpoint`): after a restart consumers see what was committed at once.
pub(super) const HIGH_WATERMARK_FILE: &str = "high-watermark";

#[derive(Default)]
pub(super) struct Replication {
    /// `None` until the metadata gives one: the partition then acts as its only replica.
    role: RefCell<Option<Role>>,
    followers: RefCell<HashMap<i32, Progress>>,
    /// An ISR change asked of ZooKeeper and not yet in the role (`isr_change`).
    pub(super) pending_isr: RefCell<Option<super::isr_change::PendingIsr>>,
    /// What the high-watermark file holds (read at open, then as last written).
    pub(super) stored_high_watermark: std::cell::Cell<Option<i64>>,
}

/// The stored high watermark of the partition in `dir`, if any.
pub(super) async fn load_high_watermark(dir: &std::path::Path) -> Option<i64> {
    let file = crate::uring::File::open_read(&dir.join(HIGH_WATERMARK_FILE))
        .await
        .ok()?;
    let bytes = file.read_at(0, 64).await.ok()?;
    let text = std::str::from_utf8(&bytes).ok()?;
    let mut lines = text.lines();
    (lines.next()? == "0").then_some(())?;
    lines.next()?.trim().parse().ok()
}

impl Partition {
    /// Whether this replica takes producers' batches: it leads, or it has no role (the only
    /// replica, before the metadata says otherwise).
    pub fn leads(&self) -> bool {
        self.replication
            .role
            .borrow()
            .as_ref()
            .is_none_or(Role::is_leader)
    }

    /// The leader the metadata names (-1 without a role).
    pub fn leader(&self) -> i32 {
        self.replication
            .role
            .borrow()
            .as_ref()
            .map_or(-1, |r| r.leader)
    }

    pub fn role(&self) -> Role {
        self.replication.role.borrow().clone().unwrap_or_default()
    }

    /// Takes the role the metadata gives this broker now. A new leader starts tracking its
    /// followers afresh, counting each as caught up from now (Kafka does the same).
    pub fn set_role(&self, role: Role) {
        if !self.role_known.replace(true) && role.replicas.len() > 1 {
            // What this replica has beyond its stored watermark may not be committed: it
            // starts there (or at the log start) and learns the rest from the ISR or leader.
            let start = self.log.log_start_offset();
            let stored = self.replication.stored_high_watermark.get();
            let hw = stored.map_or(start, |h| h.clamp(start, self.log.log_end_offset()));
            self.high_watermark.set(hw);
        }
        let was_leader = self
            .replication
            .role
            .borrow()
            .as_ref()
            .is_some_and(Role::is_leader);
        let became_leader = role.is_leader() && !was_leader;
        if became_leader {
            let now = now_ms();
            let mut followers = self.replication.followers.borrow_mut();
            followers.clear();
            for &r in role.replicas.iter().filter(|&&r| r != role.node_id) {
                followers.insert(r, Progress::fresh(now));
            }
        }
        *self.replication.role.borrow_mut() = Some(role);
        self.settle_isr_change();
        self.recompute_high_watermark();
        // acks=all waiters look again: leadership may be gone.
        self.hw_moved.notify_all();
    }

    /// The leader's side of a follower's fetch: the follower has everything below `offset`
    /// (which is within this log: a fetch beyond the log end tells nothing).
    fn follower_fetched(&self, follower: i32, offset: i64) {
        let leader_end = self.log.log_end_offset();
        if offset > leader_end {
            return;
        }
        let now = now_ms();
        {
            let mut followers = self.replication.followers.borrow_mut();
            let p = followers.entry(follower).or_insert(Progress::fresh(now));
            p.log_end = offset;
            p.reached_high_watermark = offset >= self.high_watermark.get();
            if offset >= leader_end {
                p.caught_up_ms = now;
            } else if offset >= p.leader_end_at_last_fetch {
                p.caught_up_ms = p.last_fetch_ms;
            }
            p.last_fetch_ms = now;
            p.leader_end_at_last_fetch = leader_end;
        }
        self.recompute_high_watermark();
    }

    /// A follower's log start, as its fetch says it (v5+).
    pub fn follower_log_start(&self, follower: i32, log_start: i64) {
        if log_start < 0 {
            return;
        }
        if let Some(p) = self.replication.followers.borrow_mut().get_mut(&follower) {
            p.log_start = log_start;
        }
    }

    /// Kafka's `lowWatermarkIfLeader`: the least log start over this replica and the followers
    /// in the ISR (a follower not heard from counts as not there yet).
    pub fn low_watermark(&self) -> i64 {
        let own = self.log.log_start_offset();
        let role = self.replication.role.borrow();
        let Some(role) = role.as_ref().filter(|r| r.is_leader()) else {
            return own;
        };
        let followers = self.replication.followers.borrow();
        role.isr
            .iter()
            .filter(|&&r| r != role.node_id)
            .map(|r| followers.get(r).map_or(-1, |p| p.log_start))
            .fold(own, i64::min)
    }

    /// A follower's long poll: waits until the log reaches past `offset`, at most `timeout`.
    pub async fn wait_for_log_end(&self, offset: i64, timeout: std::time::Duration) -> bool {
        super::wait_until(
            &self.log_grew,
            || self.log.log_end_offset() > offset,
            timeout,
        )
        .await
    }

    /// Reads for a replica, up to the log end (it replicates what is not committed yet), and
    /// counts its progress. A replica id that is not one of the partition's followers reads as
    /// a consumer does.
    /// A follower that knows another leader epoch than this leader's (`current_leader_epoch`,
    /// -1 when not sent) is refused: one of the two has a stale view.
    pub async fn read_for_follower(
        &self,
        follower: i32,
        current_leader_epoch: i32,
        offset: i64,
        max_bytes: usize,
    ) -> crate::error::Result<crate::log::ReadResult> {
        let counted = self.replication.role.borrow().as_ref().is_some_and(|role| {
            role.is_leader() && follower != role.node_id && role.replicas.contains(&follower)
        });
        if !counted {
            return self.fetch(offset, max_bytes).await;
        }
        if current_leader_epoch >= 0 && current_leader_epoch != self.leader_epoch.get() {
            return Err(crate::error::Error::NotLeader(self.log.dir().to_path_buf()));
        }
        let read = self.log.read(offset, max_bytes, i64::MAX).await?;
        self.follower_fetched(follower, offset);
        Ok(read)
    }

    /// Moves the high watermark to the least log end over the ISR and the followers an asked
    /// ISR change adds (leader only).
    pub(super) fn recompute_high_watermark(&self) {
        let hw = {
            let role = self.replication.role.borrow();
            let pending = self.replication.pending_isr.borrow();
            let joining = pending.iter().flat_map(|change| change.joining.iter());
            let mut hw = self.log.log_end_offset();
            match role.as_ref() {
                // No role given: the only replica.
                None => {}
                Some(role) if !role.is_leader() => return,
                Some(role) => {
                    let followers = self.replication.followers.borrow();
                    for r in role
                        .isr
                        .iter()
                        .chain(joining)
                        .filter(|&&r| r != role.node_id)
                    {
                        match followers.get(r) {
                            Some(p) if p.log_end >= 0 => hw = hw.min(p.log_end),
                            // An ISR member not heard from yet holds the watermark where it is.
                            _ => hw = hw.min(self.high_watermark.get()),
                        }
                    }
                }
            }
            hw
        };
        self.advance_high_watermark(hw);
    }

    /// Stores the high watermark of a replicated partition when it has moved (with each
    /// checkpoint and at close).
    pub(super) async fn store_high_watermark(&self) -> crate::error::Result<()> {
        if self.role().replicas.len() < 2 {
            return Ok(());
        }
        let hw = self.high_watermark.get();
        if self.replication.stored_high_watermark.get() == Some(hw) {
            return Ok(());
        }
        let path = self.log.dir().join(HIGH_WATERMARK_FILE);
        crate::uring::write_atomically(&path, format!("0\n{hw}\n").into_bytes())
            .await
            .map_err(|e| crate::error::Error::io("write high watermark", &path, e))?;
        self.replication.stored_high_watermark.set(Some(hw));
        Ok(())
    }

    /// A follower cuts its log at `offset` (KIP-101: what the leader's log does not have).
    /// Idempotent producer state is rebuilt from what remains, so a producer whose batches were
    /// cut is not answered "duplicate" for them later.
    pub async fn truncate_to(&self, offset: i64) -> crate::error::Result<()> {
        self.log.truncate_to(offset).await?;
        let end = self.log.log_end_offset();
        if self.high_watermark.get() > end {
            self.high_watermark.set(end);
        }
        self.reload_producers().await
    }

    /// A follower whose log ends before the leader's log start begins again at it.
    pub async fn restart_at(&self, offset: i64) -> crate::error::Result<()> {
        self.log.truncate_fully_and_start_at(offset).await?;
        self.high_watermark.set(offset);
        self.reload_producers().await
    }

    /// A follower's high watermark: the leader's, capped at what this replica has.
    pub fn follow_high_watermark(&self, leader_hw: i64) {
        self.advance_high_watermark(leader_hw.min(self.log.log_end_offset()));
    }

    /// A follower moves its log start with its leader's (DeleteRecords on the leader), no
    /// further than its own high watermark (Kafka's `maybeIncrementLogStartOffset` from the
    /// fetcher).
    pub async fn follow_log_start(&self, leader_log_start: i64) -> Result<()> {
        let target = leader_log_start.min(self.high_watermark.get());
        if target > self.log.log_start_offset() {
            self.log.advance_start_to(target).await?;
        }
        Ok(())
    }

    /// DeleteRecords on the leader: the log start moves to `offset` (-1: the high watermark),
    /// which may not pass the high watermark (OFFSET_OUT_OF_RANGE, as Kafka). Returns the low
    /// watermark: this replica's log start after the move.
    pub async fn delete_records_before(&self, offset: i64) -> Result<i64> {
        if !self.leads() {
            return Err(Error::NotLeader(self.log.dir().to_path_buf()));
        }
        let hw = self.high_watermark.get();
        let offset = if offset == -1 { hw } else { offset };
        if offset < 0 || offset > hw {
            return Err(Error::OffsetOutOfRange {
                offset,
                log_start: self.log.log_start_offset(),
                log_end: hw,
            });
        }
        self.log.advance_start_to(offset).await
    }

    /// DeleteRecords' wait (Kafka's `DelayedDeleteRecords`): until every in-sync replica's log
    /// start has reached `offset`, at most `timeout`. Returns the low watermark then, and
    /// whether it got there.
    pub async fn wait_low_watermark(
        &self,
        offset: i64,
        timeout: std::time::Duration,
    ) -> (i64, bool) {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let low = self.low_watermark();
            if low >= offset || std::time::Instant::now() >= deadline || !self.leads() {
                return (low, low >= offset);
            }
            glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    /// The ISR the leader should have now, if it differs from the current one: followers that
    /// have lagged past `lag_ms` leave, followers whose last fetch reached the high watermark
    /// of its moment join. None while an asked change is pending.
    pub fn wanted_isr(&self, lag_ms: i64) -> Option<Vec<i32>> {
        let role = self.role();
        if !role.is_leader() || role.replicas.len() < 2 || self.isr_change_pending() {
            return None;
        }
        let followers = self.replication.followers.borrow();
        let now = now_ms();
        let wanted: Vec<i32> = role
            .replicas
            .iter()
            .copied()
            .filter(|r| {
                if *r == role.node_id {
                    return true;
                }
                let Some(p) = followers.get(r) else {
                    return false;
                };
                if role.isr.contains(r) {
                    now - p.caught_up_ms <= lag_ms
                } else {
                    p.reached_high_watermark
                        && now - p.caught_up_ms <= lag_ms
                        && now - p.last_fetch_ms <= JOIN_FETCHED_WITHIN_MS
                }
            })
            .collect();
        let mut current = role.isr.clone();
        current.sort_unstable();
        let mut sorted = wanted.clone();
        sorted.sort_unstable();
        (sorted != current).then_some(wanted)
    }
}
