//! Incremental fetch sessions (KIP-227), kept as Kafka's `FetchSession.scala` keeps them.
//!
//! A Fetch v7+ with epoch 0 (INITIAL) is a full fetch that asks for a session: after its
//! full response the broker remembers every partition and its fetch parameters under a new
//! session id, if a slot is free or one can be evicted. A fetch with that id and the next
//! epoch then names only what changed (new partitions, new fetch offsets, forgotten ones),
//! and its response carries only the partitions with something new: records, another high
//! watermark or log start offset, or an error. Epoch -1 (FINAL) closes a session, and a full
//! fetch naming a session closes it too. An unknown id is FETCH_SESSION_ID_NOT_FOUND, a wrong
//! epoch INVALID_FETCH_SESSION_EPOCH, a session opened with topic ids (v13+) continued by
//! names (or the reverse) FETCH_SESSION_TOPIC_ID_ERROR; the client then starts over with a
//! full fetch.
//!
//! Each shard keeps the sessions of the fetches it serves, as Kafka 3.9 shards its cache
//! (KAFKA-9401): `max.incremental.fetch.session.cache.slots` is shared out among the shards,
//! and a shard's session ids lie in its own range. A client keeps one connection to a broker,
//! so its fetches come to one shard; one that reconnects elsewhere is told its session is not
//! found and opens a new one, as the Java client does after any disconnection anyway.
//! Eviction is Kafka's: a session unused for two minutes first, else the least valuable
//! (fewest partitions, a consumer's before a follower's) if the newcomer is worth more and
//! that session is not new.
//!
//! Lives on: every shard, for the fetches it serves.

use crate::protocol::errors::ErrorCode;
use std::collections::{BTreeMap, HashMap};

pub const INVALID_SESSION_ID: i32 = 0;
pub const INITIAL_EPOCH: i32 = 0;
pub const FINAL_EPOCH: i32 = -1;
/// Kafka's `MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS`: a session this long unused may go
/// for any newcomer; one younger than this is evicted for none.
const EVICTION_MS: i64 = 120_000;

/// A session's partition: by topic id from Fetch v13, by topic name before.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum TopicKey {
    Id([u8; 16]),
    Name(String),
}

pub type PartitionKey = (TopicKey, i32);

/// What a fetch asks of a partition.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FetchParams {
    pub fetch_offset: i64,
    pub max_bytes: u64,
    pub current_leader_epoch: i32,
    /// The fetcher's log start offset (followers), or -1.
    pub log_start_offset: i64,
}

/// What a partition's answer said, to decide whether an incremental response carries it.
#[derive(Copy, Clone, Debug)]
pub struct Answered {
    pub bytes: u64,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub error: bool,
}

struct Cached {
    params: FetchParams,
    /// What the session last told the client (-1: nothing yet, or an error since).
    high_watermark: i64,
    log_start_offset: i64,
    /// The partition's place in the session's order.
    place: u64,
}

struct Session {
    privileged: bool,
    uses_topic_ids: bool,
    /// The epoch the next incremental fetch must carry.
    epoch: i32,
    created_ms: i64,
    last_used_ms: i64,
    partitions: HashMap<PartitionKey, Cached>,
    /// Session order: partitions that returned records move to the end, so each gets its turn
    /// at the front of the response (`IncrementalFetchContext`).
    order: BTreeMap<u64, PartitionKey>,
    next_place: u64,
}

impl Session {
    fn push(&mut self, key: PartitionKey, cached: impl FnOnce(u64) -> Cached) {
        let place = self.next_place;
        self.next_place += 1;
        self.order.insert(place, key.clone());
        self.partitions.insert(key, cached(place));
    }

    fn move_to_end(&mut self, key: &PartitionKey) {
        let place = self.next_place;
        if let Some(c) = self.partitions.get_mut(key) {
            self.order.remove(&c.place);
            c.place = place;
            self.order.insert(place, key.clone());
            self.next_place += 1;
        }
    }

    /// Applies an incremental request: partitions added or updated, then the forgotten ones.
    fn update(&mut self, asked: &[(PartitionKey, FetchParams)], forgotten: &[PartitionKey]) {
        for (key, params) in asked {
            match self.partitions.get_mut(key) {
                Some(c) => c.params = *params,
                None => self.push(key.clone(), |place| Cached {
                    params: *params,
                    high_watermark: -1,
                    log_start_offset: -1,
                    place,
                }),
            }
        }
        for key in forgotten {
            if let Some(c) = self.partitions.remove(key) {
                self.order.remove(&c.place);
            }
        }
    }

