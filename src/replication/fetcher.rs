//! A follower's fetcher: one task per shard and source broker, fetching every partition this
//! shard follows from that leader in one Fetch request (replica id = this broker).
//!
//! Before a partition's first fetch in a leader epoch, the follower asks the leader where its
//! own latest epoch ended (OffsetForLeaderEpoch, KIP-101) and cuts what the leader never had,
//! so a diverged tail is never served. Then it fetches from its log end, appends what comes
//! with the leader's offsets, and takes the leader's high watermark (capped at its own end).

use super::peer::Peer;
use crate::protocol::errors::ErrorCode;
use crate::security::listener::InterBrokerClient;
use crate::shard::Shard;
use ferrite_shards::partition::Partition;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

const FETCH_VERSION: i16 = 12;
const EPOCH_VERSION: i16 = 3;
/// `replica.fetch.wait.max.ms`: how long the leader holds a fetch with nothing new.
const FETCH_WAIT_MS: i32 = 500;
/// `replica.fetch.max.bytes` and the response limit.
const PARTITION_MAX_BYTES: i32 = 1 << 20;
const RESPONSE_MAX_BYTES: i32 = 16 << 20;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
const BACKOFF: Duration = Duration::from_millis(200);

type Key = (Arc<str>, i32);

/// The partitions this shard follows from one leader.
pub struct Fetcher {
    pub leader: i32,
    pub partitions: RefCell<Vec<Rc<Partition>>>,
    pub stopped: Cell<bool>,
    /// The leader epoch each partition was last checked for divergence in.
    checked: RefCell<HashMap<Key, i32>>,
}

impl Fetcher {
    pub fn new(leader: i32) -> Fetcher {
        Fetcher {
            leader,
            partitions: RefCell::new(Vec::new()),
            stopped: Cell::new(false),
            checked: RefCell::new(HashMap::new()),
        }
    }
}

fn key(p: &Partition) -> Key {
    (p.topic().clone(), p.index())
}

/// Request entries grouped by topic, in first-seen order (a request lists each topic once).
fn by_topic<E>(entries: impl IntoIterator<Item = (Arc<str>, E)>) -> Vec<(Arc<str>, Vec<E>)> {
    let mut out: Vec<(Arc<str>, Vec<E>)> = Vec::new();
    let mut place: HashMap<Arc<str>, usize> = HashMap::new();
    for (topic, entry) in entries {
        match place.get(&topic) {
            Some(&i) => out[i].1.push(entry),
            None => {
                place.insert(topic.clone(), out.len());
                out.push((topic, vec![entry]));
            }
        }
    }
    out
}

/// The partitions a request named, found by a response entry's topic name and index in
/// constant time: a response can name every partition this shard follows from the leader, and
/// a search per entry would make each response cost the square of that.
struct ByName<'a>(HashMap<&'a str, HashMap<i32, &'a Rc<Partition>>>);

impl<'a> ByName<'a> {
    fn new(parts: impl IntoIterator<Item = &'a Rc<Partition>>) -> ByName<'a> {
        let mut map: HashMap<&'a str, HashMap<i32, &'a Rc<Partition>>> = HashMap::new();
        for p in parts {
            map.entry(&**p.topic()).or_default().insert(p.index(), p);
        }
        ByName(map)
    }

    fn get(&self, topic: &str, index: i32) -> Option<&'a Rc<Partition>> {
        self.0.get(topic)?.get(&index).copied()
    }
}

fn topic_name(t: &str) -> TopicName {
    TopicName(StrBytes::from_string(t.to_string()))
}

