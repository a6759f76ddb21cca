//! rskafka 0.6 (a pure-Rust client, no librdkafka) against the real broker: topic
//! administration through its controller client, metadata, produce with every codec, fetch
//! (whole, from a middle offset, at and past the end, size-limited, long-polled) and
//! ListOffsets. Expectations are Kafka 3.9's.
//!
//! What rskafka negotiates (its own ranges, intersected with the broker's ApiVersions):
//! ApiVersions 0–3, Metadata 0–4, Produce 3–7, Fetch 4 only, ListOffsets 0–3, CreateTopics
//! 0–5, DeleteTopics 0–5, DeleteRecords 0–2. rskafka has no consumer groups (no
//! FindCoordinator, JoinGroup or OffsetCommit), so there is nothing of groups to test here.
//! Its DeleteRecords call is not tested: Ferrite does not serve DeleteRecords yet.

mod common;

use common::Broker;
use ferrite_shards::batch::{split_batches, BatchHeader, Compression as Stored};
use rskafka::chrono::{DateTime, TimeZone, Utc};
use rskafka::client::error::{Error, ProtocolError};
use rskafka::client::partition::{Compression, OffsetAt, PartitionClient, UnknownTopicHandling};
use rskafka::client::{Client, ClientBuilder};
use rskafka::record::{Record, RecordAndOffset};
use rskafka::BackoffConfig;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::{Duration, Instant};

/// Bound on every single client call (rskafka's own retries stop earlier, see `client`).
const CALL: Duration = Duration::from_secs(15);
/// A timestamp in the past (2025-06-15), so no broker timestamp bound can refuse it.
const BASE_MS: i64 = 1_750_000_000_000;

const CODECS: [(Compression, Stored, &str); 5] = [
    (Compression::NoCompression, Stored::None, "none"),
    (Compression::Gzip, Stored::Gzip, "gzip"),
    (Compression::Lz4, Stored::Lz4, "lz4"),
    (Compression::Snappy, Stored::Snappy, "snappy"),
    (Compression::Zstd, Stored::Zstd, "zstd"),
];

/// Awaits `f`, failing the test if it takes longer than `CALL`.
async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    match tokio::time::timeout(CALL, f).await {
        Ok(v) => v,
        Err(_) => panic!("{what}: no answer within {CALL:?}"),
    }
}

async fn client(broker: &Broker) -> Client {
    let backoff = BackoffConfig {
        init_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(500),
        base: 2.0,
        deadline: Some(Duration::from_secs(10)),
    };
    within(
        "connecting",
        ClientBuilder::new(vec![broker.addr.clone()])
            .client_id("rskafka-test")
            .backoff_config(backoff)
            .build(),
    )
    .await
    .expect("rskafka connects and reads metadata")
}

async fn partition(client: &Client, topic: &str, partition: i32) -> PartitionClient {
    within(
        "partition client",
        client.partition_client(topic, partition, UnknownTopicHandling::Error),
    )
    .await
    .unwrap_or_else(|e| panic!("partition client for {topic}/{partition}: {e}"))
}

async fn create(
    client: &Client,
    topic: &str,
    partitions: i32,
    replication: i16,
) -> Result<(), Error> {
    let controller = client.controller_client().expect("controller client");
    within(
        &format!("creating {topic}"),
        controller.create_topic(topic, partitions, replication, 5_000),
    )
    .await
}

async fn delete(client: &Client, topic: &str) -> Result<(), Error> {
    let controller = client.controller_client().expect("controller client");
    within(
        &format!("deleting {topic}"),
        controller.delete_topic(topic, 5_000),
    )
    .await
}

/// Topics rskafka lists (internal ones excluded), with their partitions.
async fn topics(client: &Client) -> BTreeMap<String, BTreeSet<i32>> {
    within("listing topics", client.list_topics())
        .await
        .expect("list_topics")
        .into_iter()
        .map(|t| (t.name, t.partitions))
        .collect()
}

/// The broker's error code in `result`, or a panic naming what came instead.
fn server_error<T: std::fmt::Debug>(what: &str, result: Result<T, Error>) -> ProtocolError {
    match result {
        Err(Error::ServerError { protocol_error, .. }) => protocol_error,
        other => panic!("{what}: expected an error from the broker, got {other:?}"),
    }
}

fn ts(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).unwrap()
}

