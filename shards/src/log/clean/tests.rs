//! Compaction, run against both I/O modes: what survives, offsets, tombstones, stopping, and
//! crashes around the swap.

use super::super::tests::{open, run};
use super::*;
use crate::batch::build::{build_batch, decode_record_section, NewRecord, ProducerFields};
use crate::batch::records::record_section;
use crate::batch::{codec, BatchHeader, BatchOrigin, Compression, HEADER_BYTES};
use crate::config::{CleanupPolicy, IoMode, LogConfig};
use crate::log::Log;
use bytes::Bytes;
use std::collections::HashMap;
use std::path::Path;

const MODES: [IoMode; 2] = [IoMode::Buffered, IoMode::Direct];
const KEYS: usize = 10;
const CODECS: [Compression; 5] = Compression::ALL;

fn compacted_config() -> LogConfig {
    LogConfig {
        cleanup_policy: CleanupPolicy::Compact,
        segment_bytes: 4096,
        delete_retention_ms: 0,
        min_cleanable_dirty_ratio: 0.01,
        ..LogConfig::default()
    }
}

fn budget(bytes_per_second: u64) -> CleanerBudget {
    CleanerBudget {
        throttle: IoThrottle::new(bytes_per_second),
        dedupe_buffer_bytes: 1 << 20,
    }
}

/// One record as a test wrote it: offset, key, value (`None`: a tombstone).
type Written = (i64, String, Option<String>);

