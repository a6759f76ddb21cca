//! What the produce path's record walk costs, printed as figures (not a timed test).
//!
//! `cargo bench -p ferrite-shards --bench record_checks -- [--mib N] [--codec none|gzip|...]`
//!
//! For 100-byte and 1 KiB records, uncompressed and with each codec, it builds 16 KiB-ish
//! batches as producers send them, then times over `--mib` MiB of batches (64 by default):
//! the CRC-32C pass every append already made before record checks existed (the reference),
//! and `record_checks::check_records` (Kafka's `LogValidator` walk: every record's framing,
//! keys, timestamps; compressed batches inflated as a stream). It prints each as CPU seconds
//! per GB of batches (as sent, compressed or not) and per GB of records inflated, nanoseconds
//! per record, and the walk's cost relative to the CRC pass. "Inflate alone" decompresses each
//! batch's records in one piece without looking at them: what decompression itself costs.
//! Then the same for the old message formats: up-converting magic 1 sets (Produce v0–2) and
//! down-converting v2 batches (Fetch v0–3), which copy where the v2 path does not.

use bytes::Bytes;
use ferrite_shards::batch::build::{build_batch_compressed, NewRecord, ProducerFields};
use ferrite_shards::batch::legacy::{down::down_convert, up::up_convert, MAGIC_V1};
use ferrite_shards::batch::record_checks::{check_records, RecordRules};
use ferrite_shards::batch::{BatchHeader, Compression};
use std::time::Instant;

const BATCH_TARGET_BYTES: usize = 16 << 10;
const NOW: i64 = 1_700_000_000_000;

/// The value given after `flag`, if any.
fn arg(flag: &str) -> Option<String> {
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        if a == flag {
            return Some(it.next().unwrap_or_else(|| panic!("{flag} needs a value")));
        }
    }
    None
}

fn mib() -> usize {
    arg("--mib").map_or(64, |n| n.parse().expect("--mib N: a number"))
}

/// `--codec NAME` (none, gzip, snappy, lz4, zstd) times that codec alone, for profiling one.
fn codecs() -> Vec<Compression> {
    let only = arg("--codec").map(|c| c.to_ascii_lowercase());
    Compression::ALL
        .into_iter()
        .filter(|c| {
            only.as_ref()
                .is_none_or(|o| format!("{c:?}").to_ascii_lowercase() == *o)
        })
        .collect()
}

/// Record values that compress about as well as JSON-ish payloads do (roughly 3:1 with lz4).
fn value(i: usize, bytes: usize) -> Bytes {
    let text = format!(
        "{{\"id\":{i},\"user\":\"user-{}\",\"event\":\"click\",\"pad\":\"",
        i % 977
    );
    let mut v = text.into_bytes();
    let mut x = i as u32 | 1;
    while v.len() < bytes {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        v.push(b'a' + (x % 16) as u8);
    }
    v.truncate(bytes);
    Bytes::from(v)
}

fn batches(record_bytes: usize, codec: Compression, total_bytes: usize) -> (Vec<Bytes>, usize) {
    let per_batch = (BATCH_TARGET_BYTES / (record_bytes + 20)).max(1);
    let records: Vec<NewRecord> = (0..per_batch)
        .map(|i| NewRecord {
            key: Some(Bytes::from(format!("key-{}", i % 1000))),
            value: Some(value(i, record_bytes)),
            timestamp_ms: NOW + i as i64,
            headers: vec![],
        })
        .collect();
    let one = build_batch_compressed(&records, ProducerFields::NONE, codec).unwrap();
    let count = (total_bytes / one.len()).max(1);
    (vec![one; count], per_batch * count)
}

/// Seconds for `f` over every batch, best of three.
fn time(batches: &[Bytes], mut f: impl FnMut(&Bytes)) -> f64 {
    (0..3)
        .map(|_| {
            let started = Instant::now();
            for b in batches {
                f(b);
            }
            started.elapsed().as_secs_f64()
        })
        .fold(f64::MAX, f64::min)
}

fn main() {
    let total = mib() << 20;
    println!(
        "record walk against the CRC pass, {} MiB of batches each",
        total >> 20
    );
    println!("| records | codec | batch bytes | CRC s/GB | inflate alone s/GB | walk s/GB | walk s per inflated GB | walk ns/record | walk / CRC |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let rules = RecordRules::defaults(NOW);
    for record_bytes in [100usize, 1024] {
        for codec in codecs() {
            let (batches, records) = batches(record_bytes, codec, total);
            let bytes: usize = batches.iter().map(|b| b.len()).sum();
            let gb = bytes as f64 / 1e9;
            let section = ferrite_shards::batch::records::record_section(&batches[0], 64 << 20);
            let inflated_gb = (section.unwrap().len() * batches.len()) as f64 / 1e9;
            let crc = time(&batches, |b| {
                std::hint::black_box(ferrite_shards::batch::crc::crc32c(&b[21..]));
            });
            let inflate = time(&batches, |b| {
                std::hint::black_box(
                    ferrite_shards::batch::records::record_section(b, 64 << 20).unwrap(),
                );
            });
            let walk = time(&batches, |b| {
                let header = BatchHeader::parse(b).unwrap();
                std::hint::black_box(check_records(b, &header, &rules).unwrap());
            });
            println!(
                "| {record_bytes} B | {codec:?} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.1} | {:.2}× |",
                batches[0].len(),
                crc / gb,
                inflate / gb,
                walk / gb,
                walk / inflated_gb,
                walk * 1e9 / records as f64,
                walk / crc
            );
        }
    }
    println!();
    println!("old message formats: conversions copy, per GB of the v2 form");
    println!(
        "| records | codec | up-convert s/GB (magic 1 → v2) | down-convert s/GB (v2 → magic 1) |"
    );
    println!("|---|---|---|---|");
    for record_bytes in [100usize, 1024] {
        for codec in [Compression::None, Compression::Lz4] {
            let (batches, _) = batches(record_bytes, codec, total / 4);
            let bytes: usize = batches.iter().map(|b| b.len()).sum();
            let gb = bytes as f64 / 1e9;
            let sets: Vec<Bytes> = batches
                .iter()
                .map(|b| {
                    down_convert(b, MAGIC_V1, 0, usize::MAX)
                        .unwrap()
                        .set
                        .freeze()
                })
                .collect();
            let down = time(&batches, |b| {
                std::hint::black_box(down_convert(b, MAGIC_V1, 0, usize::MAX).unwrap());
            });
            let up = time(&sets, |s| {
                std::hint::black_box(up_convert(s).unwrap());
            });
            println!(
                "| {record_bytes} B | {codec:?} | {:.3} | {:.3} |",
                up / gb,
                down / gb
            );
        }
    }
}
