//! Behaviour of the log, run against both I/O modes.

use super::*;
use crate::batch::build::{build_batch, NewRecord, ProducerFields};
use crate::batch::HEADER_BYTES;
use crate::types;

pub(crate) use crate::testing::run_local as run;

pub(crate) fn records(count: usize, value_bytes: usize, ts: i64) -> Bytes {
    let recs: Vec<NewRecord> = (0..count)
        .map(|i| NewRecord {
            key: Some(Bytes::from(format!("key-{i}"))),
            value: Some(Bytes::from(vec![(i % 251) as u8; value_bytes])),
            timestamp_ms: ts + i as i64,
            headers: vec![],
        })
        .collect();
    build_batch(&recs, ProducerFields::NONE)
}

pub(crate) async fn open(dir: &Path, mode: IoMode, config: LogConfig) -> Log {
    let cache = (mode == IoMode::Direct).then(|| BatchCache::new(8 << 20));
    Log::open(
        dir,
        LogOptions {
            config,
            io_mode: mode,
            writer: Default::default(),
            cache,
        },
    )
    .await
    .expect("open log")
}

pub(crate) async fn append(log: &Log, batch: &Bytes) -> AppendInfo {
    let valid = log
        .validate(batch, BatchOrigin::Client)
        .expect("valid batch");
    log.append(valid, 0).await.expect("append")
}

/// Reads everything from `from` to the end, batch by batch, as bytes.
pub(crate) async fn read_all(log: &Log, from: i64) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut at = from;
    let end = log.log_end_offset();
    while at < end {
        let r = log.read(at, 1 << 20, end).await.expect("read");
        assert!(r.next_offset > at, "a read makes progress");
        let bytes = r.to_bytes().await.expect("chunks readable");
        assert_eq!(bytes.len() as u64, r.bytes);
        out.extend(batch::split_batches(&bytes).expect("whole batches"));
        at = r.next_offset;
    }
    out
}

/// The batch as the log stores it: stamped with its offset and the epoch.
pub(crate) fn stamped(batch: &Bytes, base: i64, epoch: i32) -> Bytes {
    let mut v = batch.to_vec();
    let prefix = batch::stamp(batch, base, epoch);
    v[..16].copy_from_slice(&prefix);
    Bytes::from(v)
}

macro_rules! both_modes {
    ($name:ident, $body:expr) => {
        mod $name {
            use super::*;
            #[test]
            fn buffered() {
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("topic-0");
                run(|| $body(path, IoMode::Buffered));
            }
            #[test]
            fn direct() {
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("topic-0");
                run(|| $body(path, IoMode::Direct));
            }
        }
    };
}

both_modes!(
    append_assigns_offsets_and_reads_back_identical_bytes,
    |dir: PathBuf, mode| async move {
        let log = open(&dir, mode, LogConfig::default()).await;
        let a = records(3, 100, 1000);
        let b = records(5, 200, 2000);
        assert_eq!(append(&log, &a).await.base_offset, 0);
        let info = append(&log, &b).await;
        assert_eq!((info.base_offset, info.last_offset), (3, 7));
        assert_eq!(log.log_end_offset(), 8);
        let got = read_all(&log, 0).await;
        assert_eq!(got, vec![stamped(&a, 0, 0), stamped(&b, 3, 0)]);
        // A read from inside a batch starts with the batch that holds the offset.
        let r = log.read(5, 1 << 20, 8).await.unwrap();
        let first = batch::BatchHeader::parse(&r.to_bytes().await.unwrap()).unwrap();
        assert_eq!(first.base_offset, 3);
        assert_eq!(r.next_offset, 8);
        // At the end: nothing, and no error. Beyond it: out of range.
        assert!(log.read(8, 1 << 20, 8).await.unwrap().chunks.is_empty());
        assert!(matches!(
            log.read(9, 1 << 20, 9).await,
            Err(Error::OffsetOutOfRange { .. })
        ));
        log.close().await.unwrap();
    }
);

both_modes!(
    reads_return_whole_batches_within_max_bytes,
    |dir: PathBuf, mode| async move {
        let log = open(&dir, mode, LogConfig::default()).await;
        let batches: Vec<Bytes> = (0..20).map(|i| records(2, 300 + i * 10, 5000)).collect();
        for b in &batches {
            append(&log, b).await;
        }
        let end = log.log_end_offset();
        let r = log.read(0, 1500, end).await.unwrap();
        let got = batch::split_batches(&r.to_bytes().await.unwrap()).unwrap();
        assert!(r.bytes <= 1500, "within max_bytes");
        assert!(got.len() >= 2);
        assert_eq!(r.next_offset, 2 * got.len() as i64);
        // A first batch larger than max_bytes still comes back whole (KIP-74).
        let r = log.read(0, 10, end).await.unwrap();
        assert_eq!(r.bytes as usize, batches[0].len());
        // The upper bound (a high watermark) is never passed.
        let r = log.read(0, 1 << 20, 6).await.unwrap();
        assert_eq!(r.next_offset, 6);
        assert_eq!(
            batch::split_batches(&r.to_bytes().await.unwrap())
                .unwrap()
                .len(),
            3
        );
        log.close().await.unwrap();
    }
);