/// `batch` with its record section compressed by `codec`.
fn compressed(batch: &Bytes, codec: Compression) -> Bytes {
    let id = CODECS.iter().position(|&c| c == codec).unwrap() as i16;
    let mut out = batch[..HEADER_BYTES].to_vec();
    out.extend_from_slice(&codec::compress(codec, &batch[HEADER_BYTES..]).unwrap());
    let length = (out.len() - 12) as i32;
    out[8..12].copy_from_slice(&length.to_be_bytes());
    let attributes = i16::from_be_bytes([out[21], out[22]]) | id;
    out[21..23].copy_from_slice(&attributes.to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(out)
}

/// Writes `rounds` batches, each a version of every key (codecs in turn); the last round
/// deletes the first three keys.
async fn write_versions(log: &Log, rounds: usize, written: &mut Vec<Written>) {
    for round in 0..rounds {
        let last = round + 1 == rounds;
        let recs: Vec<NewRecord> = (0..KEYS)
            .map(|k| NewRecord {
                key: Some(Bytes::from(format!("key-{k}"))),
                value: (!(last && k < 3))
                    .then(|| Bytes::from(format!("v{round}-{k}-{}", "x".repeat(40)))),
                timestamp_ms: 1_000 + round as i64,
                headers: vec![(
                    Bytes::from_static(b"h"),
                    Some(Bytes::from(format!("{round}"))),
                )],
            })
            .collect();
        let batch = compressed(&build_batch(&recs, ProducerFields::NONE), CODECS[round % 5]);
        let valid = log.validate(&batch, BatchOrigin::Client).unwrap();
        let info = log.append(valid, 0).await.unwrap();
        for (i, r) in recs.iter().enumerate() {
            written.push((
                info.base_offset + i as i64,
                String::from_utf8(r.key.clone().unwrap().to_vec()).unwrap(),
                r.value
                    .as_ref()
                    .map(|v| String::from_utf8(v.to_vec()).unwrap()),
            ));
        }
    }
}

/// Every record readable from the log start, with its offset.
async fn read_records(log: &Log) -> Vec<Written> {
    let mut out = Vec::new();
    let mut at = log.log_start_offset();
    let end = log.log_end_offset();
    while at < end {
        let r = log.read(at, 1 << 20, end).await.unwrap();
        if r.bytes == 0 {
            break;
        }
        let bytes = r.to_bytes().await.unwrap();
        for b in crate::batch::split_batches(&bytes).unwrap() {
            let h = crate::batch::validate(&b, usize::MAX, BatchOrigin::Replica).unwrap();
            let section = Bytes::from(record_section(&b, 1 << 24).unwrap());
            for rec in decode_record_section(&h, &section).unwrap() {
                out.push((
                    rec.offset,
                    String::from_utf8(rec.key.unwrap().to_vec()).unwrap(),
                    rec.value.map(|v| String::from_utf8(v.to_vec()).unwrap()),
                ));
            }
        }
        at = r.next_offset;
    }
    out
}

/// What compaction must leave: below `cleaned_to`, only each key's latest record (tombstones
/// too, unless `tombstones_gone_below` passes them); everything from `cleaned_to` on.
fn expected(written: &[Written], cleaned_to: i64, tombstones_gone_below: i64) -> Vec<Written> {
    let mut latest: HashMap<&str, i64> = HashMap::new();
    for (o, k, _) in written.iter().filter(|w| w.0 < cleaned_to) {
        latest.insert(k, *o);
    }
    written
        .iter()
        .filter(|(o, k, v)| {
            *o >= cleaned_to
                || (latest[k.as_str()] == *o && (v.is_some() || *o >= tombstones_gone_below))
        })
        .cloned()
        .collect()
}

fn each_mode(f: impl Fn(&Path, IoMode) + Copy) {
    for mode in MODES {
        let dir = tempfile::tempdir().unwrap();
        f(dir.path(), mode);
    }
}

#[test]
fn only_the_latest_per_key_remains_with_its_offset_and_tombstones_go_after_a_pass() {
    each_mode(|dir, mode| {
        let dir = dir.to_path_buf();
        run(|| async move {
            let log = open(&dir, mode, compacted_config()).await;
            let mut written = Vec::new();
            write_versions(&log, 80, &mut written).await;
            log.flush().await.unwrap();
            let before = log.segment_count();
            assert!(before > 5, "the writes rolled segments");
            let first = log
                .clean(&budget(u64::MAX), i64::MAX, 10)
                .await
                .unwrap()
                .unwrap();
            let cleaned_to = first.first_dirty;
            assert!(
                cleaned_to > 0 && first.bytes_written < first.bytes_read / 4,
                "{first:?}"
            );
            assert_eq!(read_records(&log).await, expected(&written, cleaned_to, 0));
            // The next pass (delete.retention.ms = 0) removes the tombstones it cleaned before.
            let second = log
                .clean(&budget(u64::MAX), i64::MAX, 11)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(second.first_dirty, cleaned_to);
            let want = expected(&written, cleaned_to, cleaned_to);
            assert_eq!(read_records(&log).await, want);
            assert!(log.segment_count() < before, "small cleaned segments merge");
            assert!(
                log.clean(&budget(u64::MAX), i64::MAX, 12)
                    .await
                    .unwrap()
                    .is_none(),
                "nothing due"
            );
            // The same after a restart, and appends continue at the same offsets.
            let end = log.log_end_offset();
            log.close().await.unwrap();
            let log = open(&dir, mode, compacted_config()).await;
            assert_eq!(read_records(&log).await, want);
            assert_eq!(log.log_end_offset(), end);
            let mut more = Vec::new();
            write_versions(&log, 1, &mut more).await;
            assert_eq!(more[0].0, end);
            log.close().await.unwrap();
        });
    });
}

#[test]
fn a_small_offset_map_cleans_in_several_passes() {
    each_mode(|dir, mode| {
        let dir = dir.to_path_buf();
        run(|| async move {
            let config = LogConfig {
                segment_bytes: 1024,
                ..compacted_config()
            };
            let log = open(&dir, mode, config).await;
            let mut written = Vec::new();
            // Unique keys: each segment holds a few; the map holds about one segment's worth.
            for i in 0..60 {
                let recs = vec![NewRecord {
                    key: Some(Bytes::from(format!("unique-{i}"))),
                    value: Some(Bytes::from("y".repeat(300))),
                    timestamp_ms: i,
                    headers: vec![],
                }];
                let valid = log
                    .validate(
                        &build_batch(&recs, ProducerFields::NONE),
                        BatchOrigin::Client,
                    )
                    .unwrap();
                let info = log.append(valid, 0).await.unwrap();
                written.push((
                    info.base_offset,
                    format!("unique-{i}"),
                    Some("y".repeat(300)),
                ));
            }
            log.flush().await.unwrap();
            let small = CleanerBudget {
                throttle: IoThrottle::new(u64::MAX),
                dedupe_buffer_bytes: 4 * 48,
            };
            let first = log.clean(&small, i64::MAX, 10).await.unwrap().unwrap();
            let second = log.clean(&small, i64::MAX, 11).await.unwrap().unwrap();
            assert!(
                second.first_dirty > first.first_dirty,
                "{first:?} then {second:?}"
            );
            assert_eq!(read_records(&log).await, written, "unique keys all stay");
            log.close().await.unwrap();
        });
    });
}

#[test]
fn close_stops_a_pass_and_nothing_is_lost_while_appends_and_reads_go_on() {
    each_mode(|dir, mode| {
        let dir = dir.to_path_buf();
        run(|| async move {
            let log = open(&dir, mode, compacted_config()).await;
            let mut written = Vec::new();
            write_versions(&log, 30, &mut written).await;
            log.flush().await.unwrap();
            // 20 KB/s: the pass takes seconds.
            let pass = {
                let log = log.clone();
                glommio::spawn_local(async move { log.clean(&budget(20_000), i64::MAX, 10).await })
            };
            glommio::timer::sleep(std::time::Duration::from_millis(50)).await;
            // The log serves while the pass runs.
            write_versions(&log, 1, &mut written).await;
            assert_eq!(read_records(&log).await, written);
            log.close().await.unwrap();
            assert!(pass.await.unwrap().is_none(), "the pass stopped");
            let log = open(&dir, mode, compacted_config()).await;
            assert_eq!(read_records(&log).await, written);
            let names: Vec<String> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            assert!(!names.iter().any(|n| n.ends_with(".cleaned")), "{names:?}");
            log.close().await.unwrap();
        });
    });
}

/// A crash after the cleaned files were written: without the manifest the old segments stay;
/// with it, the swap completes on open.
#[test]
fn a_crash_around_the_swap_leaves_the_old_or_the_new_log() {
    each_mode(|root, mode| {
        let root = root.to_path_buf();
        run(|| async move {
            let before_dir = root.join("before");
            let log = open(&before_dir, mode, compacted_config()).await;
            let mut written = Vec::new();
            write_versions(&log, 30, &mut written).await;
            log.close().await.unwrap();
            let after_dir = root.join("after");
            copy_dir(&before_dir, &after_dir);
            // Runs merge up to segment.bytes: with a larger one, several segments make one run.
            let merging = LogConfig {
                segment_bytes: 1 << 16,
                ..compacted_config()
            };
            let log = open(&after_dir, mode, merging).await;
            let outcome = log
                .clean(&budget(u64::MAX), i64::MAX, 10)
                .await
                .unwrap()
                .unwrap();
            let cleaned = read_records(&log).await;
            assert_ne!(cleaned, written);
            let after_bases = segment_bases(&after_dir);
            log.close().await.unwrap();
            // The crash states: the old segments plus the first cleaned run's files.
            let before_bases = segment_bases(&before_dir);
            let run_base = after_bases[0];
            let run_end = after_bases[1];
            let replaced: Vec<i64> = before_bases
                .iter()
                .copied()
                .filter(|&b| b < run_end)
                .collect();
            assert!(replaced.len() > 1 && outcome.segments_before > outcome.segments_after);
            for (name, with_manifest) in [("undecided", false), ("decided", true)] {
                let crashed = root.join(name);
                copy_dir(&before_dir, &crashed);
                let stem = crate::log::segment::file_stem(run_base);
                for ext in ["log", "index", "timeindex"] {
                    std::fs::copy(
                        after_dir.join(format!("{stem}.{ext}")),
                        crashed.join(format!("{stem}.{ext}.cleaned")),
                    )
                    .unwrap();
                }
                if with_manifest {
                    let text: String = std::iter::once(run_base)
                        .chain(replaced.iter().copied())
                        .map(|b| format!("{b}\n"))
                        .collect();
                    std::fs::write(crashed.join(swap::MANIFEST), text).unwrap();
                }
                let log = open(&crashed, mode, compacted_config()).await;
                let got = read_records(&log).await;
                if with_manifest {
                    // Only the first run swapped: its records are the cleaned ones, the rest old.
                    let first_run_end = run_end;
                    let mut want: Vec<Written> = cleaned
                        .iter()
                        .filter(|w| w.0 < first_run_end)
                        .cloned()
                        .collect();
                    want.extend(written.iter().filter(|w| w.0 >= first_run_end).cloned());
                    assert_eq!(got, want);
                } else {
                    assert_eq!(got, written);
                }
                assert!(!crashed.join(swap::MANIFEST).exists());
                log.close().await.unwrap();
            }
        });
    });
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

fn segment_bases(dir: &Path) -> Vec<i64> {
    let mut bases: Vec<i64> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            name.strip_suffix(".log")?.parse().ok()
        })
        .collect();
    bases.sort_unstable();
    bases
}

