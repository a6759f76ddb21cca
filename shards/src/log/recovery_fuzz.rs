//! Fuzzing recovery: a log of several segments, closed cleanly or dropped as in a crash, has
//! one of its files (a segment, its offset index or its time index) mutated: bytes changed,
//! cut short, garbage appended. Opening it again must not panic, and whatever it then serves
//! must be exactly what was written: every batch read is byte for byte the batch appended at
//! that offset, and a read that cannot serve that answers an error. Corruption is reported,
//! never served.
//! Repeatable and bounded: a fixed seed and case count (`testing::fuzz_budget`).

use super::segment::SegmentPaths;
use super::tests::{append, records, run, stamped};
use super::*;
use proptest::prelude::*;
use proptest::sample::Index;
use std::collections::BTreeMap;

const BATCHES: usize = 30;

/// Appends `BATCHES` batches over several segments; returns what the log stores at each base
/// offset. With `crash`, the last third is appended after the last flush and the log is
/// dropped without closing.
async fn write(dir: &Path, mode: IoMode, crash: bool) -> BTreeMap<i64, Bytes> {
    let log = super::tests::open(dir, mode, config()).await;
    let mut written = BTreeMap::new();
    for i in 0..BATCHES {
        if crash && i == BATCHES * 2 / 3 {
            log.flush().await.unwrap();
        }
        let b = records(1 + i % 4, 40 + (i * 37) % 300, i as i64 * 10);
        let info = append(&log, &b).await;
        written.insert(info.base_offset, stamped(&b, info.base_offset, 0));
    }
    if !crash {
        log.close().await.unwrap();
    }
    written
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        ..LogConfig::default()
    }
}

fn options(mode: IoMode) -> LogOptions {
    LogOptions {
        config: config(),
        io_mode: mode,
        writer: Default::default(),
        cache: (mode == IoMode::Direct).then(|| BatchCache::new(8 << 20)),
    }
}

#[derive(Debug, Clone)]
struct Damage {
    file: usize,
    segment: Index,
    changes: Vec<(Index, u8)>,
    cut: Option<Index>,
    garbage: Vec<u8>,
}

fn damage() -> impl Strategy<Value = Damage> {
    (
        0usize..3,
        any::<Index>(),
        prop::collection::vec((any::<Index>(), any::<u8>()), 0..4),
        prop::option::of(any::<Index>()),
        prop::collection::vec(any::<u8>(), 0..80),
    )
        .prop_map(|(file, segment, changes, cut, garbage)| Damage {
            file,
            segment,
            changes,
            cut,
            garbage,
        })
}

fn inflict(dir: &Path, bases: &[i64], d: &Damage) {
    let paths = SegmentPaths::new(dir, bases[d.segment.index(bases.len())]);
    let path = [paths.log, paths.index, paths.time_index][d.file].clone();
    let Ok(mut bytes) = std::fs::read(&path) else {
        return;
    };
    for (at, byte) in &d.changes {
        if !bytes.is_empty() {
            let at = at.index(bytes.len());
            eprintln!(
                "DEBUG {} at {at} of {}: {:#x} -> {byte:#x}",
                path.display(),
                bytes.len(),
                bytes[at]
            );
            bytes[at] = *byte;
        }
    }
    if let Some(cut) = d.cut {
        let len = cut.index(bytes.len().max(1));
        bytes.truncate(len);
    }
    bytes.extend_from_slice(&d.garbage);
    std::fs::write(&path, &bytes).unwrap();
}

/// Reads from the start until the end or the first error; every batch served must be the
/// one written at its offset.
async fn check_served(log: &Log, written: &BTreeMap<i64, Bytes>) -> Result<(), String> {
    let end = log.log_end_offset();
    let mut at = log.log_start_offset();
    while at < end {
        let Ok(r) = log.read(at, 1 << 20, end).await else {
            return Ok(());
        };
        if r.next_offset <= at {
            return Err(format!(
                "a read at {at} (end {end}) made no progress: next {} with {} bytes",
                r.next_offset, r.bytes
            ));
        }
        let Ok(bytes) = r.to_bytes().await else {
            return Ok(());
        };
        let batches = batch::split_batches(&bytes).map_err(|e| format!("at {at}: {e}"))?;
        for b in batches {
            let base = batch::BatchHeader::parse(&b).unwrap().base_offset;
            if written.get(&base) != Some(&b) {
                return Err(format!("the batch served at {base} is not the one written"));
            }
        }
        at = r.next_offset;
    }
    Ok(())
}

proptest! {
    #![proptest_config(crate::testing::fuzz_config(64))]

    #[test]
    fn a_damaged_log_opens_and_serves_only_what_was_written(
        direct in any::<bool>(),
        crash in any::<bool>(),
        d in damage(),
    ) {
        let mode = if direct { IoMode::Direct } else { IoMode::Buffered };
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("topic-0");
        let outcome = run(move || async move {
            let written = write(&dir, mode, crash).await;
            let bases: Vec<i64> = {
                let mut b: Vec<i64> = std::fs::read_dir(&dir)
                    .unwrap()
                    .filter_map(|e| {
                        let name = e.ok()?.file_name().into_string().ok()?;
                        name.strip_suffix(".log")?.parse().ok()
                    })
                    .collect();
                b.sort();
                b
            };
            inflict(&dir, &bases, &d);
            // A clean refusal to open is an answer too; a panic is not.
            let Ok(log) = Log::open(&dir, options(mode)).await else {
                return Ok(());
            };
            let served = check_served(&log, &written).await;
            let _ = log.close().await;
            served
        });
        prop_assert!(outcome.is_ok(), "{}", outcome.unwrap_err());
    }
}
