//! What the elected controller does, on its control thread, after each change it reads.
//!
//! - Deletions asked for under `/admin/delete_topics` are carried out.
//! - A new partition gets its first state: the first live replica leads, the live replicas
//!   are the ISR.
//! - A partition whose leader is not alive gets a new leader from its ISR (first in replica
//!   order) and a new leader epoch; with no live ISR member it goes offline (leader -1), keeping
//!   its ISR so the last leader can take it back — unless the topic sets
//!   `unclean.leader.election.enable`, when a live out-of-sync replica takes over and what only
//!   the old ISR had is lost. Dead followers leave the ISR.
//!
//! - Elections asked for with ElectLeaders (`/admin/preferred_replica_election`, and
//!   `/admin/unclean_leader_election` for UNCLEAN) are carried out for the partitions named,
//!   whatever the automatic settings, and the znode is removed.
//!
//! - With `auto.leader.rebalance.enable`, every `leader.imbalance.check.interval.seconds` a
//!   partition led by another broker than its preferred one (the first replica) moves back to
//!   it when that replica is alive and in the ISR, which spreads leaders again after failovers.
//!
//! - A partition being reassigned (its topic znode lists `adding_replicas` and
//!   `removing_replicas`, Kafka's KIP-455 layout) has, meanwhile, the target replicas and the
//!   leaving ones as replicas: the new ones open it and follow the leader until they join the
//!   ISR. Once every target replica is in the ISR, leadership moves to one of them if the
//!   leader is leaving (a new leader epoch), then the topic znode is rewritten with the target
//!   alone; a leader or ISR member that is no longer a replica then leaves the ISR like a dead
//!   one, and the brokers that left delete their copy. A cancel (the replicas put back) ends
//!   the same way.
//!
//! Every state change is a conditional set on the version read; a conflict means someone else
//! moved first, and the next pass reads again.

use super::view::ZkTree;
use super::zk::{create_if_missing, delete_if_present, persistent, PARTITION_OPS_IN_FLIGHT};
use super::znodes::{self, PartitionState};
use futures::StreamExt;
use zookeeper_client::{Client, Error};

/// What one pass changed.
#[derive(Debug, Default)]
pub struct Changes {
    pub states_written: usize,
    pub topics_deleted: usize,
}

/// One pass; `restore_preferred` also moves leadership back to preferred replicas.
pub async fn run(
    client: &Client,
    tree: &ZkTree,
    controller_epoch: i32,
    restore_preferred: bool,
) -> Result<Changes, Error> {
    let mut changes = Changes::default();
    for name in &tree.pending_deletions {
        delete_topic(client, tree, name).await?;
        changes.topics_deleted += 1;
        tracing::info!(topic = %name, "controller deleted topic");
    }
    let live = |b: &i32| tree.brokers.contains_key(b);
    if !tree.reassign_requests.is_empty() {
        start_asked_reassignments(client, tree).await?;
        // The topic znodes changed: the next pass reads them again.
        return Ok(changes);
    }
    // Every state to write is decided first, then written with many writes in flight: after a
    // broker dies the controller changes the state of every partition it led or followed, one
    // round trip each.
    let mut writes = Vec::new();
    let mut completions = Vec::new();
    for (name, topic) in &tree.topics {
        if tree.pending_deletions.contains(name) {
            continue;
        }
        let unclean_by_config = topic
            .configs
            .get("unclean.leader.election.enable")
            .is_some_and(|v| v == "true");
        let mut reassigned = Vec::new();
        for (&p, zp) in &topic.partitions {
            let asked = |list: &[znodes::ElectionPartition]| {
                list.iter().any(|e| e.topic == *name && e.partition == p)
            };
            let unclean = unclean_by_config || asked(&tree.unclean_elections);
            let restore_preferred = restore_preferred || asked(&tree.preferred_elections);
            let write = match &zp.state {
                None => {
                    let isr: Vec<i32> = zp.replicas.iter().copied().filter(live).collect();
                    let leader = isr.first().copied().unwrap_or(-1);
                    let state = PartitionState::new(controller_epoch, leader, 0, isr);
                    StateWrite::First { state }
                }
                Some((state, version)) => {
                    let step = topic
                        .reassignments
                        .get(&p)
                        .map(|r| reassignment_step(state, &zp.replicas, r, controller_epoch, live));
                    let leader_move = match step {
                        Some(ReassignmentStep::Complete) => {
                            reassigned.push(p);
                            None
                        }
                        Some(ReassignmentStep::MoveLeader(s)) => Some(s),
                        Some(ReassignmentStep::Wait) | None => None,
                    };
                    let next = leader_move
                        .or_else(|| next_state(state, &zp.replicas, controller_epoch, live))
                        .or_else(|| {
                            unclean
                                .then(|| unclean_state(state, &zp.replicas, controller_epoch, live))
                                .flatten()
                        })
                        .or_else(|| {
                            restore_preferred
                                .then(|| {
                                    preferred_state(state, &zp.replicas, controller_epoch, live)
                                })
                                .flatten()
                        });
                    let Some(state) = next else {
                        continue;
                    };
                    StateWrite::Next {
                        state,
                        version: *version,
                    }
                }
            };
            writes.push((name.as_str(), p, write));
        }
        if let (false, Some((assignment, version))) = (reassigned.is_empty(), &topic.assignment) {
            let mut done = assignment.clone();
            for &p in &reassigned {
                done.complete_reassignment(p);
            }
            completions.push((name, reassigned, done, *version));
        }
    }
    let mut written = futures::stream::iter(writes)
        .map(|(name, p, write)| write_state(client, name, p, write))
        .buffer_unordered(PARTITION_OPS_IN_FLIGHT);
    while let Some(result) = written.next().await {
        if result? {
            changes.states_written += 1;
        }
    }
    drop(written);
    // A topic's reassignments complete after its partitions' states are written, as before.
    for (name, reassigned, done, version) in completions {
        match client
            .set_data(
                &znodes::topic_path(name),
                &znodes::encode(&done),
                Some(version),
            )
            .await
        {
            Ok(_) => {
                tracing::info!(topic = %name, partitions = ?reassigned, "controller completed reassignments")
            }
            Err(Error::BadVersion) | Err(Error::NoNode) => {}
            Err(e) => return Err(e),
        }
    }
    for (path, asked) in [
        (znodes::PREFERRED_ELECTION, &tree.preferred_elections),
        (znodes::UNCLEAN_ELECTION, &tree.unclean_elections),
    ] {
        if !asked.is_empty() {
            delete_if_present(client, path).await?;
            tracing::info!(
                partitions = asked.len(),
                path,
                "controller carried out the elections asked for"
            );
        }
    }
    Ok(changes)
}