#[test]
fn rewritten_batches_keep_their_identity() {
    let recs: Vec<NewRecord> = (0..4)
        .map(|i| NewRecord {
            key: Some(Bytes::from(format!("k{}", i % 2))),
            value: Some(Bytes::from(format!("v{i}"))),
            timestamp_ms: 100 + i,
            headers: vec![],
        })
        .collect();
    for codec in CODECS {
        let batch = compressed(&build_batch(&recs, ProducerFields::NONE), codec);
        let h = BatchHeader::parse(&batch).unwrap();
        let mut map = offset_map::OffsetMap::with_memory(1 << 10, 100);
        let no_aborts = transactions::AbortedRanges::default();
        assert!(rewrite::for_each_key(&batch, &h, &no_aborts, |k, o| map.put(k, o)));
        let rule = rewrite::Retention {
            map: &map,
            tombstone_horizon: 0,
        };
        let rewrite::Filtered::Rewritten(out) = rewrite::filter_batch(&batch, &h, &rule) else {
            panic!("{codec:?}: two of four records are superseded");
        };
        let got = crate::batch::validate(&out, usize::MAX, BatchOrigin::Replica).unwrap();
        assert_eq!(got.record_count, 2);
        assert_eq!(
            (
                got.base_offset,
                got.last_offset_delta,
                got.base_timestamp,
                got.max_timestamp,
                got.attributes
            ),
            (
                h.base_offset,
                h.last_offset_delta,
                h.base_timestamp,
                h.max_timestamp,
                h.attributes
            ),
            "{codec:?}"
        );
        let section = Bytes::from(record_section(&out, 1 << 20).unwrap());
        let kept = decode_record_section(&got, &section).unwrap();
        assert_eq!(
            kept.iter()
                .map(|r| (r.offset, r.timestamp_ms))
                .collect::<Vec<_>>(),
            vec![(2, 102), (3, 103)]
        );
    }
}

