//! Transactions in one partition: guards, markers, the last stable offset, aborted
//! transactions for READ_COMMITTED readers, and all of it rebuilt after a restart.

use super::*;
use crate::batch::build::{build_batch, build_transactional_batch, NewRecord, ProducerFields};
use crate::batch::control::Marker;
use crate::config::{IoMode, LogConfig};
use crate::log::BatchCache;
use crate::testing::run_local as run;

fn batch(pid: i64, epoch: i16, seq: i32, n: usize, transactional: bool) -> Bytes {
    let records: Vec<NewRecord> = (0..n)
        .map(|i| NewRecord {
            value: Some(Bytes::from(format!("p{pid}-{seq}-{i}"))),
            timestamp_ms: 1,
            ..Default::default()
        })
        .collect();
    let producer = ProducerFields {
        producer_id: pid,
        producer_epoch: epoch,
        base_sequence: seq,
    };
    if transactional {
        build_transactional_batch(&records, producer)
    } else {
        build_batch(&records, producer)
    }
}

fn plain(n: usize) -> Bytes {
    batch(-1, -1, -1, n, false)
}

fn marker(m: Marker, coordinator_epoch: i32) -> MarkerRecord {
    MarkerRecord {
        marker: m,
        coordinator_epoch,
    }
}

async fn open(dir: &Path, mode: IoMode) -> Rc<Partition> {
    Partition::open(
        dir,
        Arc::from("t"),
        0,
        0,
        LogOptions {
            config: LogConfig::default(),
            io_mode: mode,
            writer: Default::default(),
            cache: (mode == IoMode::Direct).then(|| BatchCache::new(1 << 20)),
        },
    )
    .await
    .unwrap()
}

/// A transactional batch as the produce path sends it: verified first.
async fn produce_txn(p: &Rc<Partition>, pid: i64, epoch: i16, seq: i32, n: usize) -> AppendInfo {
    let guard = p.needs_verification(pid).then(|| p.start_verification(pid));
    p.produce_verified(&batch(pid, epoch, seq, n, true), guard)
        .await
        .unwrap()
}

/// (producer, first offset) of the aborted transactions a read of `[from, upper)` is told of,
/// by first offset (the order a consumer uses them in).
fn aborted(p: &Partition, from: i64, upper: i64) -> Vec<(i64, i64)> {
    let mut list: Vec<(i64, i64)> = p
        .log()
        .aborted_transactions(from, upper)
        .iter()
        .map(|a| (a.producer_id, a.first_offset))
        .collect();
    list.sort_by_key(|&(_, first)| first);
    list
}

fn invalid_txn_state(r: Result<AppendInfo>) -> bool {
    matches!(r, Err(Error::InvalidTxnState { .. }))
}