both_modes!(
    segments_roll_by_size_and_reads_cross_them,
    |dir: PathBuf, mode| async move {
        let config = LogConfig {
            segment_bytes: 4096,
            index_interval_bytes: 512,
            ..LogConfig::default()
        };
        let log = open(&dir, mode, config.clone()).await;
        let mut written = Vec::new();
        for i in 0..60 {
            let b = records(1 + i % 3, 150, 10_000 + i as i64);
            let info = append(&log, &b).await;
            written.push(stamped(&b, info.base_offset, 0));
        }
        assert!(
            log.segment_count() > 5,
            "rolled: {} segments",
            log.segment_count()
        );
        for name in log.segment_bases() {
            let stem = segment::file_stem(name);
            for ext in ["log", "index", "timeindex"] {
                assert!(
                    dir.join(format!("{stem}.{ext}")).exists(),
                    "{stem}.{ext} exists"
                );
            }
        }
        assert_eq!(read_all(&log, 0).await, written);
        log.close().await.unwrap();
        // Reopening finds every batch, and appends continue after them.
        let log = open(&dir, mode, config).await;
        assert_eq!(read_all(&log, 0).await, written);
        let end = log.log_end_offset();
        assert_eq!(append(&log, &records(1, 10, 1)).await.base_offset, end);
        log.close().await.unwrap();
    }
);

both_modes!(
    retention_deletes_whole_old_segments,
    |dir: PathBuf, mode| async move {
        let config = LogConfig {
            segment_bytes: 2048,
            ..LogConfig::default()
        };
        let log = open(&dir, mode, config.clone()).await;
        let old = types::now_ms() - 10 * 86_400_000;
        for i in 0..30 {
            append(&log, &records(1, 400, old + i)).await;
        }
        let before = log.segment_count();
        // A reader holding a range of the oldest segment keeps it readable after deletion.
        let held = log.read(0, 1 << 20, 1).await.unwrap();
        let by_time = log.apply_retention(types::now_ms()).await.unwrap();
        assert!(by_time.deleted_segments >= before - 1, "{by_time:?}");
        assert_eq!(
            log.segment_count(),
            1,
            "expired active segment rolled and deleted too"
        );
        assert_eq!(log.log_start_offset(), 30);
        assert!(!held.to_bytes().await.unwrap().is_empty());
        assert!(matches!(
            log.read(0, 100, 30).await,
            Err(Error::OffsetOutOfRange { .. })
        ));
        // By size: new data, the oldest segments go until the log fits retention.bytes.
        let now = types::now_ms();
        for i in 0..30 {
            append(&log, &records(1, 400, now + i)).await;
        }
        log.set_config(LogConfig {
            retention_bytes: 3000,
            ..config
        });
        let by_size = log.apply_retention(now).await.unwrap();
        assert!(by_size.deleted_segments > 0);
        assert!(log.size_bytes() <= 3000 + 2048, "size {}", log.size_bytes());
        assert!(log.log_start_offset() > 30);
        assert_eq!(append(&log, &records(1, 1, now)).await.base_offset, 60);
        log.close().await.unwrap();
    }
);

both_modes!(
    truncation_cuts_batches_and_appends_continue,
    |dir: PathBuf, mode| async move {
        let config = LogConfig {
            segment_bytes: 3000,
            ..LogConfig::default()
        };
        let log = open(&dir, mode, config.clone()).await;
        let mut written = Vec::new();
        for i in 0..20 {
            let b = records(2, 300, 1000 + i);
            let info = append(&log, &b).await;
            written.push(stamped(&b, info.base_offset, 0));
        }
        // Offset 13 is inside the batch [12, 13]: the whole batch goes.
        log.truncate_to(13).await.unwrap();
        assert_eq!(log.log_end_offset(), 12);
        assert_eq!(read_all(&log, 0).await, written[..6].to_vec());
        let b = records(1, 50, 99);
        assert_eq!(append(&log, &b).await.base_offset, 12);
        log.close().await.unwrap();
        let log = open(&dir, mode, config).await;
        let mut expect = written[..6].to_vec();
        expect.push(stamped(&b, 12, 0));
        assert_eq!(read_all(&log, 0).await, expect);
        log.truncate_fully_and_start_at(100).await.unwrap();
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (100, 100));
        assert_eq!(append(&log, &b).await.base_offset, 100);
        log.close().await.unwrap();
    }
);