/// A partition state the controller writes.
enum StateWrite {
    /// A new partition's first state (created, with its parents).
    First { state: PartitionState },
    /// A change, conditional on the version read.
    Next { state: PartitionState, version: i32 },
}

/// Writes one partition state; false when someone else moved first (the next pass reads
/// again) or the state was already there.
async fn write_state(
    client: &Client,
    name: &str,
    p: i32,
    write: StateWrite,
) -> Result<bool, Error> {
    let path = znodes::partition_state_path(name, p);
    match write {
        StateWrite::First { state } => {
            create_parents(client, name, p).await?;
            match client
                .create(&path, &znodes::encode(&state), &persistent())
                .await
            {
                Ok(_) => Ok(true),
                Err(Error::NodeExists) => Ok(false),
                Err(e) => Err(e),
            }
        }
        StateWrite::Next { state, version } => {
            match client
                .set_data(&path, &znodes::encode(&state), Some(version))
                .await
            {
                Ok(_) => {
                    tracing::info!(topic = %name, partition = p, leader = state.leader,
                        leader_epoch = state.leader_epoch, isr = ?state.isr, "controller changed partition state");
                    Ok(true)
                }
                Err(Error::BadVersion) | Err(Error::NoNode) => Ok(false),
                Err(e) => Err(e),
            }
        }
    }
}

/// The state a partition should move to, if any.
fn next_state(
    state: &PartitionState,
    replicas: &[i32],
    controller_epoch: i32,
    live: impl Fn(&i32) -> bool,
) -> Option<PartitionState> {
    let live_isr: Vec<i32> = replicas
        .iter()
        .copied()
        .filter(|r| state.isr.contains(r) && live(r))
        .collect();
    // A leader that is no longer a replica (a reassignment moved it away) is replaced as a
    // dead one is.
    if state.leader >= 0 && live(&state.leader) && replicas.contains(&state.leader) {
        // Only followers went: they leave the ISR (the leader stays in it).
        if live_isr.len() == state.isr.len() {
            return None;
        }
        let mut isr = live_isr;
        if !isr.contains(&state.leader) {
            isr.insert(0, state.leader);
        }
        return Some(PartitionState {
            isr,
            controller_epoch,
            ..state.clone()
        });
    }
    match live_isr.first() {
        Some(&leader) => Some(PartitionState::new(
            controller_epoch,
            leader,
            state.leader_epoch + 1,
            live_isr,
        )),
        // Offline: nobody in the ISR is alive. It keeps its ISR until a member returns.
        None if state.leader != -1 => Some(PartitionState::new(
            controller_epoch,
            -1,
            state.leader_epoch + 1,
            state.isr.clone(),
        )),
        None => None,
    }
}