    fn in_order(&self) -> Vec<(PartitionKey, FetchParams)> {
        self.order
            .values()
            .map(|k| (k.clone(), self.partitions[k].params))
            .collect()
    }
}

/// How a fetch is served.
#[derive(Debug, PartialEq, Eq)]
pub enum FetchContext {
    /// Every partition of the request, answered in full, without a session (Fetch before v7,
    /// epoch -1, or a session emptied by its last request).
    Sessionless,
    /// Every partition of the request, answered in full; a session is then made of them.
    Full,
    /// The session's partitions, in its order; the response carries only what changed.
    Incremental {
        session_id: i32,
        /// The session's epoch once this fetch is answered.
        epoch: i32,
        partitions: Vec<(PartitionKey, FetchParams)>,
    },
    /// The fetch is answered with this error and nothing else.
    Error(ErrorCode),
}

/// One shard's fetch sessions.
pub struct FetchSessions {
    /// This shard's session ids are `[max(1, shard × range), (shard + 1) × range)`.
    id_range: (i32, i32),
    sessions: HashMap<i32, Session>,
}

/// Kafka's `FetchMetadata.nextEpoch`.
fn next_epoch(epoch: i32) -> i32 {
    match epoch {
        e if e < 0 => FINAL_EPOCH,
        i32::MAX => 1,
        e => e + 1,
    }
}

/// The share of `slots` that shard `shard` of `shards` holds: the remainder goes to the first
/// shards, so the shares add up to the setting.
pub fn slots_of_shard(slots: usize, shard: usize, shards: usize) -> usize {
    let shards = shards.max(1);
    slots / shards + usize::from(shard < slots % shards)
}