both_modes!(
    timestamps_find_the_first_batch_at_or_after,
    |dir: PathBuf, mode| async move {
        let config = LogConfig {
            segment_bytes: 4096,
            index_interval_bytes: 256,
            ..LogConfig::default()
        };
        let log = open(&dir, mode, config.clone()).await;
        for i in 0..40i64 {
            append(&log, &records(2, 100, 1_000_000 + i * 100)).await;
        }
        let end = log.log_end_offset();
        let found = log
            .find_batch_by_timestamp(1_000_000 + 1250, end)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            found.header.base_offset, 26,
            "batch 13 holds timestamps 1300 and 1301"
        );
        assert!(
            log.find_batch_by_timestamp(0, end)
                .await
                .unwrap()
                .unwrap()
                .header
                .base_offset
                == 0
        );
        assert!(log
            .find_batch_by_timestamp(9_999_999, end)
            .await
            .unwrap()
            .is_none());
        assert_eq!(log.max_timestamp().map(|m| m.0), Some(1_000_000 + 3901));
        log.close().await.unwrap();
        let log = open(&dir, mode, config).await;
        let found = log
            .find_batch_by_timestamp(1_000_000 + 1250, end)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            found.header.base_offset, 26,
            "after reopening, from the time index"
        );
        assert_eq!(log.max_timestamp().map(|m| m.0), Some(1_000_000 + 3901));
        log.close().await.unwrap();
    }
);

both_modes!(
    bad_batches_are_refused_and_change_nothing,
    |dir: PathBuf, mode| async move {
        let config = LogConfig {
            max_message_bytes: 2000,
            ..LogConfig::default()
        };
        let log = open(&dir, mode, config).await;
        append(&log, &records(1, 10, 1)).await;
        let good = records(2, 50, 2);
        let mut bad_crc = good.to_vec();
        *bad_crc.last_mut().unwrap() ^= 1;
        let mut bad_magic = good.to_vec();
        bad_magic[16] = 1;
        let cut = good.slice(..good.len() - 3);
        let cases = [
            Bytes::from(bad_crc),
            Bytes::from(bad_magic),
            cut,
            records(1, 3000, 3),
            Bytes::from(vec![0u8; HEADER_BYTES - 1]),
        ];
        for case in cases {
            assert!(
                matches!(
                    log.validate(&case, BatchOrigin::Client),
                    Err(Error::InvalidBatch(_))
                ),
                "refused"
            );
        }
        assert_eq!(log.log_end_offset(), 1);
        assert_eq!(read_all(&log, 0).await.len(), 1);
        log.close().await.unwrap();
    }
);

both_modes!(
    flush_messages_one_syncs_before_acknowledging,
    |dir: PathBuf, mode| async move {
        let config = LogConfig {
            flush_messages: 1,
            ..LogConfig::default()
        };
        let log = open(&dir, mode, config).await;
        let before = log.stats().fdatasyncs.get();
        for _ in 0..5 {
            append(&log, &records(1, 10, 1)).await;
            assert_eq!(
                log.flushed_offset(),
                log.log_end_offset(),
                "acknowledged only when durable"
            );
        }
        assert!(log.stats().fdatasyncs.get() >= before + 5);
        log.close().await.unwrap();
    }
);

both_modes!(
    concurrent_appends_are_numbered_in_order,
    |dir: PathBuf, mode| async move {
        let log = open(&dir, mode, LogConfig::default()).await;
        let tasks: Vec<_> = (0..200)
            .map(|i| {
                let log = log.clone();
                glommio::spawn_local(async move {
                    let b = records(1 + i % 4, 64, i as i64);
                    let info = append(&log, &b).await;
                    (info, b)
                })
            })
            .collect();
        let mut infos = Vec::new();
        for t in tasks {
            infos.push(t.await);
        }
        infos.sort_by_key(|(i, _)| i.base_offset);
        let mut expect_next = 0;
        for (info, b) in &infos {
            assert_eq!(info.base_offset, expect_next, "contiguous offsets");
            let h = batch::BatchHeader::parse(b).unwrap();
            expect_next = info.base_offset + h.offset_count();
        }
        let got = read_all(&log, 0).await;
        let want: Vec<Bytes> = infos
            .iter()
            .map(|(i, b)| stamped(b, i.base_offset, 0))
            .collect();
        assert_eq!(got, want);
        log.close().await.unwrap();
    }
);

both_modes!(
    leader_epochs_are_recorded_and_answer_kip_101,
    |dir: PathBuf, mode| async move {
        let log = open(&dir, mode, LogConfig::default()).await;
        let b = records(2, 10, 1);
        let valid = log.validate(&b, BatchOrigin::Client).unwrap();
        log.append(valid.clone(), 0).await.unwrap();
        log.append(valid.clone(), 3).await.unwrap();
        log.append(valid.clone(), 3).await.unwrap();
        log.append(valid, 5).await.unwrap();
        assert_eq!(log.end_offset_for_epoch(0), Some((0, 2)));
        assert_eq!(log.end_offset_for_epoch(4), Some((3, 6)));
        assert_eq!(log.end_offset_for_epoch(5), Some((5, 8)));
        let r = log.read(2, 1 << 20, 8).await.unwrap();
        let h = batch::BatchHeader::parse(&r.to_bytes().await.unwrap()).unwrap();
        assert_eq!(h.partition_leader_epoch, 3, "epoch stamped in place");
        log.close().await.unwrap();
        let log = open(&dir, mode, LogConfig::default()).await;
        assert_eq!(log.leader_epochs().len(), 3);
        log.truncate_to(4).await.unwrap();
        assert_eq!(log.end_offset_for_epoch(5), Some((3, 4)));
        log.close().await.unwrap();
    }
);