#[test]
fn markers_move_the_last_stable_offset_and_index_the_aborted() {
    for mode in [IoMode::Buffered, IoMode::Direct] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        run(|| async move {
            let p = open(&path, mode).await;
            assert!(
                invalid_txn_state(p.produce(&batch(1, 0, 0, 2, true)).await),
                "a transactional batch needs a verification guard"
            );
            assert_eq!(produce_txn(&p, 1, 0, 0, 2).await.base_offset, 0);
            p.produce(&plain(1)).await.unwrap(); // offset 2
            assert_eq!(produce_txn(&p, 2, 0, 0, 1).await.base_offset, 3);
            assert_eq!((p.high_watermark(), p.last_stable_offset()), (4, 0));
            assert!(
                invalid_txn_state(p.produce(&batch(1, 0, 2, 1, false)).await),
                "a plain batch while the producer's transaction is open"
            );
            assert_eq!(produce_txn(&p, 1, 0, 2, 1).await.base_offset, 4);
            let (read, none) = p.fetch_committed(0, 1 << 20).await.unwrap();
            assert!(
                read.chunks.is_empty() && none.is_empty(),
                "nothing stable yet"
            );

            assert_eq!(
                p.append_marker(1, 0, marker(Marker::Commit, 5))
                    .await
                    .unwrap(),
                5
            );
            assert_eq!(p.last_stable_offset(), 3, "producer 2 is still open");
            let (read, none) = p.fetch_committed(0, 1 << 20).await.unwrap();
            assert_eq!((read.next_offset, none.len()), (3, 0));

            assert_eq!(
                p.append_marker(2, 0, marker(Marker::Abort, 5))
                    .await
                    .unwrap(),
                6
            );
            assert_eq!(p.last_stable_offset(), 7);
            let (read, list) = p.fetch_committed(0, 1 << 20).await.unwrap();
            assert_eq!(read.next_offset, 7);
            assert_eq!(list.len(), 1);
            assert_eq!((list[0].producer_id, list[0].first_offset), (2, 3));
            assert_eq!((list[0].last_offset, list[0].last_stable_offset), (6, 7));
            assert_eq!(aborted(&p, 6, 7), vec![(2, 3)]);
            assert!(aborted(&p, 7, 8).is_empty());

            // Fencing at the partition: the coordinator's marker bumped producer 2's epoch.
            p.append_marker(2, 1, marker(Marker::Abort, 5))
                .await
                .unwrap();
            assert!(matches!(
                p.produce(&batch(2, 0, 1, 1, false)).await,
                Err(Error::InvalidProducerEpoch { .. })
            ));
            assert!(matches!(
                p.append_marker(2, 1, marker(Marker::Abort, 4)).await,
                Err(Error::CoordinatorFenced { current: 5, .. })
            ));
            assert!(matches!(
                p.append_marker(2, 0, marker(Marker::Abort, 6)).await,
                Err(Error::InvalidProducerEpoch { current: 1, .. })
            ));

            // A guard is void once the producer appended anything (here a marker).
            let guard = p.start_verification(3);
            p.append_marker(3, 0, marker(Marker::Abort, 5))
                .await
                .unwrap();
            assert!(invalid_txn_state(
                p.produce_verified(&batch(3, 0, 0, 1, true), Some(guard))
                    .await
            ));
            // Requests verified at once share the producer's guard; any other value fails.
            let first = p.start_verification(3);
            assert_eq!(
                p.start_verification(3),
                first,
                "one guard per producer at a time"
            );
            assert!(invalid_txn_state(
                p.produce_verified(&batch(3, 0, 0, 1, true), Some(first + 100))
                    .await
            ));
            let end = p.log().log_end_offset();
            p.close().await.unwrap();

            let p = open(&path, mode).await;
            assert_eq!(p.last_stable_offset(), end);
            assert_eq!(aborted(&p, 0, end), vec![(2, 3)]);
            assert!(
                invalid_txn_state(p.produce(&batch(1, 0, 3, 1, true)).await),
                "producer 1's transaction ended"
            );
            p.close().await.unwrap();
        });
        let txn_index = dir.path().join("t-0/00000000000000000000.txnindex");
        assert_eq!(std::fs::metadata(txn_index).unwrap().len(), 34);
    }
}

#[test]
fn an_open_transaction_survives_a_restart_with_or_without_the_snapshot() {
    for drop_snapshot in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        run(|| async move {
            let p = open(&path, IoMode::Buffered).await;
            p.produce(&plain(2)).await.unwrap();
            produce_txn(&p, 7, 0, 0, 2).await; // 2..=3
            p.checkpoint().await.unwrap(); // the snapshot holds the open transaction
            produce_txn(&p, 8, 0, 0, 1).await; // 4, after the snapshot
            p.produce(&plain(1)).await.unwrap(); // 5
            p.append_marker(8, 0, marker(Marker::Abort, 0))
                .await
                .unwrap(); // 6
            p.close().await.unwrap();
            if drop_snapshot {
                std::fs::remove_file(path.join(PRODUCER_SNAPSHOT_FILE)).unwrap();
            }

            let p = open(&path, IoMode::Buffered).await;
            assert_eq!(p.last_stable_offset(), 2, "producer 7 is still open");
            assert_eq!(p.open_transaction(7), Some(2));
            assert_eq!(aborted(&p, 0, 7), vec![(8, 4)]);
            assert_eq!(produce_txn(&p, 7, 0, 2, 1).await.base_offset, 7);
            p.append_marker(7, 0, marker(Marker::Abort, 0))
                .await
                .unwrap(); // 8
            assert_eq!(p.last_stable_offset(), 9);
            assert_eq!(aborted(&p, 0, 9), vec![(7, 2), (8, 4)]);
            p.close().await.unwrap();
        });
    }
}

