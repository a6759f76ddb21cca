//! A full disk, on a real (loop-mounted ext4) filesystem, in both I/O modes: produce fails
//! with KAFKA_STORAGE_ERROR within the request timeout, reads, metadata and groups keep
//! working, the log says so a few times rather than once per batch, a crash on the full disk
//! restarts on it, produce works again by itself once space returns, and after kill -9 every
//! acknowledged record is still there.

mod common;

use bytes::Bytes;
use common::disk::LoopDisk;
use common::{kcat_consume, kcat_group_consume, wire, Broker};
use ferrite_shards::batch::build::{build_batch, NewRecord, ProducerFields};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;
use std::net::TcpStream;
use std::time::{Duration, Instant};

const TOPIC: &str = "filling";
const PARTITIONS: i32 = 2;
const VALUE_BYTES: usize = 200 << 10;
const REQUEST_TIMEOUT_MS: i32 = 5000;
const KAFKA_STORAGE_ERROR: i16 = 56;

fn topic_name() -> TopicName {
    TopicName(StrBytes::from_static_str(TOPIC))
}

/// Produces one record keyed `key` to `partition`: its offset, or the error code.
fn produce(s: &mut TcpStream, partition: i32, key: &str) -> Result<i64, i16> {
    let batch = build_batch(
        &[NewRecord {
            key: Some(Bytes::from(key.to_string())),
            value: Some(Bytes::from(vec![b'v'; VALUE_BYTES])),
            timestamp_ms: 1,
            headers: vec![],
        }],
        ProducerFields::NONE,
    );
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(REQUEST_TIMEOUT_MS)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name())
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(batch))])]);
    let resp: ProduceResponse = wire::call(s, ApiKey::Produce, 7, &req);
    let p = &resp.responses[0].partition_responses[0];
    match p.error_code {
        0 => Ok(p.base_offset),
        code => Err(code),
    }
}

/// Every record of the topic as (partition, offset) → key, read by kcat.
fn read_back(broker: &Broker) -> BTreeMap<(i32, i64), String> {
    kcat_consume(broker, TOPIC, "%p %o %k\n")
        .into_iter()
        .map(|line| {
            let mut it = line.splitn(3, ' ');
            let p = it.next().unwrap().parse().unwrap();
            let o = it.next().unwrap().parse().unwrap();
            ((p, o), it.next().unwrap_or_default().to_string())
        })
        .collect()
}

fn metadata_answers(broker: &Broker) {
    let mut s = wire::connect(broker);
    let req = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(topic_name()))
    ]));
    let resp: MetadataResponse = wire::call(&mut s, ApiKey::Metadata, 9, &req);
    assert_eq!(resp.topics[0].error_code, 0);
    assert_eq!(resp.topics[0].partitions.len(), PARTITIONS as usize);
}

fn fill_then_recover(mode: &str) {
    // Room for direct mode's 64 MiB reserve on each partition written before the disk fills.
    let disk = LoopDisk::new(320);
    let tuning = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(tuning.path(), format!("[shards]\nio_mode = \"{mode}\"\n")).unwrap();
    let data = disk.mount.join("data");
    // The log lives off the full disk, for this test to read.
    let log = tuning.path().with_extension("log");
    let mut broker = Broker::start_logging_to(
        &data,
        &log,
        common::free_port(),
        &[
            "--config",
            tuning.path().to_str().unwrap(),
            "--set",
            &format!("num.partitions={PARTITIONS}"),
            "--set",
            "log.segment.bytes=8388608",
            "--set",
            "offsets.topic.num.partitions=4",
        ],
        &[],
    );
    let mut acked: BTreeMap<(i32, i64), String> = BTreeMap::new();
    let mut s = wire::connect(&broker);
    common::kcat(&broker, &["-L", "-t", TOPIC], None); // creates it
    let mut seq = 0usize;
    let mut next_key = |partition: i32| {
        seq += 1;
        format!("p{partition}-k{seq}")
    };
    // Before the disk fills: records, and a group with its offsets topic.
    for p in 0..PARTITIONS {
        let key = next_key(p);
        let offset = produce(&mut s, p, &key).expect("room on the disk");
        acked.insert((p, offset), key);
    }
    assert_eq!(kcat_group_consume(&broker, "before", TOPIC, 2).len(), 2);

    // Fill all but some MiB, then produce until the disk refuses.
    let filler = disk.fill_leaving(24 << 20);
    let mut refusals = 0;
    let mut attempts = 0;
    while refusals < 30 {
        attempts += 1;
        assert!(attempts < 2000, "{mode}: the disk never filled");
        let p = (attempts % PARTITIONS as usize) as i32;
        let key = next_key(p);
        let started = Instant::now();
        let answer = produce(&mut s, p, &key);
        assert!(
            started.elapsed() < Duration::from_millis(REQUEST_TIMEOUT_MS as u64 + 2000),
            "{mode}: a produce on a full disk is answered within the request timeout"
        );
        match answer {
            Ok(offset) => {
                refusals = 0;
                acked.insert((p, offset), key);
            }
            Err(code) => {
                assert_eq!(
                    code, KAFKA_STORAGE_ERROR,
                    "{mode}: a full disk fails produce"
                );
                refusals += 1;
            }
        }
    }
    assert!(
        broker.is_running(),
        "{mode}: a full disk does not stop the broker"
    );
    let free = disk.free_bytes();
    assert!(
        free < 4 << 20,
        "{mode}: produce is refused only once the disk is full, not with {free} bytes free"
    );

    // While full: metadata, reads and groups go on; the log does not repeat itself per batch.
    metadata_answers(&broker);
    assert_eq!(
        read_back(&broker),
        acked,
        "{mode}: every acknowledged record reads back"
    );
    assert_eq!(
        kcat_group_consume(&broker, "during", TOPIC, acked.len()).len(),
        acked.len(),
        "{mode}: a new group joins and reads on a full disk"
    );
    let log = broker.log();
    let failure_lines = log.matches("append write failed").count();
    assert!(
        (1..=3).contains(&failure_lines),
        "{mode}: {failure_lines} lines for at least 30 failed appends:\n{log}"
    );

    // A crash on the full disk: the broker restarts on it and serves what it acknowledged.
    drop(s);
    broker.kill9();
    broker.restart();
    assert_eq!(
        read_back(&broker),
        acked,
        "{mode}: restarted on a full disk"
    );
    let mut s = wire::connect(&broker);

    // Space returns: produce works again without a restart.
    std::fs::remove_file(&filler).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut resumed = 0;
    while resumed < 10 {
        assert!(Instant::now() < deadline, "{mode}: produce did not resume");
        let p = resumed % PARTITIONS;
        let key = next_key(p);
        match produce(&mut s, p, &key) {
            Ok(offset) => {
                acked.insert((p, offset), key);
                resumed += 1;
            }
            Err(code) => {
                assert_eq!(code, KAFKA_STORAGE_ERROR, "{mode}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    assert_eq!(read_back(&broker), acked, "{mode}: after space returned");

    // And nothing acknowledged is lost to a crash.
    drop(s);
    broker.kill9();
    broker.restart();
    assert_eq!(
        read_back(&broker),
        acked,
        "{mode}: after kill -9 and a restart"
    );
    assert!(broker.stop().success());
}

#[test]
fn a_full_disk_fails_produce_and_recovers_buffered() {
    fill_then_recover("buffered");
}

#[test]
fn a_full_disk_fails_produce_and_recovers_direct() {
    fill_then_recover("direct");
}