/// `count` records unlike each other: keys, values (compressible, of varied length), headers
/// (text and binary) and timestamps, with the odd ones Kafka allows: a null key, a null value
/// (a tombstone), an empty value, no headers, and a timestamp earlier than the batch's first
/// (a negative delta).
fn records(tag: &str, first: usize, count: usize) -> Vec<Record> {
    (first..first + count)
        .map(|i| {
            let len = [10usize, 300, 2_000, 9_000][i % 4];
            let body: Vec<u8> = (0..len)
                .map(|k| b'a' + ((i * 7 + k * 3) % 26) as u8)
                .collect();
            let mut headers = BTreeMap::new();
            if i % 5 != 2 {
                headers.insert("index".to_string(), i.to_string().into_bytes());
                headers.insert("tag".to_string(), tag.as_bytes().to_vec());
            }
            if i % 5 == 4 {
                headers.insert("binary".to_string(), (0..=255u8).collect());
                headers.insert("empty".to_string(), Vec::new());
            }
            Record {
                key: (i % 6 != 3).then(|| format!("{tag}-key-{i}").into_bytes()),
                value: match i % 7 {
                    5 => None,
                    6 => Some(Vec::new()),
                    _ => Some([format!("{tag}-{i}-").into_bytes(), body].concat()),
                },
                headers,
                timestamp: ts(if i % 6 == 4 {
                    BASE_MS - 60_000 + i as i64
                } else {
                    BASE_MS + 1_000 * i as i64
                }),
            }
        })
        .collect()
}

async fn produce(p: &PartitionClient, records: Vec<Record>, codec: Compression) -> Vec<i64> {
    within(&format!("producing {codec:?}"), p.produce(records, codec))
        .await
        .unwrap_or_else(|e| panic!("produce {codec:?} to {}/{}: {e}", p.topic(), p.partition()))
}

async fn fetch(p: &PartitionClient, offset: i64, max_bytes: i32) -> (Vec<RecordAndOffset>, i64) {
    within(
        &format!("fetching from {offset}"),
        p.fetch_records(offset, 1..max_bytes, 500),
    )
    .await
    .unwrap_or_else(|e| panic!("fetch {}/{} from {offset}: {e}", p.topic(), p.partition()))
}

/// Fetches from `from` until `until` (the high watermark), as many fetches as it takes.
async fn fetch_all(p: &PartitionClient, from: i64, until: i64) -> Vec<RecordAndOffset> {
    let deadline = Instant::now() + CALL;
    let mut got: Vec<RecordAndOffset> = Vec::new();
    let mut next = from;
    while next < until {
        assert!(
            Instant::now() < deadline,
            "fetching {from}..{until}: stuck at {next}"
        );
        let (batch, hw) = fetch(p, next, 4 << 20).await;
        assert_eq!(hw, until, "high watermark while fetching from {next}");
        if let Some(last) = batch.last() {
            next = last.offset + 1;
        }
        got.extend(batch);
    }
    got
}

async fn offset(p: &PartitionClient, at: OffsetAt) -> i64 {
    within(&format!("ListOffsets {at:?}"), p.get_offset(at))
        .await
        .unwrap_or_else(|e| panic!("get_offset {at:?} on {}/{}: {e}", p.topic(), p.partition()))
}

/// `got` are `want` at offsets `first..`, field by field.
fn assert_records(what: &str, got: &[RecordAndOffset], first: i64, want: &[Record]) {
    let offsets: Vec<i64> = got.iter().map(|r| r.offset).collect();
    let expected: Vec<i64> = (first..first + want.len() as i64).collect();
    assert_eq!(offsets, expected, "{what}: offsets contiguous from {first}");
    for (g, w) in got.iter().zip(want) {
        let o = g.offset;
        assert_eq!(g.record.key, w.key, "{what}: key at {o}");
        assert!(g.record.value == w.value, "{what}: value at {o} differs");
        assert_eq!(g.record.headers, w.headers, "{what}: headers at {o}");
        assert_eq!(g.record.timestamp, w.timestamp, "{what}: timestamp at {o}");
    }
}

/// Compression of every batch stored in a partition's segment files.
fn stored_codecs(broker: &Broker, topic: &str, partition: i32) -> Vec<Stored> {
    let dir = broker.data_dir.join(format!("{topic}-{partition}"));
    let mut logs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    let mut codecs = Vec::new();
    for log in logs {
        let bytes = bytes::Bytes::from(std::fs::read(&log).unwrap());
        for b in split_batches(&bytes).unwrap_or_default() {
            codecs.push(BatchHeader::parse(&b).unwrap().compression().unwrap());
        }
    }
    codecs
}

