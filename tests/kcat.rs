//! kcat (librdkafka 2.0) against the real broker: metadata, every codec byte for byte, and
//! consuming from a timestamp.

mod common;

use common::{kcat, Broker};
use ferrite_shards::batch::{split_batches, BatchHeader, Compression};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Lines of varied length and content (no newlines: kcat splits on them).
fn payloads(tag: &str, count: usize) -> Vec<String> {
    (0..count)
        .map(|i| {
            // Every value compresses (the pattern repeats every 90 bytes): librdkafka sends a
            // batch uncompressed when compressing would not make it smaller.
            let len = [300usize, 1000, 4000, 17_000, 70_000][i % 5];
            let body: String = (0..len)
                .map(|k| (b'!' + ((i * 31 + k * 7) % 90) as u8) as char)
                .collect();
            format!("{tag}-{i}-{body}")
        })
        .collect()
}

/// Compression codecs of every batch stored in a partition's segment files.
fn stored_codecs(broker: &Broker, topic: &str, partition: i32) -> Vec<Compression> {
    let dir = broker.data_dir.join(format!("{topic}-{partition}"));
    let mut codecs = Vec::new();
    let mut logs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    for log in logs {
        let bytes = bytes::Bytes::from(std::fs::read(&log).unwrap());
        for b in split_batches(&bytes).unwrap_or_default() {
            codecs.push(BatchHeader::parse(&b).unwrap().compression().unwrap());
        }
    }
    codecs
}

#[test]
fn metadata_lists_the_broker_and_topics() {
    let broker = Broker::start(&["--set", "num.partitions=3"]);
    kcat(&broker, &["-P", "-t", "listed"], Some(b"one\n"));
    let json = kcat(&broker, &["-L", "-J"], None);
    let meta: serde_json::Value = serde_json::from_slice(&json).expect("kcat -J output");
    let brokers = meta["brokers"].as_array().unwrap();
    assert_eq!(brokers.len(), 1);
    assert_eq!(brokers[0]["name"].as_str().unwrap(), broker.addr);
    assert_eq!(brokers[0]["id"], 0);
    assert_eq!(meta["controllerid"], 0);
    let topic = meta["topics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["topic"] == "listed")
        .expect("topic listed");
    assert_eq!(topic["partitions"].as_array().unwrap().len(), 3);
    for p in topic["partitions"].as_array().unwrap() {
        assert_eq!(p["leader"], 0);
    }
}

#[test]
fn every_codec_round_trips_byte_for_byte_and_stays_compressed() {
    let broker = Broker::start(&[]);
    for (codec, expect) in [
        ("none", Compression::None),
        ("gzip", Compression::Gzip),
        ("snappy", Compression::Snappy),
        ("lz4", Compression::Lz4),
        ("zstd", Compression::Zstd),
    ] {
        let topic = format!("codec-{codec}");
        let lines = payloads(codec, 40);
        let input = lines.join("\n") + "\n";
        kcat(
            &broker,
            &[
                "-P",
                "-t",
                &topic,
                "-z",
                codec,
                "-X",
                "linger.ms=50",
                "-X",
                "batch.num.messages=20",
            ],
            Some(input.as_bytes()),
        );
        let got = common::kcat_consume(&broker, &topic, "%s\n");
        assert_eq!(got.len(), lines.len(), "{codec}: every message back");
        assert!(got == lines, "{codec}: identical content in order");
        let stored = stored_codecs(&broker, &topic, 0);
        assert!(!stored.is_empty());
        assert!(
            stored.iter().all(|c| *c == expect),
            "{codec}: stored as sent: {stored:?}"
        );
    }
}

#[test]
fn consuming_from_a_timestamp_starts_at_the_first_later_message() {
    let broker = Broker::start(&[]);
    kcat(&broker, &["-P", "-t", "timed"], Some(b"early-1\nearly-2\n"));
    std::thread::sleep(Duration::from_millis(1100));
    let cut = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis();
    std::thread::sleep(Duration::from_millis(50));
    kcat(
        &broker,
        &["-P", "-t", "timed"],
        Some(b"late-1\nlate-2\nlate-3\n"),
    );
    let from = format!("s@{cut}");
    let out = kcat(
        &broker,
        &[
            "-C", "-t", "timed", "-o", &from, "-e", "-q", "-f", "%o %s\n",
        ],
        None,
    );
    let text = String::from_utf8(out).unwrap();
    let got: Vec<&str> = text.lines().collect();
    assert_eq!(got, vec!["2 late-1", "3 late-2", "4 late-3"]);
    // A timestamp after everything: nothing to read.
    let future = format!("s@{}", cut + 3_600_000);
    let out = kcat(
        &broker,
        &[
            "-C", "-t", "timed", "-o", &future, "-e", "-q", "-f", "%o %s\n",
        ],
        None,
    );
    assert!(String::from_utf8(out).unwrap().trim().is_empty());
}