both_modes!(
    follower_appends_keep_the_leaders_offsets,
    |dir: PathBuf, mode| async move {
        let log = open(&dir, mode, LogConfig::default()).await;
        let mut v = records(3, 10, 1).to_vec();
        let prefix = batch::stamp(&v, 10, 2);
        v[..16].copy_from_slice(&prefix);
        let from_leader = Bytes::from(v);
        let valid = log.validate(&from_leader, BatchOrigin::Replica).unwrap();
        // A replica's log restarts where the leader's started.
        log.truncate_fully_and_start_at(10).await.unwrap();
        let info = log.append_as_follower(valid.clone()).await.unwrap();
        assert_eq!((info.base_offset, info.last_offset), (10, 12));
        assert!(
            log.append_as_follower(valid).await.is_err(),
            "offsets below the end refused"
        );
        assert_eq!(read_all(&log, 10).await, vec![from_leader]);
        log.close().await.unwrap();
    }
);

both_modes!(
    a_damaged_index_is_rebuilt,
    |dir: PathBuf, mode| async move {
        let config = LogConfig {
            segment_bytes: 4096,
            index_interval_bytes: 300,
            ..LogConfig::default()
        };
        let log = open(&dir, mode, config.clone()).await;
        let mut written = Vec::new();
        for i in 0..40 {
            let b = records(2, 120, 50_000 + i * 10);
            let info = append(&log, &b).await;
            written.push(stamped(&b, info.base_offset, 0));
        }
        let bases = log.segment_bases();
        log.close().await.unwrap();
        let first = segment::SegmentPaths::new(&dir, bases[0]);
        let second = segment::SegmentPaths::new(&dir, bases[1]);
        std::fs::write(&first.index, b"garbage!!").unwrap(); // not whole entries
        std::fs::remove_file(&second.index).unwrap(); // missing
        let mut t = std::fs::read(&second.time_index).unwrap();
        t.reverse(); // not ascending
        std::fs::write(&second.time_index, t).unwrap();
        let log = open(&dir, mode, config).await;
        assert_eq!(read_all(&log, 0).await, written);
        let end = log.log_end_offset();
        for target in [0i64, 7, 33, 51, 79] {
            let r = log.read(target, 1, end).await.unwrap();
            let h = batch::BatchHeader::parse(&r.to_bytes().await.unwrap()).unwrap();
            assert!(h.base_offset <= target && target <= h.last_offset());
        }
        let found = log
            .find_batch_by_timestamp(50_000 + 95, end)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(found.header.base_offset, 20);
        log.close().await.unwrap();
        assert_ne!(
            std::fs::read(&first.index).unwrap(),
            b"garbage!!",
            "rewritten"
        );
    }
);

both_modes!(
    a_torn_tail_is_cut_at_the_first_bad_byte,
    |dir: PathBuf, mode| async move {
        let log = open(&dir, mode, LogConfig::default()).await;
        let mut written = Vec::new();
        for i in 0..10 {
            let b = records(3, 200, i);
            let info = append(&log, &b).await;
            written.push(stamped(&b, info.base_offset, 0));
        }
        let size = log.size_bytes();
        let bases = log.segment_bases();
        // Simulate a crash: no close, so the recovery point is where the last flush put it.
        log.flush().await.unwrap();
        append(&log, &records(1, 10, 99)).await; // after the recovery point, then torn below
        drop(log);
        let path = segment::SegmentPaths::new(&dir, *bases.last().unwrap()).log;
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.truncate(size as usize);
        let partial = records(4, 300, 7);
        bytes.extend_from_slice(&partial[..partial.len() / 2]); // half a batch
        bytes.extend_from_slice(&[0xAB; 100]); // and garbage
        std::fs::write(&path, &bytes).unwrap();
        let log = open(&dir, mode, LogConfig::default()).await;
        assert_eq!(log.log_end_offset(), 30);
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            size,
            "cut at the first bad byte"
        );
        assert_eq!(read_all(&log, 0).await, written);
        assert_eq!(append(&log, &records(1, 10, 1)).await.base_offset, 30);
        log.close().await.unwrap();
    }
);