impl FetchSessions {
    pub fn new(shard: usize, shards: usize) -> FetchSessions {
        let range = i32::MAX / shards.max(1) as i32;
        let low = (shard as i32 * range).max(1);
        FetchSessions {
            id_range: (low, low.max(shard as i32 * range + range)),
            sessions: HashMap::new(),
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.sessions.len()
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Kafka's `FetchManager.newContext` for a Fetch v7+ (`uses_topic_ids`: v13+).
    pub fn new_context(
        &mut self,
        session_id: i32,
        epoch: i32,
        uses_topic_ids: bool,
        asked: &[(PartitionKey, FetchParams)],
        forgotten: &[PartitionKey],
        now_ms: i64,
    ) -> FetchContext {
        if epoch == INITIAL_EPOCH || epoch == FINAL_EPOCH {
            if session_id != INVALID_SESSION_ID {
                self.sessions.remove(&session_id);
            }
            return if epoch == FINAL_EPOCH {
                FetchContext::Sessionless
            } else {
                FetchContext::Full
            };
        }
        let Some(session) = self.sessions.get_mut(&session_id) else {
            return FetchContext::Error(ErrorCode::FETCH_SESSION_ID_NOT_FOUND);
        };
        if session.epoch != epoch {
            return FetchContext::Error(ErrorCode::INVALID_FETCH_SESSION_EPOCH);
        }
        if session.uses_topic_ids != uses_topic_ids {
            return FetchContext::Error(ErrorCode::FETCH_SESSION_TOPIC_ID_ERROR);
        }
        session.update(asked, forgotten);
        if session.partitions.is_empty() {
            self.sessions.remove(&session_id);
            return FetchContext::Sessionless;
        }
        session.last_used_ms = now_ms;
        session.epoch = next_epoch(session.epoch);
        FetchContext::Incremental {
            session_id,
            epoch: session.epoch,
            partitions: session.in_order(),
        }
    }

    /// After a full fetch's response: a new session of its partitions, with what the response
    /// told of each, if one of this shard's `slots` is free or can be freed; its id, else
    /// INVALID_SESSION_ID (the client goes on with full fetches).
    pub fn maybe_create(
        &mut self,
        slots: usize,
        privileged: bool,
        uses_topic_ids: bool,
        partitions: Vec<(PartitionKey, FetchParams, Answered)>,
        now_ms: i64,
    ) -> i32 {
        if self.sessions.len() >= slots && !self.try_evict(privileged, partitions.len(), now_ms) {
            return INVALID_SESSION_ID;
        }
        let id = self.new_id();
        let mut session = Session {
            privileged,
            uses_topic_ids,
            epoch: next_epoch(INITIAL_EPOCH),
            created_ms: now_ms,
            last_used_ms: now_ms,
            partitions: HashMap::with_capacity(partitions.len()),
            order: BTreeMap::new(),
            next_place: 0,
        };
        for (key, params, answered) in partitions {
            session.push(key, |place| Cached {
                params,
                high_watermark: if answered.error {
                    -1
                } else {
                    answered.high_watermark
                },
                log_start_offset: answered.log_start_offset,
                place,
            });
        }
        self.sessions.insert(id, session);
        id
    }

    /// Which partitions of an incremental fetch's answer go in its response (Kafka's
    /// `CachedPartition.maybeUpdateResponseData`), remembering what they tell; partitions that
    /// returned records move to the end of the session's order. `None` when the session was
    /// closed or moved on while the fetch waited (a duplicate request): the fetch is then
    /// answered INVALID_FETCH_SESSION_EPOCH.
    pub fn select(
        &mut self,
        session_id: i32,
        epoch: i32,
        answers: &[(PartitionKey, Answered)],
    ) -> Option<Vec<bool>> {
        let session = self
            .sessions
            .get_mut(&session_id)
            .filter(|s| s.epoch == epoch)?;
        let mut included = Vec::with_capacity(answers.len());
        for (key, a) in answers {
            let Some(c) = session.partitions.get_mut(key) else {
                // Forgotten by a later request meanwhile: nothing to tell.
                included.push(false);
                continue;
            };
            let mut respond = a.bytes > 0 || a.error;
            if a.error {
                // Told again once the error is gone.
                c.high_watermark = -1;
            } else if c.high_watermark != a.high_watermark {
                c.high_watermark = a.high_watermark;
                respond = true;
            }
            if c.log_start_offset != a.log_start_offset {
                c.log_start_offset = a.log_start_offset;
                respond = true;
            }
            if a.bytes > 0 {
                session.move_to_end(key);
            }
            included.push(respond);
        }
        Some(included)
    }

    /// Whether `session_id` is at `epoch` (a throttled incremental fetch checks before its
    /// empty answer, as Kafka's `getThrottledResponse`).
    pub fn is_at(&self, session_id: i32, epoch: i32) -> bool {
        self.sessions
            .get(&session_id)
            .is_some_and(|s| s.epoch == epoch)
    }

    fn new_id(&self) -> i32 {
        let (low, high) = self.id_range;
        loop {
            let bytes = crate::security::scram::random_bytes(4);
            let raw = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
            let id = low + (raw % (high - low).max(1) as u32) as i32;
            if id != INVALID_SESSION_ID && !self.sessions.contains_key(&id) {
                return id;
            }
        }
    }

    /// Kafka's `FetchSessionCacheShard.tryEvict`: a stale session if there is one, else the
    /// least valuable evictable session if the newcomer (`privileged`, `size` partitions) is
    /// worth at least as much.
    fn try_evict(&mut self, privileged: bool, size: usize, now_ms: i64) -> bool {
        let Some((&stale, last_used)) = self
            .sessions
            .iter()
            .map(|(id, s)| (id, s.last_used_ms))
            .min_by_key(|&(id, used)| (used, *id))
        else {
            return false;
        };
        if now_ms - last_used > EVICTION_MS {
            self.sessions.remove(&stale);
            return true;
        }
        let old = |s: &Session| now_ms - s.created_ms > EVICTION_MS;
        let least = self
            .sessions
            .iter()
            .filter(|(_, s)| old(s) || (privileged && !s.privileged))
            .map(|(&id, s)| ((s.privileged, s.partitions.len(), id), id))
            .min();
        match least {
            Some((key, id)) if (privileged, size, 0) >= key => {
                self.sessions.remove(&id);
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(p: i32) -> PartitionKey {
        (TopicKey::Name("t".into()), p)
    }

    fn params(offset: i64) -> FetchParams {
        FetchParams {
            fetch_offset: offset,
            max_bytes: 1 << 20,
            current_leader_epoch: -1,
            log_start_offset: -1,
        }
    }

    fn answer(bytes: u64, hw: i64) -> Answered {
        Answered {
            bytes,
            high_watermark: hw,
            log_start_offset: 0,
            error: false,
        }
    }

    fn open(cache: &mut FetchSessions, partitions: &[i32]) -> i32 {
        let parts = partitions
            .iter()
            .map(|&p| (key(p), params(0), answer(0, 10)))
            .collect();
        cache.maybe_create(10, false, false, parts, 0)
    }

    #[test]
    fn a_session_answers_what_changed_and_moves_partitions_with_records_to_the_end() {
        let mut cache = FetchSessions::new(0, 1);
        let id = open(&mut cache, &[0, 1, 2]);
        assert_ne!(id, INVALID_SESSION_ID);
        let FetchContext::Incremental {
            epoch, partitions, ..
        } = cache.new_context(id, 1, false, &[(key(1), params(5))], &[], 1)
        else {
            panic!("incremental");
        };
        assert_eq!(epoch, 2);
        assert_eq!(partitions[1], (key(1), params(5)), "the new fetch offset");
        let answers = [
            (key(0), answer(0, 10)),
            (key(1), answer(100, 12)),
            (key(2), answer(0, 11)),
        ];
        assert_eq!(
            cache.select(id, 2, &answers),
            Some(vec![false, true, true]),
            "unchanged partition 0 is left out; new records and a new high watermark go in"
        );
        let FetchContext::Incremental { partitions, .. } =
            cache.new_context(id, 2, false, &[], &[key(2)], 2)
        else {
            panic!("incremental");
        };
        let order: Vec<i32> = partitions.iter().map(|(k, _)| k.1).collect();
        assert_eq!(
            order,
            [0, 1],
            "2 forgotten; 1 moved behind 0 after its records"
        );
    }

    #[test]
    fn session_errors_and_closing_are_kafkas() {
        let mut cache = FetchSessions::new(1, 2);
        let id = open(&mut cache, &[0]);
        assert!(id >= i32::MAX / 2, "shard 1's ids are in its range: {id}");
        assert_eq!(
            cache.new_context(id + 1, 1, false, &[], &[], 0),
            FetchContext::Error(ErrorCode::FETCH_SESSION_ID_NOT_FOUND)
        );
        assert_eq!(
            cache.new_context(id, 5, false, &[], &[], 0),
            FetchContext::Error(ErrorCode::INVALID_FETCH_SESSION_EPOCH)
        );
        assert_eq!(
            cache.new_context(id, 1, true, &[], &[], 0),
            FetchContext::Error(ErrorCode::FETCH_SESSION_TOPIC_ID_ERROR)
        );
        assert_eq!(
            cache.new_context(id, FINAL_EPOCH, false, &[], &[], 0),
            FetchContext::Sessionless
        );
        assert!(cache.is_empty(), "epoch -1 closes the session");
        let id = open(&mut cache, &[0]);
        assert_eq!(
            cache.new_context(id, 1, false, &[], &[key(0)], 0),
            FetchContext::Sessionless,
            "forgetting every partition closes the session"
        );
        assert!(cache.is_empty());
        let id = open(&mut cache, &[0]);
        assert_eq!(
            cache.new_context(id, INITIAL_EPOCH, false, &[], &[], 0),
            FetchContext::Full
        );
        assert!(cache.is_empty(), "a full fetch closes the session it names");
    }

    #[test]
    fn a_full_cache_evicts_a_stale_or_smaller_old_session_only() {
        let mut cache = FetchSessions::new(0, 1);
        let small = |n: usize| {
            (0..n as i32)
                .map(|p| (key(p), params(0), answer(0, 1)))
                .collect::<Vec<_>>()
        };
        let first = cache.maybe_create(1, false, false, small(2), 0);
        assert_ne!(first, INVALID_SESSION_ID);
        assert_eq!(
            cache.maybe_create(1, false, false, small(5), 1_000),
            INVALID_SESSION_ID,
            "a young session is not evicted"
        );
        let FetchContext::Incremental { .. } = cache.new_context(first, 1, false, &[], &[], 60_000)
        else {
            panic!("incremental");
        };
        assert_eq!(
            cache.maybe_create(1, false, false, small(1), 130_000),
            INVALID_SESSION_ID,
            "old but used recently, and worth more than the newcomer"
        );
        let bigger = cache.maybe_create(1, false, false, small(5), 130_000);
        assert_ne!(
            bigger, INVALID_SESSION_ID,
            "old, and worth less than the newcomer"
        );
        let stale = cache.maybe_create(1, false, false, small(1), 260_001);
        assert_ne!(stale, INVALID_SESSION_ID, "unused for two minutes: stale");
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn slots_are_shared_out_to_the_setting() {
        let shares: Vec<usize> = (0..3).map(|s| slots_of_shard(1000, s, 3)).collect();
        assert_eq!(shares, [334, 333, 333]);
        assert_eq!(slots_of_shard(1, 1, 2), 0);
    }
}