#[test]
fn a_damaged_txn_index_is_rebuilt_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    let p2 = path.clone();
    run(|| async move {
        let p = open(&p2, IoMode::Buffered).await;
        produce_txn(&p, 1, 0, 0, 1).await;
        p.append_marker(1, 0, marker(Marker::Abort, 0))
            .await
            .unwrap();
        p.close().await.unwrap();
    });
    let index = path.join("00000000000000000000.txnindex");
    std::fs::write(&index, [0u8; 20]).unwrap(); // not a whole entry
    run(|| async move {
        let p = open(&path, IoMode::Buffered).await;
        assert_eq!(aborted(&p, 0, 2), vec![(1, 0)]);
        p.close().await.unwrap();
    });
    assert_eq!(std::fs::metadata(index).unwrap().len(), 34);
}

#[test]
fn a_follower_tracks_transactions_from_what_it_replicates() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async move {
        let leader = open(&dir.path().join("l"), IoMode::Buffered).await;
        produce_txn(&leader, 4, 0, 0, 2).await;
        leader
            .append_marker(4, 0, marker(Marker::Abort, 3))
            .await
            .unwrap();
        produce_txn(&leader, 5, 0, 0, 1).await;
        let bytes = leader
            .log()
            .read(0, 1 << 20, leader.log().log_end_offset())
            .await
            .unwrap()
            .to_bytes()
            .await
            .unwrap();
        let follower = open(&dir.path().join("f"), IoMode::Buffered).await;
        follower.append_from_leader(&bytes).await.unwrap();
        assert_eq!(follower.open_transaction(5), Some(3));
        assert_eq!(aborted(&follower, 0, 4), vec![(4, 0)]);
        leader.close().await.unwrap();
        follower.close().await.unwrap();
    });
}

/// What a log holds, batch by batch: `key=value` per record, or the marker, from the start.
async fn log_contents(p: &Partition) -> Vec<String> {
    use crate::batch::build::decode_record_section;
    use crate::batch::records::record_section;
    let log = p.log();
    let (mut at, end) = (log.log_start_offset(), log.log_end_offset());
    let mut out = Vec::new();
    while at < end {
        let r = log.read(at, 1 << 20, end).await.unwrap();
        let bytes = r.to_bytes().await.unwrap();
        for b in crate::batch::split_batches(&bytes).unwrap() {
            let h = crate::batch::validate(&b, usize::MAX, BatchOrigin::Replica).unwrap();
            if let Some(m) =
                crate::batch::control::parse_marker(&h, &b[crate::batch::HEADER_BYTES..])
            {
                out.push(format!("{:?}({})", m.marker, h.producer_id));
                continue;
            }
            let section = Bytes::from(record_section(&b, 1 << 24).unwrap());
            for rec in decode_record_section(&h, &section).unwrap() {
                let text =
                    |b: Option<Bytes>| String::from_utf8(b.unwrap_or_default().to_vec()).unwrap();
                out.push(format!("{}={}", text(rec.key), text(rec.value)));
            }
        }
        at = r.next_offset;
    }
    out
}