both_modes!(
    recovery_leaves_the_checkpoint_to_the_periodic_flush,
    |dir: PathBuf, mode| async move {
        let point_file = dir.join(checkpoint::FILE_NAME);
        let stored_at = || std::fs::metadata(&point_file).unwrap().modified().unwrap();
        // File times move by the kernel's tick: a pause longer than one makes a store visible.
        let pause = || std::thread::sleep(std::time::Duration::from_millis(30));
        let log = open(&dir, mode, LogConfig::default()).await;
        for i in 0..5 {
            append(&log, &records(3, 200, i)).await;
        }
        log.close().await.unwrap();
        let closed = stored_at();
        pause();
        // After a clean close: nothing to recover, nothing stored.
        let log = open(&dir, mode, LogConfig::default()).await;
        assert_eq!(stored_at(), closed, "reopened after a clean close");
        // Killed with a batch past the checkpoint: recovery reads and serves it, unflushed,
        // and leaves the point where it was until the periodic flush.
        append(&log, &records(1, 10, 99)).await;
        drop(log);
        pause();
        let log = open(&dir, mode, LogConfig::default()).await;
        assert_eq!(stored_at(), closed, "nothing stored at open");
        assert_eq!((log.log_end_offset(), log.flushed_offset()), (16, 15));
        assert_eq!(read_all(&log, 0).await.len(), 6);
        assert!(
            log.flush_if_due(0).await.unwrap(),
            "the recovered batch is due"
        );
        assert_eq!(log.flushed_offset(), 16);
        let flushed = stored_at();
        assert_ne!(flushed, closed, "a point past the recovered batch");
        drop(log);
        pause();
        // With no point at all the log is scanned whole, and the periodic flush stores one.
        std::fs::remove_file(&point_file).unwrap();
        let log = open(&dir, mode, LogConfig::default()).await;
        assert!(!point_file.exists(), "nothing stored at open");
        assert_eq!(read_all(&log, 0).await.len(), 6);
        assert!(log.flush_if_due(0).await.unwrap());
        assert!(point_file.exists(), "the periodic flush stores a point");
        let last = log.segment_bases().last().copied().unwrap();
        let size_before_last = log.size_bytes() - (records(1, 10, 99).len() as u64);
        log.close().await.unwrap();
        // The file lost its last batch below the stored point: the point moves back at open.
        let before = stored_at();
        pause();
        let segment_path = segment::SegmentPaths::new(&dir, last).log;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&segment_path)
            .unwrap();
        file.set_len(size_before_last).unwrap();
        let log = open(&dir, mode, LogConfig::default()).await;
        assert_eq!(log.log_end_offset(), 15);
        assert_ne!(stored_at(), before, "a point no further than the log");
        assert_eq!(log.flushed_offset(), 15);
        log.close().await.unwrap();
    }
);

both_modes!(
    sealed_segments_read_past_the_point_are_sealed_again_at_open,
    |dir: PathBuf, mode| async move {
        let config = || LogConfig {
            segment_bytes: 8192,
            index_interval_bytes: 1024,
            ..LogConfig::default()
        };
        let log = open(&dir, mode, config()).await;
        append(&log, &records(1, 1500, 1)).await;
        log.flush().await.unwrap();
        for i in 0..12 {
            append(&log, &records(1, 1500, i)).await;
        }
        let bases = log.segment_bases();
        assert!(bases.len() >= 3, "rolled: {bases:?}");
        log.flush().await.unwrap();
        // Killed with the recovery point lost and the first segment's index never written:
        // recovery reads every segment whole, past any point, and the sealed ones may hold
        // data only in the page cache.
        let log = {
            drop(log);
            let first = segment::SegmentPaths::new(&dir, bases[0]);
            std::fs::write(dir.join(checkpoint::FILE_NAME), []).unwrap();
            std::fs::File::create(&first.index).unwrap();
            open(&dir, mode, config()).await
        };
        assert_eq!(read_all(&log, 0).await.len(), 13);
        log.flush().await.unwrap();
        for &base in &bases[..bases.len() - 1] {
            let index = segment::SegmentPaths::new(&dir, base).index;
            assert!(
                std::fs::metadata(&index).unwrap().len() > 0,
                "the index of sealed segment {base} is written again"
            );
        }
        log.close().await.unwrap();
    }
);

both_modes!(
    corruption_below_the_recovery_point_is_reported_not_served,
    |dir: PathBuf, mode| async move {
        let config = LogConfig {
            segment_bytes: 2048,
            ..LogConfig::default()
        };
        let log = open(&dir, mode, config.clone()).await;
        for i in 0..12 {
            append(&log, &records(1, 300, i)).await;
        }
        let bases = log.segment_bases();
        log.close().await.unwrap();
        // Flip a byte inside the second batch of the first (sealed, trusted) segment.
        let path = segment::SegmentPaths::new(&dir, bases[0]).log;
        let mut bytes = std::fs::read(&path).unwrap();
        let first_len = batch::BatchHeader::parse(&bytes).unwrap().total_bytes();
        bytes[first_len + 100] ^= 0xFF;
        std::fs::write(&path, &bytes).unwrap();
        let log = open(&dir, mode, config).await;
        let end = log.log_end_offset();
        // The valid batch before it is served; the corrupt one is an error naming file and position.
        let r = log.read(0, 1 << 20, end).await.unwrap();
        assert_eq!(r.bytes as usize, first_len);
        match log.read(1, 1 << 20, end).await {
            Err(Error::Corrupt {
                path: p, position, ..
            }) => {
                assert_eq!(p, path);
                assert_eq!(position, first_len as u64);
            }
            other => panic!("expected corruption, got {other:?}"),
        }
        log.close().await.unwrap();
    }
);