/// Rounds of ten records: five keys only that round has, five shared by every round.
async fn write_mixed(log: &Log, rounds: usize) {
    for round in 0..rounds {
        let recs: Vec<NewRecord> = (0..10)
            .map(|k| NewRecord {
                key: Some(Bytes::from(if k < 5 {
                    format!("u-{round}-{k}")
                } else {
                    format!("s-{k}")
                })),
                value: Some(Bytes::from(format!("v{round}-{k}-{}", "x".repeat(40)))),
                timestamp_ms: 1_000 + round as i64,
                headers: vec![],
            })
            .collect();
        let valid = log
            .validate(
                &build_batch(&recs, ProducerFields::NONE),
                BatchOrigin::Client,
            )
            .unwrap();
        log.append(valid, 0).await.unwrap();
    }
}

async fn offsets_in(r: &crate::log::ReadResult) -> Vec<i64> {
    let bytes = r.to_bytes().await.unwrap();
    let mut out = Vec::new();
    for b in crate::batch::split_batches(&bytes).unwrap() {
        let h = crate::batch::validate(&b, usize::MAX, BatchOrigin::Replica).unwrap();
        let section = Bytes::from(record_section(&b, 1 << 24).unwrap());
        out.extend(
            decode_record_section(&h, &section)
                .unwrap()
                .iter()
                .map(|r| r.offset),
        );
    }
    out
}