/// Reassignments asked through `/admin/reassign_partitions` (Kafka's tools before KIP-455)
/// start as AlterPartitionReassignments starts them, in the topic znodes; the znode is then
/// removed. (Kafka keeps it until each partition completes; here ListPartitionReassignments
/// shows them from the start.) A partition that does not exist, or a target naming a broker
/// that is not alive, is skipped with a warning, as Kafka's controller drops it.
async fn start_asked_reassignments(client: &Client, tree: &ZkTree) -> Result<(), Error> {
    let mut by_topic: std::collections::BTreeMap<&str, super::requests::ReassignTargets> =
        std::collections::BTreeMap::new();
    for asked in &tree.reassign_requests {
        let exists = tree
            .topics
            .get(&asked.topic)
            .is_some_and(|t| t.partitions.contains_key(&asked.partition));
        let alive = asked.replicas.iter().all(|b| tree.brokers.contains_key(b));
        if !exists || !alive || asked.replicas.is_empty() {
            tracing::warn!(topic = %asked.topic, partition = asked.partition, replicas = ?asked.replicas,
                exists, alive, "skipping a reassignment asked in /admin/reassign_partitions");
            continue;
        }
        by_topic
            .entry(&asked.topic)
            .or_default()
            .push((asked.partition, Some(asked.replicas.clone())));
    }
    for (topic, partitions) in by_topic {
        match super::requests::reassign(client, topic, &partitions).await {
            Ok(_) => tracing::info!(
                topic,
                partitions = partitions.len(),
                "controller started reassignments asked in ZooKeeper"
            ),
            Err(e) => {
                tracing::warn!(topic, error = %e, "starting reassignments asked in ZooKeeper")
            }
        }
    }
    delete_if_present(client, znodes::REASSIGN_PARTITIONS).await
}

/// Where a reassignment stands (Kafka's `isReassignmentComplete` and
/// `moveReassignedPartitionLeaderIfRequired`).
#[derive(Debug, PartialEq)]
enum ReassignmentStep {
    /// A target replica is not in the ISR yet.
    Wait,
    /// Every target replica is in sync but the leader is leaving (or dead): this state
    /// gives the leadership to the first live target replica in the ISR.
    MoveLeader(PartitionState),
    /// Every target replica is in sync and one of them leads: the replica list can shrink.
    Complete,
}

fn reassignment_step(
    state: &PartitionState,
    replicas: &[i32],
    reassignment: &crate::metadata::Reassignment,
    controller_epoch: i32,
    live: impl Fn(&i32) -> bool,
) -> ReassignmentStep {
    let target: Vec<i32> = replicas
        .iter()
        .copied()
        .filter(|r| !reassignment.removing.contains(r))
        .collect();
    if !target.iter().all(|r| state.isr.contains(r)) {
        return ReassignmentStep::Wait;
    }
    if target.contains(&state.leader) && live(&state.leader) {
        return ReassignmentStep::Complete;
    }
    match target.iter().find(|r| live(r)) {
        Some(&leader) => ReassignmentStep::MoveLeader(PartitionState::new(
            controller_epoch,
            leader,
            state.leader_epoch + 1,
            state.isr.clone(),
        )),
        None => ReassignmentStep::Wait,
    }
}

/// An offline partition whose topic allows unclean election: the first live replica leads,
/// alone in the ISR.
fn unclean_state(
    state: &PartitionState,
    replicas: &[i32],
    controller_epoch: i32,
    live: impl Fn(&i32) -> bool,
) -> Option<PartitionState> {
    if state.leader >= 0 {
        return None;
    }
    let &leader = replicas.iter().find(|r| live(r))?;
    tracing::warn!(leader, isr = ?state.isr, "unclean leader election: records only the old ISR had are lost");
    Some(PartitionState::new(
        controller_epoch,
        leader,
        state.leader_epoch + 1,
        vec![leader],
    ))
}

/// Leadership back to the preferred replica, if it is alive and in sync and does not lead.
fn preferred_state(
    state: &PartitionState,
    replicas: &[i32],
    controller_epoch: i32,
    live: impl Fn(&i32) -> bool,
) -> Option<PartitionState> {
    let &preferred = replicas.first()?;
    (state.leader != preferred && live(&preferred) && state.isr.contains(&preferred)).then(|| {
        PartitionState::new(
            controller_epoch,
            preferred,
            state.leader_epoch + 1,
            state.isr.clone(),
        )
    })
}

async fn create_parents(client: &Client, topic: &str, p: i32) -> Result<(), Error> {
    create_if_missing(client, &znodes::partitions_path(topic), b"").await?;
    create_if_missing(client, &znodes::partition_path(topic, p), b"").await
}