/// Two batches in `codec` with everything a record can carry, read back every way a
/// consumer reads: whole, from inside each batch, size-limited, at and past the end; and
/// ListOffsets earliest, latest and by timestamp.
async fn round_trip(codec: Compression, stored: Stored, name: &str) {
    let broker = Broker::start(&[]);
    let client = client(&broker).await;
    let topic = format!("rsk-{name}");
    create(&client, &topic, 1, 1).await.expect("create topic");
    let p = partition(&client, &topic, 0).await;

    let first = records(name, 0, 7);
    let second = records(name, 7, 6);
    assert_eq!(
        produce(&p, first.clone(), codec).await,
        (0..7).collect::<Vec<_>>()
    );
    assert_eq!(
        produce(&p, second.clone(), codec).await,
        (7..13).collect::<Vec<_>>()
    );
    let all: Vec<Record> = first.iter().chain(&second).cloned().collect();

    let got = fetch_all(&p, 0, 13).await;
    assert_records(&format!("{name}: from 0"), &got, 0, &all);
    // From inside each batch: the broker sends whole batches, the client drops what is before.
    let got = fetch_all(&p, 3, 13).await;
    assert_records(&format!("{name}: from 3"), &got, 3, &all[3..]);
    let got = fetch_all(&p, 10, 13).await;
    assert_records(&format!("{name}: from 10"), &got, 10, &all[10..]);

    // One byte allowed: Kafka still returns the first batch whole (KIP-74), and only it.
    let (got, hw) = fetch(&p, 0, 2).await;
    assert_eq!(hw, 13);
    assert_records(&format!("{name}: one byte allowed"), &got, 0, &first);

    // At the end: nothing, after the wait; past it: OFFSET_OUT_OF_RANGE.
    let (got, hw) = fetch(&p, 13, 1 << 20).await;
    assert!(
        got.is_empty(),
        "{name}: fetch at the end returned {}",
        got.len()
    );
    assert_eq!(hw, 13);
    let past = within(
        "fetching past the end",
        p.fetch_records(14, 1..1 << 20, 100),
    )
    .await;
    assert_eq!(
        server_error("fetch past the end", past),
        ProtocolError::OffsetOutOfRange
    );

    assert_eq!(offset(&p, OffsetAt::Earliest).await, 0, "{name}: earliest");
    assert_eq!(offset(&p, OffsetAt::Latest).await, 13, "{name}: latest");
    // By timestamp: the first offset whose timestamp is at or after it.
    for target in [
        BASE_MS - 120_000,
        BASE_MS + 2_500,
        BASE_MS + 8_000,
        BASE_MS + 12_000,
    ] {
        let want = all
            .iter()
            .position(|r| r.timestamp.timestamp_millis() >= target)
            .map(|i| i as i64)
            .expect("some record is that late");
        let got = offset(&p, OffsetAt::Timestamp(ts(target))).await;
        assert_eq!(got, want, "{name}: offset for timestamp {target}");
    }
    // Later than every record: no offset (-1), no error.
    let got = offset(&p, OffsetAt::Timestamp(ts(BASE_MS + 3_600_000))).await;
    assert_eq!(got, -1, "{name}: offset for a timestamp after every record");

    let on_disk = stored_codecs(&broker, &topic, 0);
    assert_eq!(on_disk, vec![stored; 2], "{name}: batches stored as sent");
}

#[tokio::test]
async fn produce_fetch_and_list_offsets_uncompressed() {
    let (codec, stored, name) = CODECS[0];
    round_trip(codec, stored, name).await;
}

#[tokio::test]
async fn produce_fetch_and_list_offsets_gzip() {
    let (codec, stored, name) = CODECS[1];
    round_trip(codec, stored, name).await;
}

#[tokio::test]
async fn produce_fetch_and_list_offsets_lz4() {
    let (codec, stored, name) = CODECS[2];
    round_trip(codec, stored, name).await;
}

#[tokio::test]
async fn produce_fetch_and_list_offsets_snappy() {
    let (codec, stored, name) = CODECS[3];
    round_trip(codec, stored, name).await;
}

#[tokio::test]
async fn produce_fetch_and_list_offsets_zstd() {
    let (codec, stored, name) = CODECS[4];
    round_trip(codec, stored, name).await;
}