pub async fn run(shard: Rc<Shard>, f: Rc<Fetcher>, client: Rc<InterBrokerClient>) {
    let node = shard.config.node_id;
    let mut peer: Option<Peer> = None;
    while !f.stopped.get() && !shard.is_shutting_down() {
        let parts = f.partitions.borrow().clone();
        let addr = shard
            .metadata()
            .brokers
            .iter()
            .find(|b| b.node_id == f.leader)
            .and_then(|b| b.endpoint(&client.listener))
            .map(|e| (e.host.clone(), e.port));
        let (false, Some(addr)) = (parts.is_empty(), addr) else {
            glommio::timer::sleep(BACKOFF).await;
            continue;
        };
        if peer.is_none() {
            match Peer::connect(&addr, node, &client, CONNECT_TIMEOUT).await {
                Ok(p) => peer = Some(p),
                Err(e) => {
                    tracing::debug!(leader = f.leader, error = %e, "cannot reach the leader");
                    glommio::timer::sleep(BACKOFF).await;
                    continue;
                }
            }
        }
        let conn = peer.as_mut().expect("connected above");
        let round = async {
            truncate_diverged(conn, &f, &parts, node).await?;
            fetch_once(conn, &f, &parts, node).await
        };
        if let Err(e) = round.await {
            tracing::debug!(leader = f.leader, error = %e, "fetch from the leader failed");
            peer = None;
            glommio::timer::sleep(BACKOFF).await;
        }
    }
}

/// KIP-101 for the partitions not yet checked in their current leader epoch.
async fn truncate_diverged(
    conn: &mut Peer,
    f: &Fetcher,
    parts: &[Rc<Partition>],
    node: i32,
) -> std::io::Result<()> {
    let unchecked: Vec<&Rc<Partition>> = parts
        .iter()
        .filter(|p| f.checked.borrow().get(&key(p)) != Some(&p.leader_epoch()))
        .collect();
    if unchecked.is_empty() {
        return Ok(());
    }
    let mut entries = Vec::new();
    let mut asked: HashMap<Key, i32> = HashMap::new();
    for p in &unchecked {
        let Some(latest) = p.log().leader_epochs().last().map(|e| e.epoch) else {
            // Nothing written in any epoch: nothing can have diverged.
            f.checked.borrow_mut().insert(key(p), p.leader_epoch());
            continue;
        };
        asked.insert(key(p), latest);
        let entry = OffsetForLeaderPartition::default()
            .with_partition(p.index())
            .with_current_leader_epoch(p.leader_epoch())
            .with_leader_epoch(latest);
        entries.push((p.topic().clone(), entry));
    }
    let topics: Vec<OffsetForLeaderTopic> = by_topic(entries)
        .into_iter()
        .map(|(t, partitions)| {
            OffsetForLeaderTopic::default()
                .with_topic(topic_name(&t))
                .with_partitions(partitions)
        })
        .collect();
    if topics.is_empty() {
        return Ok(());
    }
    let req = OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(node))
        .with_topics(topics);
    let resp: OffsetForLeaderEpochResponse = conn
        .call(
            ApiKey::OffsetForLeaderEpoch,
            EPOCH_VERSION,
            &req,
            CALL_TIMEOUT,
        )
        .await?;
    let unchecked = ByName::new(unchecked);
    for t in resp.topics {
        for r in t.partitions {
            let Some(p) = unchecked.get(t.topic.0.as_str(), r.partition) else {
                continue;
            };
            if ErrorCode::from_code(r.error_code).is_error() {
                continue; // the leader is not ready for this epoch yet: ask again next round
            }
            let end = p.log().log_end_offset();
            let ours = asked.get(&key(p)).copied().unwrap_or(-1);
            let cut = if r.end_offset < 0 {
                // UNDEFINED: the leader knows nothing of our epochs; keep what was committed.
                p.high_watermark()
            } else if r.leader_epoch < ours {
                // The leader never had our latest epoch: its own last epoch at or below ours
                // ended at `end_offset` there, and ours (for that epoch) may end earlier.
                let own = p
                    .log()
                    .end_offset_for_epoch(r.leader_epoch)
                    .map(|(_, e)| e)
                    .unwrap_or(end);
                r.end_offset.min(own)
            } else {
                r.end_offset
            };
            if cut < end {
                tracing::warn!(topic = %p.topic(), partition = p.index(), from = cut, to = end,
                    leader = f.leader, "follower cuts a diverged tail (KIP-101)");
                if let Err(e) = p.truncate_to(cut).await {
                    tracing::error!(topic = %p.topic(), partition = p.index(), error = %e, "truncation failed");
                    continue;
                }
            }
            f.checked.borrow_mut().insert(key(p), p.leader_epoch());
        }
    }
    Ok(())
}

