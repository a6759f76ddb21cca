//! Replication in ZooKeeper mode, per shard: fetchers for the partitions this shard follows,
//! and ISR upkeep for those it leads.
//!
//! Every `MANAGE_TICK` the shard groups its follower partitions by leader and gives each leader
//! one fetcher task (started, updated or stopped to match). For the partitions it leads with
//! more than one replica it compares the ISR with what the followers' progress says it should
//! be (`Partition::wanted_isr`, by `replica.lag.time.max.ms`) and asks the control thread to
//! change it in ZooKeeper, conditional on the partition's leader and epoch; the new ISR comes
//! back through the metadata.

pub mod calls;
mod fetcher;
mod peer;

use crate::cluster::{IsrChange, Request};
use crate::security::listener::InterBrokerClient;
use crate::shard::Shard;
use fetcher::Fetcher;
use futures::StreamExt;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

const MANAGE_TICK: Duration = Duration::from_millis(100);

pub fn start(shard: &Rc<Shard>) {
    if shard.cluster.is_none() {
        return;
    }
    let config = &shard.config;
    // Checked before the broker started (main), so it builds here too.
    let client = InterBrokerClient::build(config.listeners.inter_broker(), &config.broker.security)
        .expect("the inter-broker listener was checked at start-up");
    let client = Rc::new(client);
    shard
        .services
        .insert(Rc::new(calls::BrokerCalls::new(client.clone())));
    glommio::spawn_local(manage(shard.clone(), client)).detach();
}

async fn manage(shard: Rc<Shard>, client: Rc<InterBrokerClient>) {
    let mut fetchers: HashMap<i32, Rc<Fetcher>> = HashMap::new();
    let mut isr_asked: HashMap<(String, i32), (Vec<i32>, std::time::Instant)> = HashMap::new();
    while !shard.is_shutting_down() {
        let mut wanted: HashMap<i32, Vec<_>> = HashMap::new();
        for p in shard.partitions() {
            let role = p.role();
            if role.leader >= 0 && !role.is_leader() && role.replicas.contains(&role.node_id) {
                wanted.entry(role.leader).or_default().push(p);
            }
        }
        fetchers.retain(|leader, f| {
            let keep = wanted.contains_key(leader);
            if !keep {
                f.stopped.set(true);
            }
            keep
        });
        for (leader, parts) in wanted {
            let f = fetchers.entry(leader).or_insert_with(|| {
                let f = Rc::new(Fetcher::new(leader));
                glommio::spawn_local(fetcher::run(shard.clone(), f.clone(), client.clone()))
                    .detach();
                f
            });
            *f.partitions.borrow_mut() = parts;
        }
        update_isrs(&shard, &mut isr_asked).await;
        glommio::timer::sleep(MANAGE_TICK).await;
    }
    for f in fetchers.values() {
        f.stopped.set(true);
    }
}

/// Asks ZooKeeper for the ISR changes the leader's view of its followers calls for; the same
/// change is not asked again for a second while the metadata catches up. The changes go out
/// together: when a follower stops or returns, every partition it follows changes at once,
/// and one round trip to ZooKeeper each in turn would take seconds per thousand.
async fn update_isrs(
    shard: &Shard,
    asked: &mut HashMap<(String, i32), (Vec<i32>, std::time::Instant)>,
) {
    let Some(zk) = &shard.cluster else { return };
    let lag_ms = shard.config.broker.replica_lag_time_max_ms;
    let mut changes = Vec::new();
    for p in shard.partitions() {
        let Some(isr) = p.wanted_isr(lag_ms) else {
            continue;
        };
        let k = (p.topic().to_string(), p.index());
        if let Some((prev, at)) = asked.get(&k) {
            if *prev == isr && at.elapsed() < Duration::from_secs(1) {
                continue;
            }
        }
        asked.insert(k, (isr.clone(), std::time::Instant::now()));
        // From here until the metadata shows the change, the followers it adds hold the high
        // watermark: the controller may elect them as soon as the write lands.
        p.begin_isr_change(&isr);
        changes.push((p, isr));
    }
    futures::stream::iter(changes)
        .for_each_concurrent(crate::cluster::PARTITION_OPS_IN_FLIGHT, |(p, isr)| async move {
            let (topic, index, epoch) = (p.topic().to_string(), p.index(), p.leader_epoch());
            let result = zk
                .call(|reply| {
                    Request::UpdateIsr(IsrChange {
                        topic: topic.clone(),
                        partition: index,
                        leader_epoch: epoch,
                        isr: isr.clone(),
                        reply,
                    })
                })
                .await;
            match result {
                Some(Ok(partition_epoch)) => {
                    tracing::info!(%topic, partition = index, ?isr, partition_epoch, "ISR changed");
                    p.end_isr_change(Some(partition_epoch));
                }
                Some(Err(e)) => {
                    tracing::warn!(%topic, partition = index, error = %e, "ISR change refused");
                    p.end_isr_change(None);
                }
                None => p.end_isr_change(None),
            }
        })
        .await;
}
