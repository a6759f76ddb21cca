//! A producer's connections: one pipe per partition leader, and batches queued per leader until
//! its window has room, then gathered into produce requests no bigger than `max.request.size`
//! (one batch per partition each), as Kafka's sender drains its accumulator; batches answered
//! with a retriable error go again to their partition's leader, asked for again first when it
//! moved (as Kafka's producer does).

use crate::buffer::Buffer;
use crate::client::{topic_layout, TopicLayout};
use crate::pipe::{held_bytes, Pipe, Retries, SentPart, DRAIN_TIMEOUT};
use crate::stats::Stats;
use anyhow::Result;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct Sender {
    topic: String,
    acks: i16,
    max_request_bytes: usize,
    /// Every request carries it: a transactional producer's batches are all transactional.
    transactional_id: Option<String>,
    /// Asked for the topic's leaders when one moved.
    bootstrap: String,
    layout: TopicLayout,
    pipes: HashMap<String, Pipe>,
    /// Per leader, batches ready and waiting for a window slot, in the order they were made.
    queued: HashMap<String, VecDeque<SentPart>>,
    retries: Arc<Retries>,
    buffer: Arc<Buffer>,
    stats: Arc<Stats>,
}

impl Sender {
    /// Connects to every leader of `layout`.
    pub fn open(
        topic: &str,
        acks: i16,
        max_request_bytes: usize,
        transactional_id: Option<String>,
        layout: TopicLayout,
        buffer: Arc<Buffer>,
        stats: Arc<Stats>,
    ) -> Result<Sender> {
        let bootstrap = layout.leaders.values().next().expect("a leader").clone();
        let mut sender = Sender {
            topic: topic.to_string(),
            acks,
            max_request_bytes,
            transactional_id,
            bootstrap,
            layout,
            pipes: HashMap::new(),
            queued: HashMap::new(),
            retries: Arc::default(),
            buffer,
            stats,
        };
        let leaders: Vec<String> = sender.layout.leaders.values().cloned().collect();
        for leader in leaders {
            sender.pipe(&leader)?;
        }
        Ok(sender)
    }

    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    fn pipe(&mut self, leader: &str) -> Result<&mut Pipe> {
        if !self.pipes.contains_key(leader) {
            let pipe = Pipe::open(
                leader,
                self.stats.clone(),
                self.acks,
                self.retries.clone(),
                self.buffer.clone(),
            )?;
            self.pipes.insert(leader.to_string(), pipe);
        }
        Ok(self.pipes.get_mut(leader).expect("just opened"))
    }

    /// Takes new batches into the producer's buffer, queues them for their leaders and sends
    /// what the windows take now.
    pub fn send(&mut self, parts: Vec<SentPart>) -> Result<()> {
        self.buffer.hold(held_bytes(&parts));
        self.enqueue(parts);
        self.pump(false)
    }

    fn enqueue(&mut self, parts: Vec<SentPart>) {
        for part in parts {
            let leader = self.layout.leaders[&part.partition].clone();
            self.queued.entry(leader).or_default().push_back(part);
        }
    }

    /// Whether batches wait for a window slot.
    pub fn has_queued(&self) -> bool {
        self.queued.values().any(|q| !q.is_empty())
    }