async fn fetch_once(
    conn: &mut Peer,
    f: &Fetcher,
    parts: &[Rc<Partition>],
    node: i32,
) -> std::io::Result<()> {
    let ready: Vec<&Rc<Partition>> = parts
        .iter()
        .filter(|p| f.checked.borrow().get(&key(p)) == Some(&p.leader_epoch()))
        .collect();
    if ready.is_empty() {
        glommio::timer::sleep(BACKOFF).await;
        return Ok(());
    }
    // What each partition was asked in: an answer that comes after a leadership change is
    // for another term and is dropped.
    let asked_in: HashMap<Key, i32> = ready.iter().map(|p| (key(p), p.leader_epoch())).collect();
    let entries = ready.iter().map(|p| {
        let entry = FetchPartition::default()
            .with_partition(p.index())
            .with_current_leader_epoch(p.leader_epoch())
            .with_fetch_offset(p.log().log_end_offset())
            .with_last_fetched_epoch(-1)
            .with_log_start_offset(p.log().log_start_offset())
            .with_partition_max_bytes(PARTITION_MAX_BYTES);
        (p.topic().clone(), entry)
    });
    let topics: Vec<FetchTopic> = by_topic(entries)
        .into_iter()
        .map(|(t, partitions)| {
            FetchTopic::default()
                .with_topic(topic_name(&t))
                .with_partitions(partitions)
        })
        .collect();
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(node))
        .with_max_wait_ms(FETCH_WAIT_MS)
        .with_min_bytes(1)
        .with_max_bytes(RESPONSE_MAX_BYTES)
        .with_session_epoch(-1)
        .with_topics(topics);
    let resp: FetchResponse = conn
        .call(ApiKey::Fetch, FETCH_VERSION, &req, CALL_TIMEOUT)
        .await?;
    let mut refused = 0;
    let asked = ByName::new(ready.iter().copied());
    for t in resp.responses {
        for d in t.partitions {
            let Some(p) = asked.get(t.topic.0.as_str(), d.partition_index) else {
                continue;
            };
            let same_term = asked_in.get(&key(p)) == Some(&p.leader_epoch())
                && p.leader() == f.leader
                && !f.stopped.get();
            if !same_term {
                continue;
            }
            match ErrorCode::from_code(d.error_code) {
                ErrorCode::NONE => {
                    if let Some(records) = d.records.filter(|r| !r.is_empty()) {
                        if let Err(e) = p.append_from_leader(&records).await {
                            tracing::error!(topic = %p.topic(), partition = p.index(), error = %e,
                                "appending what the leader sent failed");
                            refused += 1;
                            continue;
                        }
                    }
                    p.follow_high_watermark(d.high_watermark);
                    if let Err(e) = p.follow_log_start(d.log_start_offset).await {
                        tracing::error!(topic = %p.topic(), partition = p.index(), error = %e,
                            "following the leader's log start failed");
                    }
                }
                ErrorCode::OFFSET_OUT_OF_RANGE => {
                    let end = p.log().log_end_offset();
                    let result = if end < d.log_start_offset {
                        p.restart_at(d.log_start_offset).await
                    } else {
                        p.truncate_to(d.high_watermark.max(p.log().log_start_offset()))
                            .await
                    };
                    if let Err(e) = result {
                        tracing::error!(topic = %p.topic(), partition = p.index(), error = %e, "resetting the follower failed");
                    }
                }
                // Leadership moved or is moving: the metadata will say where to fetch.
                _ => refused += 1,
            }
        }
    }
    if refused == ready.len() {
        glommio::timer::sleep(BACKOFF).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::by_topic;
    use std::sync::Arc;

    #[test]
    fn entries_are_grouped_by_topic_in_first_seen_order() {
        let t = |name: &str| Arc::<str>::from(name);
        let grouped = by_topic([
            (t("b"), 1),
            (t("a"), 2),
            (t("b"), 3),
            (t("c"), 4),
            (t("a"), 5),
        ]);
        assert_eq!(
            grouped,
            vec![
                (t("b"), vec![1, 3]),
                (t("a"), vec![2, 5]),
                (t("c"), vec![4])
            ]
        );
    }
}