/// Batches in every codec in one partition come back from one fetch, in order.
#[tokio::test]
async fn batches_of_every_codec_fetched_together() {
    let broker = Broker::start(&[]);
    let client = client(&broker).await;
    create(&client, "rsk-mixed", 1, 1)
        .await
        .expect("create topic");
    let p = partition(&client, "rsk-mixed", 0).await;
    let mut all = Vec::new();
    for (round, (codec, _, name)) in CODECS.iter().enumerate() {
        let batch = records(name, round * 4, 4);
        let start = all.len() as i64;
        let offsets = produce(&p, batch.clone(), *codec).await;
        assert_eq!(offsets, (start..start + 4).collect::<Vec<_>>(), "{name}");
        all.extend(batch);
    }
    // A large value too, compressed.
    let big = Record {
        key: Some(b"big".to_vec()),
        value: Some((0..300_000u32).map(|i| (i % 251) as u8).collect()),
        headers: BTreeMap::from([("size".to_string(), b"300000".to_vec())]),
        timestamp: ts(BASE_MS + 99_000),
    };
    assert_eq!(
        produce(&p, vec![big.clone()], Compression::Zstd).await,
        vec![20]
    );
    all.push(big);

    let (got, hw) = fetch(&p, 0, 8 << 20).await;
    assert_eq!(hw, 21);
    assert_records("every codec in one fetch", &got, 0, &all);
    let mut want: Vec<Stored> = CODECS.iter().map(|c| c.1).collect();
    want.push(Stored::Zstd);
    assert_eq!(stored_codecs(&broker, "rsk-mixed", 0), want);
}

/// Partitions of one topic (on both shards) keep their own offsets and records.
#[tokio::test]
async fn partitions_are_independent() {
    let broker = Broker::start(&[]);
    let client = client(&broker).await;
    create(&client, "rsk-parts", 4, 1)
        .await
        .expect("create topic");
    assert_eq!(
        topics(&client).await.get("rsk-parts"),
        Some(&BTreeSet::from([0, 1, 2, 3]))
    );
    let mut sent = Vec::new();
    for i in 0..4 {
        let p = partition(&client, "rsk-parts", i).await;
        let batch = records(&format!("p{i}"), 0, 2 + i as usize * 3);
        let n = batch.len() as i64;
        assert_eq!(
            produce(&p, batch.clone(), Compression::Lz4).await,
            (0..n).collect::<Vec<_>>()
        );
        sent.push((p, batch));
    }
    for (i, (p, batch)) in sent.iter().enumerate() {
        let n = batch.len() as i64;
        assert_eq!(offset(p, OffsetAt::Earliest).await, 0, "partition {i}");
        assert_eq!(offset(p, OffsetAt::Latest).await, n, "partition {i}");
        let got = fetch_all(p, 0, n).await;
        assert_records(&format!("partition {i}"), &got, 0, batch);
    }
}

/// A fetch waiting at the end of the log is answered as soon as a record arrives (on
/// another connection: Kafka answers one connection's requests in order).
#[tokio::test]
async fn fetch_at_the_end_waits_for_new_records() {
    let broker = Broker::start(&[]);
    let reader = client(&broker).await;
    let writer = client(&broker).await;
    create(&reader, "rsk-wait", 1, 1)
        .await
        .expect("create topic");
    let rp = partition(&reader, "rsk-wait", 0).await;
    let wp = partition(&writer, "rsk-wait", 0).await;
    let batch = records("wait", 0, 1);
    let started = Instant::now();
    let (fetched, produced) = tokio::join!(
        within("long poll", rp.fetch_records(0, 1..1 << 20, 10_000)),
        async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            produce(&wp, batch.clone(), Compression::NoCompression).await
        }
    );
    let waited = started.elapsed();
    assert_eq!(produced, vec![0]);
    let (got, hw) = fetched.expect("long-polled fetch");
    assert_eq!(hw, 1);
    assert_records("long poll", &got, 0, &batch);
    assert!(
        waited < Duration::from_secs(5),
        "the fetch waited {waited:?}: it should end when the record arrives, not at max_wait"
    );
}