    /// Sends queued batches, a request per free window slot, each gathering what is queued
    /// for its leader; with `wait`, waits for slots until every queue is empty.
    pub fn pump(&mut self, wait: bool) -> Result<()> {
        let leaders: Vec<String> = self
            .queued
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(leader, _)| leader.clone())
            .collect();
        for leader in leaders {
            // Waiting happens in `Pipe::send` (for the oldest answer), so only a pump that
            // must not wait stops at a full window.
            while !self.queued[&leader].is_empty() && (wait || self.pipe(&leader)?.has_room()) {
                let queue = self.queued.get_mut(&leader).expect("queued leader");
                let request = take_request(queue, self.max_request_bytes);
                self.send_request(&leader, request)?;
            }
        }
        Ok(())
    }

    fn send_request(&mut self, leader: &str, mut parts: Vec<SentPart>) -> Result<()> {
        let data = parts
            .iter_mut()
            .map(|part| {
                part.attempts += 1;
                PartitionProduceData::default()
                    .with_index(part.partition)
                    .with_records(Some(part.batch.clone()))
            })
            .collect();
        let request = ProduceRequest::default()
            .with_transactional_id(
                self.transactional_id
                    .as_ref()
                    .map(|t| TransactionalId(StrBytes::from_string(t.clone()))),
            )
            .with_acks(self.acks)
            .with_timeout_ms(30_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(self.topic.clone())))
                .with_partition_data(data)]);
        let stats = self.stats.clone();
        self.pipe(leader)?.send(&request, parts, &stats)
    }

    /// Sends again the batches whose retry backoff has passed, to their leaders (asked for
    /// again first when an answer said the leader moved).
    pub fn resend_due(&mut self) -> Result<()> {
        let (parts, leader_moved) = self.retries.take_due();
        if parts.is_empty() {
            return Ok(());
        }
        if leader_moved {
            self.layout = topic_layout(&self.bootstrap, &self.topic)?;
            // Queued batches follow their partitions to the new leaders.
            let queued: Vec<SentPart> = self.queued.drain().flat_map(|(_, q)| q).collect();
            self.enqueue(queued);
        }
        // Still held in the buffer since their first send.
        self.enqueue(parts);
        self.pump(false)
    }

    /// Sends every queued batch and waits until every batch is answered, retries included.
    pub fn drain(&mut self) -> Result<()> {
        let deadline = Instant::now() + DRAIN_TIMEOUT;
        loop {
            self.pump(true)?;
            for pipe in self.pipes.values() {
                pipe.drain();
            }
            if self.retries.is_empty() || Instant::now() >= deadline {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
            self.resend_due()?;
        }
    }

    /// Waits for every answer, then closes the connections.
    pub fn finish(mut self) -> Result<()> {
        self.drain()?;
        for (_, pipe) in self.pipes.drain() {
            pipe.finish();
        }
        Ok(())
    }
}

/// Takes from the front of `queue` the batches of one produce request: at most `max_bytes` of
/// them (a larger batch goes alone), and one per partition (Kafka refuses a v3+ request with
/// two; a second batch of a partition waits for the next request, behind the first).
fn take_request(queue: &mut VecDeque<SentPart>, max_bytes: usize) -> Vec<SentPart> {
    let mut request: Vec<SentPart> = Vec::new();
    let mut partitions = HashSet::new();
    let mut filled = 0;
    while let Some(next) = queue.front() {
        let size = next.batch.len();
        let fits = request.is_empty() || filled + size <= max_bytes;
        if !fits || partitions.contains(&next.partition) {
            break;
        }
        filled += size;
        partitions.insert(next.partition);
        request.push(queue.pop_front().expect("front"));
    }
    request
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn part(partition: i32, size: usize) -> SentPart {
        SentPart {
            partition,
            due: Vec::new(),
            bytes: size as u64,
            held: size as u64,
            batch: Bytes::from(vec![0u8; size]),
            attempts: 0,
        }
    }

    /// Every request `take_request` makes of the queue, as partition lists.
    fn requests(parts: Vec<SentPart>, max_bytes: usize) -> Vec<Vec<i32>> {
        let mut queue: VecDeque<SentPart> = parts.into();
        let mut requests = Vec::new();
        while !queue.is_empty() {
            let request = take_request(&mut queue, max_bytes);
            requests.push(request.iter().map(|p| p.partition).collect());
        }
        requests
    }

    #[test]
    fn requests_stay_within_the_size_and_a_big_batch_goes_alone() {
        let parts = vec![
            part(0, 400),
            part(1, 400),
            part(2, 400),
            part(3, 2000),
            part(4, 10),
        ];
        assert_eq!(
            requests(parts, 1000),
            vec![vec![0, 1], vec![2], vec![3], vec![4]]
        );
    }

    #[test]
    fn a_partitions_second_batch_waits_for_the_next_request_in_order() {
        let parts = vec![part(0, 10), part(1, 10), part(0, 10), part(2, 10)];
        assert_eq!(requests(parts, 1000), vec![vec![0, 1], vec![0, 2]]);
    }
}