both_modes!(
    segments_roll_by_age_and_flush_ms_syncs_old_data,
    |dir: PathBuf, mode| async move {
        let config = LogConfig {
            segment_ms: 30,
            flush_ms: 20,
            ..LogConfig::default()
        };
        let log = open(&dir, mode, config).await;
        append(&log, &records(1, 10, 1)).await;
        assert_eq!(log.segment_count(), 1);
        // Not yet due: nothing flushed by time.
        assert!(!log.flush_if_due(i64::MAX).await.unwrap());
        glommio::timer::sleep(std::time::Duration::from_millis(40)).await;
        assert!(
            log.flush_if_due(i64::MAX).await.unwrap(),
            "flush.ms elapsed"
        );
        assert_eq!(log.flushed_offset(), 1);
        append(&log, &records(1, 10, 2)).await;
        assert_eq!(
            log.segment_count(),
            2,
            "the first segment was older than segment.ms"
        );
        assert_eq!(log.segment_bases(), vec![0, 1]);
        log.close().await.unwrap();
    }
);

both_modes!(
    a_failed_write_fails_its_appends_and_leaves_the_log_as_it_was,
    |dir: PathBuf, mode| async move {
        let log = open(&dir, mode, LogConfig::default()).await;
        let a = records(2, 100, 1);
        append(&log, &a).await;
        let size = log.size_bytes();
        writer::faults::fail_next_writes(1);
        let valid = log
            .validate(&records(3, 100, 2), BatchOrigin::Client)
            .unwrap();
        let err = log.append(valid, 0).await.expect_err("the write fails");
        assert!(err.is_disk_full(), "{err}");
        assert_eq!(log.log_end_offset(), 2, "nothing moved");
        assert_eq!(log.size_bytes(), size);
        // Concurrent appends: a failing group fails; those after it are written after the end.
        writer::faults::fail_next_writes(1);
        let tasks: Vec<_> = (0..20)
            .map(|i| {
                let log = log.clone();
                glommio::spawn_local(async move {
                    let b = records(1, 300 + i, 10 + i as i64);
                    let valid = log.validate(&b, BatchOrigin::Client).unwrap();
                    log.append(valid, 0).await.map(|info| (info.base_offset, b))
                })
            })
            .collect();
        let mut ok = vec![(0i64, a.clone())];
        let mut failed = 0;
        for t in tasks {
            match t.await {
                Ok(x) => ok.push(x),
                Err(e) => {
                    assert!(e.is_disk_full());
                    failed += 1;
                }
            }
        }
        assert!(failed >= 1, "the injected failure hit a group");
        ok.sort_by_key(|(o, _)| *o);
        let want: Vec<Bytes> = ok.iter().map(|(o, b)| stamped(b, *o, 0)).collect();
        assert_eq!(
            read_all(&log, 0).await,
            want,
            "contiguous: only acknowledged batches"
        );
        log.close().await.unwrap();
        let log = open(&dir, mode, LogConfig::default()).await;
        assert_eq!(read_all(&log, 0).await, want, "and so after reopening");
        log.close().await.unwrap();
    }
);

/// Direct mode under concurrent appends of odd sizes: writes hold back their partial last block
/// for the next write, and after a reopen the file (no cache) holds every acknowledged batch.
#[test]
fn held_back_blocks_reach_the_file_with_every_acknowledged_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("held");
    run(|| async move {
        let log = open(&path, IoMode::Direct, LogConfig::default()).await;
        let tasks: Vec<_> = (0..600)
            .map(|i| {
                let log = log.clone();
                glommio::spawn_local(async move {
                    // 1..7 records of 333 bytes: batches end anywhere in a block.
                    let b = records(1 + i % 7, 333, i as i64);
                    let info = append(&log, &b).await;
                    (info, b)
                })
            })
            .collect();
        let mut acked = Vec::new();
        for t in tasks {
            acked.push(t.await);
        }
        assert!(
            log.stats().appends_carried.get() > 0,
            "some writes held their last block for the next one"
        );
        log.close().await.unwrap();
        acked.sort_by_key(|(i, _)| i.base_offset);
        let want: Vec<Bytes> = acked
            .iter()
            .map(|(i, b)| stamped(b, i.base_offset, 0))
            .collect();
        let reopened = Log::open(
            &path,
            LogOptions {
                config: LogConfig::default(),
                io_mode: IoMode::Direct,
                writer: Default::default(),
                cache: None,
            },
        )
        .await
        .unwrap();
        assert_eq!(read_all(&reopened, 0).await, want);
        reopened.close().await.unwrap();
    });
}

