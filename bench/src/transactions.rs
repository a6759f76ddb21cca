//! A transactional producer's side of the protocol, for `produce --transactional-id`: the
//! coordinator found and the producer id initialized once, then per transaction the partitions
//! added and EndTxn; the batches carry the producer id, epoch and sequences, flagged
//! transactional. Retriable coordinator answers (CONCURRENT_TRANSACTIONS while the previous
//! transaction's markers are written, a coordinator loading) are retried, as clients do.

use crate::client::{Conn, Sent};
use anyhow::{bail, Context, Result};
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, ApiKey, EndTxnRequest, FindCoordinatorRequest,
    InitProducerIdRequest, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Kafka's error codes the loop retries on.
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;
const CONCURRENT_TRANSACTIONS: i16 = 51;
/// How long a retried call keeps trying.
const RETRY_FOR: Duration = Duration::from_secs(30);
const TRANSACTION_TIMEOUT_MS: i32 = 60_000;

/// The producer fields of a transactional batch.
#[derive(Copy, Clone, Debug)]
pub struct BatchProducer {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
}

pub struct Transactions {
    coordinator: Conn,
    id: String,
    producer_id: i64,
    epoch: i16,
    /// The next sequence per partition.
    sequences: HashMap<i32, i32>,
    /// The AddPartitionsToTxn of the open transaction, while its answer is unread.
    adding: Option<(AddPartitionsToTxnRequest, Sent)>,
    pub committed: u64,
    pub commit_time: Duration,
}

fn retriable(code: i16) -> bool {
    matches!(
        code,
        COORDINATOR_LOAD_IN_PROGRESS
            | COORDINATOR_NOT_AVAILABLE
            | NOT_COORDINATOR
            | CONCURRENT_TRANSACTIONS
    )
}

/// Calls `f` until its error code is 0 (then the number of retries) or not retriable.
fn retrying(what: &str, mut f: impl FnMut() -> Result<i16>) -> Result<u64> {
    let until = Instant::now() + RETRY_FOR;
    let mut retries = 0;
    loop {
        match f()? {
            0 => return Ok(retries),
            code if retriable(code) && Instant::now() < until => {
                retries += 1;
                std::thread::sleep(Duration::from_millis(5))
            }
            code => bail!("{what} failed with error {code}"),
        }
    }
}

impl Transactions {
    /// Finds `id`'s coordinator through `bootstrap` and initializes the producer.
    pub fn init(bootstrap: &str, id: String) -> Result<Transactions> {
        let mut conn = Conn::connect(bootstrap)?;
        let mut addr = String::new();
        // v4 asks for keys in a list, earlier versions for one key.
        let batched = conn.versions.of(ApiKey::FindCoordinator)? >= 4;
        let key = StrBytes::from_string(id.clone());
        let request = if batched {
            FindCoordinatorRequest::default().with_coordinator_keys(vec![key])
        } else {
            FindCoordinatorRequest::default().with_key(key)
        }
        .with_key_type(1);
        retrying("FindCoordinator", || {
            let r = conn.call(&request)?;
            let (code, host, port) = match r.coordinators.first() {
                Some(c) => (c.error_code, c.host.to_string(), c.port),
                None => (r.error_code, r.host.to_string(), r.port),
            };
            addr = format!("{host}:{port}");
            Ok(code)
        })?;
        let mut coordinator = Conn::connect(&addr).context("the transaction coordinator")?;
        let (mut producer_id, mut epoch) = (-1, -1);
        retrying("InitProducerId", || {
            let r = coordinator.call(
                &InitProducerIdRequest::default()
                    .with_transactional_id(Some(TransactionalId(StrBytes::from_string(id.clone()))))
                    .with_transaction_timeout_ms(TRANSACTION_TIMEOUT_MS),
            )?;
            (producer_id, epoch) = (r.producer_id.0, r.producer_epoch);
            Ok(r.error_code)
        })?;
        Ok(Transactions {
            coordinator,
            id,
            producer_id,
            epoch,
            sequences: HashMap::new(),
            adding: None,
            committed: 0,
            commit_time: Duration::ZERO,
        })
    }

    /// Begins a transaction over `partitions` of `topic`: sends AddPartitionsToTxn, whose answer
    /// `wait_added` reads. As in Kafka's producer, records accumulate meanwhile; only their
    /// batches wait for the partitions to be added.
    pub fn begin(&mut self, topic: &str, partitions: &[i32]) -> Result<()> {
        let request = self.add_partitions_request(topic, partitions);
        let sent = self.coordinator.send(&request)?;
        self.adding = Some((request, sent));
        Ok(())
    }

    /// Waits for the partitions `begin` asked for to be added (retrying what the coordinator
    /// answers to retry); returns the calls retried. Nothing to wait for once they are.
    pub fn wait_added(&mut self) -> Result<u64> {
        let Some((request, sent)) = self.adding.take() else {
            return Ok(0);
        };
        let coordinator = &mut self.coordinator;
        let mut first = Some(sent);
        retrying("AddPartitionsToTxn", || {
            let r = match first.take() {
                Some(sent) => coordinator.receive::<AddPartitionsToTxnRequest>(sent)?,
                None => coordinator.call(&request)?,
            };
            Ok(r.results_by_topic_v3_and_below
                .iter()
                .flat_map(|t| t.results_by_partition.iter())
                .map(|p| p.partition_error_code)
                .find(|&c| c != 0)
                .unwrap_or(0))
        })
    }

    fn add_partitions_request(&self, topic: &str, partitions: &[i32]) -> AddPartitionsToTxnRequest {
        AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(StrBytes::from_string(
                self.id.clone(),
            )))
            .with_v3_and_below_producer_id(ProducerId(self.producer_id))
            .with_v3_and_below_producer_epoch(self.epoch)
            .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(partitions.to_vec())])
    }

    /// The producer fields of the next batch of `count` records to `partition`.
    pub fn next_batch(&mut self, partition: i32, count: usize) -> BatchProducer {
        let seq = self.sequences.entry(partition).or_insert(0);
        let base_sequence = *seq;
        *seq = seq.wrapping_add(count as i32);
        BatchProducer {
            producer_id: self.producer_id,
            producer_epoch: self.epoch,
            base_sequence,
        }
    }

    /// Commits the transaction (every batch of it acknowledged before); returns the calls
    /// retried.
    pub fn commit(&mut self) -> Result<u64> {
        let started = Instant::now();
        let mut retries = self.wait_added()?;
        let request = EndTxnRequest::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(self.id.clone())))
            .with_producer_id(ProducerId(self.producer_id))
            .with_producer_epoch(self.epoch)
            .with_committed(true);
        let coordinator = &mut self.coordinator;
        retries += retrying("EndTxn", || Ok(coordinator.call(&request)?.error_code))?;
        self.committed += 1;
        self.commit_time += started.elapsed();
        Ok(retries)
    }
}