/// CreateTopics and DeleteTopics through the controller client, with Kafka's errors, and
/// Metadata through list_topics.
#[tokio::test]
async fn controller_client_creates_and_deletes_topics() {
    let broker = Broker::start(&[
        "--set",
        "num.partitions=2",
        "--set",
        "auto.create.topics.enable=false",
    ]);
    let client = client(&broker).await;

    create(&client, "rsk-admin", 3, 1)
        .await
        .expect("create rsk-admin");
    let listed = topics(&client).await;
    assert_eq!(
        listed.get("rsk-admin"),
        Some(&BTreeSet::from([0, 1, 2])),
        "{listed:?}"
    );
    let dup = create(&client, "rsk-admin", 3, 1).await;
    assert_eq!(
        server_error("duplicate", dup),
        ProtocolError::TopicAlreadyExists
    );
    let dup = create(&client, "rsk-admin", 5, 1).await;
    assert_eq!(
        server_error("duplicate with other partitions", dup),
        ProtocolError::TopicAlreadyExists
    );

    // -1 and -1 (CreateTopics v4+, KIP-464): the broker's num.partitions and replication.
    create(&client, "rsk-defaults", -1, -1)
        .await
        .expect("create with broker defaults");
    assert_eq!(
        topics(&client).await.get("rsk-defaults"),
        Some(&BTreeSet::from([0, 1]))
    );

    let long = "x".repeat(250);
    for (name, partitions, replication, want) in [
        ("bad/name", 1, 1, ProtocolError::InvalidTopicException),
        ("bad name", 1, 1, ProtocolError::InvalidTopicException),
        ("..", 1, 1, ProtocolError::InvalidTopicException),
        (long.as_str(), 1, 1, ProtocolError::InvalidTopicException),
        (
            "rsk-zero-partitions",
            0,
            1,
            ProtocolError::InvalidPartitions,
        ),
        (
            "rsk-zero-replicas",
            1,
            0,
            ProtocolError::InvalidReplicationFactor,
        ),
        (
            "rsk-two-replicas",
            1,
            2,
            ProtocolError::InvalidReplicationFactor,
        ),
    ] {
        let e = create(&client, name, partitions, replication).await;
        assert_eq!(
            server_error(name, e),
            want,
            "create {name} {partitions} {replication}"
        );
    }
    let listed = topics(&client).await;
    assert_eq!(
        listed.keys().cloned().collect::<Vec<_>>(),
        vec!["rsk-admin".to_string(), "rsk-defaults".to_string()],
        "only the topics created"
    );

    // Records, then delete: gone from metadata, unknown to a partition client, and a topic
    // created again under the name starts empty.
    let p = partition(&client, "rsk-admin", 1).await;
    produce(&p, records("admin", 0, 3), Compression::Gzip).await;
    delete(&client, "rsk-admin")
        .await
        .expect("delete rsk-admin");
    assert!(!topics(&client).await.contains_key("rsk-admin"));
    let again = delete(&client, "rsk-admin").await;
    assert_eq!(
        server_error("deleting it again", again),
        ProtocolError::UnknownTopicOrPartition
    );
    let gone = within(
        "partition client for a deleted topic",
        client.partition_client("rsk-admin", 1, UnknownTopicHandling::Error),
    )
    .await;
    assert_eq!(
        server_error("partition client for a deleted topic", gone),
        ProtocolError::UnknownTopicOrPartition
    );
    let missing = delete(&client, "rsk-never-created").await;
    assert_eq!(
        server_error("deleting a topic never created", missing),
        ProtocolError::UnknownTopicOrPartition
    );

    create(&client, "rsk-admin", 3, 1)
        .await
        .expect("create rsk-admin again");
    let p = partition(&client, "rsk-admin", 1).await;
    assert_eq!(
        offset(&p, OffsetAt::Latest).await,
        0,
        "the new topic is empty"
    );
    assert_eq!(offset(&p, OffsetAt::Earliest).await, 0);
    assert_eq!(
        produce(&p, records("again", 0, 2), Compression::Snappy).await,
        vec![0, 1]
    );
}

/// DeleteRecords (rskafka sends v1): earliest follows, a fetch below it is out of range, and
/// an offset past the high watermark is refused with OFFSET_OUT_OF_RANGE, changing nothing.
#[tokio::test]
async fn delete_records_moves_earliest_and_refuses_past_the_end() {
    let broker = Broker::start(&[]);
    let client = client(&broker).await;
    create(&client, "rsk-trimmed", 1, 1)
        .await
        .expect("create topic");
    let p = partition(&client, "rsk-trimmed", 0).await;
    for i in 0..4 {
        produce(&p, records("trim", i * 5, 5), Compression::NoCompression).await;
    }
    within("DeleteRecords", p.delete_records(7, 5_000))
        .await
        .expect("delete records before 7");
    assert_eq!(offset(&p, OffsetAt::Earliest).await, 7);
    let below = within(
        "fetching below the start",
        p.fetch_records(3, 1..1 << 20, 100),
    )
    .await;
    assert_eq!(
        server_error("fetch below the start", below),
        ProtocolError::OffsetOutOfRange
    );
    let (got, _) = fetch(&p, 7, 1 << 20).await;
    assert_eq!(
        got.first().map(|r| r.offset),
        Some(7),
        "the first record left"
    );
    let past = within("DeleteRecords past the end", p.delete_records(21, 5_000)).await;
    assert_eq!(
        server_error("delete past the end", past),
        ProtocolError::OffsetOutOfRange
    );
    assert_eq!(offset(&p, OffsetAt::Earliest).await, 7);
}