both_modes!(
    a_deleted_log_answers_deleted_to_reads_appends_and_a_racing_close,
    |dir: PathBuf, mode| async move {
        let config = LogConfig {
            segment_bytes: 4096,
            ..LogConfig::default()
        };
        let log = open(&dir, mode, config).await;
        for i in 0..40 {
            append(&log, &records(3, 200, i)).await;
        }
        assert!(log.segment_count() > 3, "several segments to delete");
        let end = log.log_end_offset();
        // Reads in flight while the log is deleted, and a shutdown's close racing the delete.
        let readers: Vec<_> = (0..8)
            .map(|_| {
                let log = log.clone();
                glommio::spawn_local(async move {
                    loop {
                        match log.read(0, 1 << 20, end).await {
                            Ok(r) => {
                                let _ = r.to_bytes().await;
                            }
                            Err(Error::Deleted(_)) => return,
                            Err(e) => panic!("a read of a deleted log: {e}"),
                        }
                        glommio::yield_if_needed().await;
                    }
                })
            })
            .collect();
        let deleting = {
            let log = log.clone();
            glommio::spawn_local(async move { log.delete().await })
        };
        let closing = {
            let log = log.clone();
            glommio::spawn_local(async move { log.close().await })
        };
        deleting.await.expect("deleted");
        closing
            .await
            .expect("a close racing the delete has nothing to keep");
        for r in readers {
            r.await;
        }
        assert!(matches!(
            log.read(0, 1 << 20, end).await,
            Err(Error::Deleted(_))
        ));
        let valid = log
            .validate(&records(1, 10, 0), BatchOrigin::Client)
            .unwrap();
        assert!(matches!(log.append(valid, 0).await, Err(Error::Deleted(_))));
        assert!(
            log.log_start_offset() >= 0,
            "the bookkeeping stays readable"
        );
        assert!(!dir.exists(), "the directory is gone");
    }
);

both_modes!(
    a_damaged_base_offset_is_reported_not_read_as_an_empty_range,
    |dir: PathBuf, mode| async move {
        let config = LogConfig {
            segment_bytes: 2048,
            ..LogConfig::default()
        };
        let log = open(&dir, mode, config.clone()).await;
        for i in 0..12 {
            append(&log, &records(1, 300, i)).await;
        }
        let bases = log.segment_bases();
        let end = log.log_end_offset();
        log.close().await.unwrap();
        // The CRC does not cover the base offset: 2^48 added to the first batch of the
        // second segment leaves it "valid" but far outside its segment.
        let path = segment::SegmentPaths::new(&dir, bases[1]).log;
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[1] ^= 0x01;
        std::fs::write(&path, &bytes).unwrap();
        let log = open(&dir, mode, config).await;
        assert_eq!(log.log_end_offset(), end);
        match log.read(bases[1], 1 << 20, end).await {
            Err(Error::Corrupt {
                path: p, position, ..
            }) => {
                assert_eq!((p, position), (path, 0));
            }
            other => panic!("expected corruption, got {other:?}"),
        }
        log.close().await.unwrap();
    }
);

both_modes!(
    the_log_start_moves_inside_a_segment_and_survives_a_restart,
    |dir: PathBuf, mode| async move {
        let config = LogConfig {
            segment_bytes: 2048,
            ..LogConfig::default()
        };
        let log = open(&dir, mode, config.clone()).await;
        for i in 0..12 {
            append(&log, &records(2, 300, i)).await;
        }
        let bases = log.segment_bases();
        assert!(bases.len() >= 3, "{bases:?}");
        // Inside the second segment: the first goes, the second stays.
        let start = bases[1] + 1;
        assert_eq!(log.advance_start_to(start).await.unwrap(), start);
        assert_eq!(log.log_start_offset(), start);
        assert_eq!(log.segment_bases()[0], bases[1]);
        let end = log.log_end_offset();
        assert!(matches!(
            log.read(start - 1, 1 << 20, end).await,
            Err(Error::OffsetOutOfRange { .. })
        ));
        // The batch holding the start is served whole, as Kafka serves it.
        let r = log.read(start, 1 << 20, end).await.unwrap();
        let first = batch::BatchHeader::parse(&r.to_bytes().await.unwrap()).unwrap();
        assert!(first.base_offset < start && first.last_offset() >= start);
        // Never backwards; never past the end.
        assert_eq!(log.advance_start_to(start - 1).await.unwrap(), start);
        log.close().await.unwrap();

        let log = open(&dir, mode, config.clone()).await;
        assert_eq!(log.log_start_offset(), start, "kept across a restart");
        assert_eq!(log.advance_start_to(end + 100).await.unwrap(), end);
        assert_eq!(log.segment_count(), 1, "every segment below the end went");
        assert!(log.read(end, 1 << 20, end).await.unwrap().chunks.is_empty());
        // Appends go on from the end.
        assert_eq!(append(&log, &records(1, 10, 99)).await.base_offset, end);
        log.close().await.unwrap();
        let log = open(&dir, mode, config).await;
        assert_eq!(log.log_start_offset(), end);
        assert_eq!(log.log_end_offset(), end + 1);
        log.close().await.unwrap();
    }
);

