//! A producer's connections: one pipe per partition leader, produce requests no bigger than
//! `max.request.size`, and batches answered with a retriable error sent again to their
//! partition's leader, asked for again first when it moved (as Kafka's producer does).

use crate::client::{topic_layout, TopicLayout};
use crate::pipe::{Pipe, Retries, SentPart, DRAIN_TIMEOUT};
use crate::stats::Stats;
use anyhow::Result;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct Sender {
    topic: String,
    acks: i16,
    max_request_bytes: usize,
    /// Asked for the topic's leaders when one moved.
    bootstrap: String,
    layout: TopicLayout,
    pipes: HashMap<String, Pipe>,
    retries: Arc<Retries>,
    stats: Arc<Stats>,
}

impl Sender {
    /// Connects to every leader of `layout`.
    pub fn open(
        topic: &str,
        acks: i16,
        max_request_bytes: usize,
        layout: TopicLayout,
        stats: Arc<Stats>,
    ) -> Result<Sender> {
        let bootstrap = layout.leaders.values().next().expect("a leader").clone();
        let mut sender = Sender {
            topic: topic.to_string(),
            acks,
            max_request_bytes,
            bootstrap,
            layout,
            pipes: HashMap::new(),
            retries: Arc::default(),
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
            let pipe = Pipe::open(leader, self.stats.clone(), self.acks, self.retries.clone())?;
            self.pipes.insert(leader.to_string(), pipe);
        }
        Ok(self.pipes.get_mut(leader).expect("just opened"))
    }

    /// Sends the batches, one request per leader and at most `max_request_bytes` of batches
    /// per request (a larger batch goes alone); in a transaction, as its batches.
    pub fn send(&mut self, parts: Vec<SentPart>, transactional_id: Option<&str>) -> Result<()> {
        let mut by_leader: HashMap<String, Vec<SentPart>> = HashMap::new();
        for part in parts {
            let leader = self.layout.leaders[&part.partition].clone();
            by_leader.entry(leader).or_default().push(part);
        }
        for (leader, parts) in by_leader {
            for request_parts in split_by_size(parts, self.max_request_bytes) {
                self.send_request(&leader, request_parts, transactional_id)?;
            }
        }
        Ok(())
    }

    fn send_request(
        &mut self,
        leader: &str,
        mut parts: Vec<SentPart>,
        transactional_id: Option<&str>,
    ) -> Result<()> {
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
                transactional_id.map(|t| TransactionalId(StrBytes::from_string(t.to_string()))),
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
        }
        self.send(parts, None)
    }

    /// Waits until every batch is answered, retries included.
    pub fn drain(&mut self) -> Result<()> {
        let deadline = Instant::now() + DRAIN_TIMEOUT;
        loop {
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

/// Groups `parts` in order into requests of at most `max_bytes` of batches each; a batch
/// larger than that goes in a request of its own.
fn split_by_size(parts: Vec<SentPart>, max_bytes: usize) -> Vec<Vec<SentPart>> {
    let mut requests: Vec<Vec<SentPart>> = Vec::new();
    let mut filled = 0;
    for part in parts {
        let size = part.batch.len();
        match requests.last_mut() {
            Some(last) if filled + size <= max_bytes => {
                filled += size;
                last.push(part);
            }
            _ => {
                filled = size;
                requests.push(vec![part]);
            }
        }
    }
    requests
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
            batch: Bytes::from(vec![0u8; size]),
            attempts: 0,
        }
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
        let sizes: Vec<Vec<i32>> = split_by_size(parts, 1000)
            .iter()
            .map(|r| r.iter().map(|p| p.partition).collect())
            .collect();
        assert_eq!(sizes, vec![vec![0, 1], vec![2], vec![3], vec![4]]);
    }
}