async fn delete_topic(client: &Client, tree: &ZkTree, name: &str) -> Result<(), Error> {
    if let Some(topic) = tree.topics.get(name) {
        for &p in topic.partitions.keys() {
            delete_if_present(client, &znodes::partition_state_path(name, p)).await?;
            delete_if_present(client, &znodes::partition_path(name, p)).await?;
        }
    }
    delete_if_present(client, &znodes::partitions_path(name)).await?;
    delete_if_present(client, &znodes::topic_path(name)).await?;
    delete_if_present(client, &znodes::topic_config_path(name)).await?;
    delete_if_present(client, &znodes::delete_topic_path(name)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(leader: i32, epoch: i32, isr: &[i32]) -> PartitionState {
        PartitionState::new(1, leader, epoch, isr.to_vec())
    }

    #[test]
    fn a_dead_leader_is_replaced_from_the_isr_in_replica_order() {
        let live = |b: &i32| *b != 1;
        let next = next_state(&state(1, 4, &[1, 3, 2]), &[1, 2, 3], 2, live).unwrap();
        assert_eq!(
            (next.leader, next.leader_epoch, next.isr.clone()),
            (2, 5, vec![2, 3])
        );
        assert_eq!(next.controller_epoch, 2);
    }

    #[test]
    fn no_live_isr_member_means_offline_not_unclean() {
        let live = |b: &i32| *b == 3;
        let next = next_state(&state(1, 4, &[1, 2]), &[1, 2, 3], 2, live).unwrap();
        assert_eq!((next.leader, next.isr.clone()), (-1, vec![1, 2]));
        assert!(
            next_state(&next, &[1, 2, 3], 2, live).is_none(),
            "stays offline"
        );
        let back = next_state(&next, &[1, 2, 3], 2, |b: &i32| *b == 2).unwrap();
        assert_eq!((back.leader, back.leader_epoch), (2, 6));
    }

    #[test]
    fn unclean_election_only_for_offline_partitions() {
        let live = |b: &i32| *b == 3;
        let offline = state(-1, 5, &[1, 2]);
        let next = unclean_state(&offline, &[1, 2, 3], 2, live).unwrap();
        assert_eq!((next.leader, next.leader_epoch, next.isr), (3, 6, vec![3]));
        assert!(unclean_state(&state(1, 5, &[1]), &[1, 2, 3], 2, live).is_none());
        assert!(
            unclean_state(&offline, &[1, 2], 2, live).is_none(),
            "no live replica"
        );
    }

    #[test]
    fn leadership_goes_back_to_an_in_sync_preferred_replica() {
        let all = |_: &i32| true;
        let moved = preferred_state(&state(2, 5, &[2, 3, 1]), &[1, 2, 3], 3, all).unwrap();
        assert_eq!((moved.leader, moved.leader_epoch), (1, 6));
        assert!(
            preferred_state(&state(2, 5, &[2, 3]), &[1, 2, 3], 3, all).is_none(),
            "not in sync"
        );
        assert!(
            preferred_state(&state(1, 5, &[1, 2]), &[1, 2, 3], 3, all).is_none(),
            "already leads"
        );
    }

    #[test]
    fn a_reassignment_waits_for_the_target_then_moves_the_leader_then_completes() {
        use crate::metadata::Reassignment;
        let live = |_: &i32| true;
        // {1,2} -> {2,3}: replicas meanwhile [2,3,1], adding 3, removing 1; 1 leads.
        let moving = Reassignment {
            adding: vec![3],
            removing: vec![1],
        };
        let replicas = [2, 3, 1];
        let step = |s: &PartitionState| reassignment_step(s, &replicas, &moving, 2, live);
        assert_eq!(step(&state(1, 4, &[1, 2])), ReassignmentStep::Wait);
        let ReassignmentStep::MoveLeader(moved) = step(&state(1, 4, &[1, 2, 3])) else {
            panic!("the leader is leaving: it moves first");
        };
        assert_eq!((moved.leader, moved.leader_epoch), (2, 5));
        assert_eq!(step(&moved), ReassignmentStep::Complete);
        // Then the replicas are [2,3]: 1 leaves the ISR as a dead follower would.
        let trimmed = next_state(&moved, &[2, 3], 2, live).unwrap();
        assert_eq!((trimmed.leader, trimmed.isr.clone()), (2, vec![2, 3]));
        // A leader that is not a replica any more is replaced from the ISR.
        let replaced = next_state(&state(1, 4, &[1, 2, 3]), &[2, 3], 2, live).unwrap();
        assert_eq!((replaced.leader, replaced.leader_epoch), (2, 5));
    }

    #[test]
    fn dead_followers_leave_the_isr() {
        let live = |b: &i32| *b != 3;
        let next = next_state(&state(1, 4, &[1, 2, 3]), &[1, 2, 3], 1, live).unwrap();
        assert_eq!(
            (next.leader, next.leader_epoch, next.isr),
            (1, 4, vec![1, 2])
        );
        assert!(next_state(&state(1, 4, &[1, 2]), &[1, 2, 3], 1, live).is_none());
    }
}