both_modes!(
    logs_with_more_segments_than_the_open_file_budget_serve_every_batch,
    |dir: PathBuf, mode| async move {
        // One open segment file for the whole thread: three logs of many segments each, so
        // nearly every append, read, roll and retention pass reopens a file the budget closed.
        set_open_segment_files_max(1);
        let config = LogConfig {
            segment_bytes: 2048,
            ..LogConfig::default()
        };
        let dirs: Vec<PathBuf> = (0..3).map(|i| dir.with_extension(i.to_string())).collect();
        let mut logs = Vec::new();
        for d in &dirs {
            logs.push(open(d, mode, config.clone()).await);
        }
        let mut written: Vec<Vec<Bytes>> = vec![Vec::new(); logs.len()];
        for i in 0..30 {
            for (log, w) in logs.iter().zip(&mut written) {
                let b = records(1, 400, 1000 + i);
                let info = append(log, &b).await;
                w.push(stamped(&b, info.base_offset, 0));
            }
        }
        for (log, w) in logs.iter().zip(&written) {
            assert!(log.inner.state.borrow().segments.len() > 5);
            assert_eq!(&read_all(log, 0).await, w);
            assert!(open_segment_files().0 <= 1, "the budget holds");
        }
        assert!(segment_file_reopens() > 0);
        // Retention deletes closed segments; truncation cuts a reopened active segment.
        logs[0].advance_start_to(20).await.unwrap();
        assert_eq!(read_all(&logs[0], 20).await, written[0][20..].to_vec());
        logs[1].truncate_to(25).await.unwrap();
        assert_eq!(read_all(&logs[1], 0).await, written[1][..25].to_vec());
        for log in &logs {
            log.close().await.unwrap();
        }
        // Reopened, with the same budget: recovery reads every segment.
        let log = open(&dirs[2], mode, config).await;
        assert_eq!(read_all(&log, 0).await, written[2]);
        log.close().await.unwrap();
        set_open_segment_files_max(usize::MAX);
    }
);

/// Where the last block a file maps ends (written data or reserved by fallocate), and its size.
/// Asked of the extent map (`FS_IOC_FIEMAP`) rather than read from `st_blocks`: ext4 counts
/// an extent tree's own blocks there too, and a file whose extents no longer fit in the inode
/// (reservations converted piece by piece) holds one such block beyond its data.
pub(super) fn mapped_end_and_size(path: &Path) -> (u64, u64) {
    use std::os::fd::AsRawFd;
    /// `struct fiemap` with room for the extents asked for (linux/fiemap.h).
    #[repr(C)]
    struct Fiemap {
        start: u64,
        length: u64,
        flags: u32,
        mapped_extents: u32,
        extent_count: u32,
        reserved: u32,
        extents: [FiemapExtent; EXTENTS],
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct FiemapExtent {
        logical: u64,
        physical: u64,
        length: u64,
        reserved64: [u64; 2],
        flags: u32,
        reserved: [u32; 3],
    }
    const EXTENTS: usize = 64;
    const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
    const FIEMAP_FLAG_SYNC: u32 = 1;
    const FIEMAP_EXTENT_LAST: u32 = 1;
    let file = std::fs::File::open(path).unwrap();
    let size = file.metadata().unwrap().len();
    let mut end = 0;
    let mut from = 0;
    loop {
        let mut map = Fiemap {
            start: from,
            length: u64::MAX - from,
            flags: FIEMAP_FLAG_SYNC,
            mapped_extents: 0,
            extent_count: EXTENTS as u32,
            reserved: 0,
            extents: [FiemapExtent::default(); EXTENTS],
        };
        // SAFETY: the ioctl fills `map`, which has room for `extent_count` extents.
        let done = unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP, &mut map) };
        assert_eq!(done, 0, "{path:?}: {}", std::io::Error::last_os_error());
        let mapped = &map.extents[..map.mapped_extents as usize];
        let Some(last) = mapped.last() else {
            return (end, size);
        };
        end = last.logical + last.length;
        if last.flags & FIEMAP_EXTENT_LAST != 0 || mapped.len() < EXTENTS {
            return (end, size);
        }
        from = end;
    }
}

/// The buffered writer reserves blocks ahead of the active segment's end (`reserve`), and a
/// sealed or closed segment holds no more than its data.
#[test]
fn blocks_reserved_ahead_go_when_the_segment_rolls_or_the_log_closes() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            segment_bytes: 1 << 20,
            ..LogConfig::default()
        };
        let log = open(dir.path(), IoMode::Buffered, config).await;
        let batch = records(20, 1000, 1);
        while log.segment_count() < 3 {
            append(&log, &batch).await;
        }
        let paths: Vec<PathBuf> = log
            .segment_bases()
            .into_iter()
            .map(|b| dir.path().join(format!("{}.log", segment::file_stem(b))))
            .collect();
        let whole_blocks = |size: u64| size.div_ceil(4096) * 4096;
        for sealed in &paths[..2] {
            let (mapped, size) = mapped_end_and_size(sealed);
            assert!(
                mapped <= whole_blocks(size),
                "{sealed:?}: blocks to {mapped} for {size}"
            );
        }
        let active = &paths[2];
        let (mapped, size) = mapped_end_and_size(active);
        assert!(
            mapped > whole_blocks(size),
            "reserved ahead: blocks to {mapped} for {size}"
        );
        log.close().await.unwrap();
        let (mapped, size) = mapped_end_and_size(active);
        assert!(
            mapped <= whole_blocks(size),
            "after close: blocks to {mapped} for {size}"
        );
    });
}