/// Compaction follows Kafka's rules for transactions: an aborted transaction's batches go (and
/// never hide the committed value before them), committed transactional records are compacted
/// like others, a marker goes one pass after its data (with its `.txnindex` entry, which
/// lasts exactly as long), and nothing at or above the last stable offset is cleaned. What is
/// left survives a restart.
#[test]
fn the_cleaner_drops_aborted_data_then_its_marker_and_stops_at_the_last_stable_offset() {
    use crate::config::CleanupPolicy;
    use crate::log::{CleanerBudget, IoThrottle};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    let keyed = |pid: i64, seq: i32, key: &str, value: &str| {
        let records = [NewRecord {
            key: Some(Bytes::from(key.to_string())),
            value: Some(Bytes::from(value.to_string())),
            timestamp_ms: 1,
            ..Default::default()
        }];
        let producer = ProducerFields {
            producer_id: pid,
            producer_epoch: 0,
            base_sequence: seq,
        };
        if pid >= 0 {
            build_transactional_batch(&records, producer)
        } else {
            build_batch(&records, producer)
        }
    };
    let options = || LogOptions {
        config: LogConfig {
            cleanup_policy: CleanupPolicy::Compact,
            segment_bytes: 600,
            delete_retention_ms: 0,
            min_cleanable_dirty_ratio: 0.01,
            ..LogConfig::default()
        },
        io_mode: IoMode::Buffered,
        writer: Default::default(),
        cache: None,
    };
    let budget = CleanerBudget {
        throttle: IoThrottle::new(1 << 30),
        dedupe_buffer_bytes: 1 << 20,
    };
    let p2 = path.clone();
    run(|| async move {
        let p = Partition::open(&p2, Arc::from("t"), 0, 0, options())
            .await
            .unwrap();
        let in_txn = |pid: i64, key: &'static str, value: &'static str| {
            let p = p.clone();
            async move {
                let guard = p.start_verification(pid);
                p.produce_verified(&keyed(pid, 0, key, value), Some(guard))
                    .await
                    .unwrap();
            }
        };
        // "a" committed plainly, then overwritten by producer 1's aborted transaction;
        // "b" written by producer 3's committed transaction.
        p.produce(&keyed(-1, -1, "a", "kept")).await.unwrap();
        in_txn(1, "a", "aborted").await;
        p.append_marker(1, 0, marker(Marker::Abort, 0))
            .await
            .unwrap();
        in_txn(3, "b", "committed").await;
        p.append_marker(3, 0, marker(Marker::Commit, 0))
            .await
            .unwrap();
        for i in 0..30 {
            p.produce(&keyed(-1, -1, "k", &format!("old{i}")))
                .await
                .unwrap();
        }
        // Producer 2's transaction stays open: nothing from its first offset on is cleaned.
        let open_at = p.log().log_end_offset();
        in_txn(2, "k", "open").await;
        for i in 0..30 {
            p.produce(&keyed(-1, -1, "k", &format!("new{i}")))
                .await
                .unwrap();
        }
        p.checkpoint().await.unwrap();
        assert_eq!(p.last_stable_offset(), open_at);
        assert_eq!(aborted(&p, 0, open_at), vec![(1, 1)]);
        // What precedes the overwritten key, once its first versions went.
        let cleanable = |contents: &[String]| -> Vec<String> {
            assert!(
                !contents.contains(&"k=old0".to_string()),
                "overwritten records went"
            );
            contents
                .iter()
                .take_while(|r| !r.starts_with("k="))
                .cloned()
                .collect()
        };

        let outcome = p.clean(&budget, now_ms()).await.unwrap();
        assert!(outcome.is_some(), "a pass ran");
        let contents = log_contents(&p).await;
        assert_eq!(
            cleanable(&contents),
            ["a=kept", "Abort(1)", "b=committed", "Commit(3)"],
            "the aborted value went and did not hide the committed one; both markers stay \
             while the pass saw their data"
        );
        assert_eq!(
            aborted(&p, 0, open_at),
            vec![(1, 1)],
            "the abort is still indexed"
        );
        assert!(
            contents.contains(&"k=open".to_string()),
            "the open transaction's batch is there"
        );

        // The next pass (delete.retention.ms = 0): the abort has no data left, so its marker
        // and index entry go; the commit's data is still there, so its marker stays.
        std::thread::sleep(std::time::Duration::from_millis(2));
        p.clean(&budget, now_ms())
            .await
            .unwrap()
            .expect("a second pass");
        assert_eq!(
            cleanable(&log_contents(&p).await),
            ["a=kept", "b=committed", "Commit(3)"]
        );
        assert_eq!(aborted(&p, 0, open_at), vec![]);
        p.close().await.unwrap();

        let p = Partition::open(&p2, Arc::from("t"), 0, 0, options())
            .await
            .unwrap();
        assert_eq!(aborted(&p, 0, open_at), vec![], "and after a restart");
        assert_eq!(p.open_transaction(2), Some(open_at));
        assert_eq!(
            cleanable(&log_contents(&p).await),
            ["a=kept", "b=committed", "Commit(3)"]
        );
        p.close().await.unwrap();
    });
    let first = path.join("00000000000000000000.txnindex");
    assert_eq!(
        std::fs::metadata(first).unwrap().len(),
        0,
        "the cleaned index is empty"
    );
}