/// A read that found its segment before a swap and ends after it must not leave a position in
/// the old file for the next read from where it stopped (the cleaned segment keeps the base).
///
/// With a budget of one open segment file the read's file is closed before the swap, and the
/// swap must pin it so the read still finds the bytes it located.
#[test]
fn a_read_spanning_a_swap_leaves_no_stale_position() {
    for (max_bytes, open_files) in [(800, usize::MAX), (3000, usize::MAX), (800, 1)] {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().to_path_buf();
        run(move || async move {
            crate::log::set_open_segment_files_max(open_files);
            let config = LogConfig {
                index_interval_bytes: 1024,
                ..compacted_config()
            };
            let log = open(&dir, IoMode::Buffered, config).await;
            write_mixed(&log, 80).await;
            log.flush().await.unwrap();
            let end = log.log_end_offset();
            let base = log.inner.state.borrow().segments[1].base_offset;
            let before = log.read(base, max_bytes, end).await.unwrap();
            let before = before.to_bytes().await.unwrap();
            let view = crate::log::read::segment_view(&log.inner, base, end).unwrap();
            // The read took the segment before the clean, and opens its file after it.
            log.clean(&budget(u64::MAX), i64::MAX, 10)
                .await
                .unwrap()
                .unwrap();
            let view = view.open().await.unwrap();
            let first = crate::log::read::read_segment(&log.inner, view, base, max_bytes, end)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(
                first.to_bytes().await.unwrap(),
                before,
                "the read serves the segment it found, not the cleaned file at its path"
            );
            let next = first.next_offset;
            let retained: Vec<i64> = read_records(&log).await.iter().map(|w| w.0).collect();
            let got = offsets_in(&log.read(next, 1 << 20, end).await.unwrap()).await;
            let want: Vec<i64> = retained.iter().copied().filter(|&o| o >= next).collect();
            assert!(
                !got.is_empty() && want.starts_with(&got),
                "read({next}): {got:?}, retained from there {:?}",
                &want[..want.len().min(10)]
            );
            log.close().await.unwrap();
        });
    }
}

/// A run whose records all went leaves an empty segment; it keeps a timestamp, so time
/// retention of a compact,delete topic still passes it.
#[test]
fn emptied_segments_still_expire_by_time() {
    each_mode(|dir, mode| {
        let dir = dir.to_path_buf();
        run(|| async move {
            let config = LogConfig {
                cleanup_policy: CleanupPolicy::CompactAndDelete,
                retention_ms: 10_000,
                ..compacted_config()
            };
            let log = open(&dir, mode, config.clone()).await;
            let mut written = Vec::new();
            write_versions(&log, 80, &mut written).await;
            log.flush().await.unwrap();
            log.clean(&budget(u64::MAX), i64::MAX, 10)
                .await
                .unwrap()
                .unwrap();
            log.close().await.unwrap();
            let log = open(&dir, mode, config).await;
            let before = log.segment_count();
            let r = log.apply_retention(1_000_000_000).await.unwrap();
            assert_eq!(
                r.deleted_segments, before,
                "{r:?}: everything is past retention.ms"
            );
            log.close().await.unwrap();
        });
    });
}

/// Truncating into a segment whose tail compaction removed ends the log at the offset at the
/// latest, and appends continue there.
#[test]
fn truncation_into_a_compacted_tail_ends_the_log_there() {
    each_mode(|dir, mode| {
        let dir = dir.to_path_buf();
        run(|| async move {
            let log = open(&dir, mode, compacted_config()).await;
            let mut written = Vec::new();
            write_versions(&log, 80, &mut written).await;
            log.flush().await.unwrap();
            log.clean(&budget(u64::MAX), i64::MAX, 10)
                .await
                .unwrap()
                .unwrap();
            let (base, next) = {
                let st = log.inner.state.borrow();
                (st.segments[1].base_offset, st.segments[1].next_offset)
            };
            assert!(next > base + 1);
            log.truncate_to(base + 1).await.unwrap();
            assert!(
                log.log_end_offset() <= base + 1,
                "end {}",
                log.log_end_offset()
            );
            let end = log.log_end_offset();
            let mut more = Vec::new();
            write_versions(&log, 1, &mut more).await;
            assert_eq!(more[0].0, end);
            log.close().await.unwrap();
        });
    });
}
