use super::*;
use crate::batch::build::{build_batch, NewRecord, ProducerFields};
use crate::config::{IoMode, LogConfig};
use crate::log::BatchCache;

use crate::testing::run_local as run;

fn idempotent(pid: i64, epoch: i16, seq: i32, n: usize) -> Bytes {
    let records: Vec<NewRecord> = (0..n)
        .map(|i| NewRecord {
            value: Some(Bytes::from(format!("v{seq}-{i}"))),
            timestamp_ms: 1,
            ..Default::default()
        })
        .collect();
    build_batch(
        &records,
        ProducerFields {
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
        },
    )
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

#[test]
fn duplicates_are_acknowledged_once_and_gaps_refused_across_restarts() {
    for mode in [IoMode::Buffered, IoMode::Direct] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        run(|| async move {
            let p = open(&path, mode).await;
            let first = p.produce(&idempotent(5, 0, 0, 3)).await.unwrap();
            assert_eq!((first.base_offset, first.last_offset), (0, 2));
            assert_eq!(p.high_watermark(), 3);
            let again = p.produce(&idempotent(5, 0, 0, 3)).await.unwrap();
            assert_eq!(again, first, "a retried batch is not written twice");
            assert_eq!(p.log().log_end_offset(), 3);
            assert!(matches!(
                p.produce(&idempotent(5, 0, 7, 1)).await,
                Err(Error::OutOfOrderSequence {
                    expected: 3,
                    got: 7,
                    ..
                })
            ));
            p.produce(&idempotent(5, 0, 3, 2)).await.unwrap();
            p.close().await.unwrap();
            // After a clean restart the state is back: the duplicate is still recognised.
            let p = open(&path, mode).await;
            let dup = p.produce(&idempotent(5, 0, 3, 2)).await.unwrap();
            assert_eq!(dup.base_offset, 3);
            assert_eq!(p.log().log_end_offset(), 5);
            // A batch after the last snapshot is rebuilt from the log on the next open.
            p.checkpoint().await.unwrap();
            p.produce(&idempotent(5, 0, 5, 1)).await.unwrap();
            drop(p); // no close: the snapshot is older than the log end
            let p = open(&path, mode).await;
            assert_eq!(
                p.produce(&idempotent(5, 0, 5, 1))
                    .await
                    .unwrap()
                    .base_offset,
                5
            );
            assert!(matches!(
                p.produce(&idempotent(5, 0, 9, 1)).await,
                Err(Error::OutOfOrderSequence { expected: 6, .. })
            ));
            assert!(
                matches!(
                    p.produce(&idempotent(9, 0, 17, 1)).await,
                    Ok(AppendInfo { base_offset: 6, .. })
                ),
                "an unknown producer may start anywhere"
            );
            p.close().await.unwrap();
        });
    }
}

#[test]
fn pipelined_batches_are_checked_against_pending_ones() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    run(|| async move {
        let p = open(&path, IoMode::Buffered).await;
        let calls: Vec<_> = (0..5)
            .map(|i| {
                let p = p.clone();
                glommio::spawn_local(async move { p.produce(&idempotent(1, 0, i * 2, 2)).await })
            })
            .collect();
        for (i, c) in calls.into_iter().enumerate() {
            assert_eq!(c.await.unwrap().base_offset, i as i64 * 2);
        }
        p.close().await.unwrap();
    });
}

#[test]
fn long_polls_wake_when_data_arrives() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    run(|| async move {
        let p = open(&path, IoMode::Buffered).await;
        assert!(
            !p.wait_for_data(0, Duration::from_millis(20)).await,
            "times out when idle"
        );
        let waiter = {
            let p = p.clone();
            glommio::spawn_local(async move { p.wait_for_data(0, Duration::from_secs(10)).await })
        };
        glommio::timer::sleep(Duration::from_millis(5)).await;
        p.produce(&idempotent(-1, -1, -1, 1))
            .await
            .unwrap_or_else(|_| unreachable!());
        assert!(waiter.await);
        p.close().await.unwrap();
    });
}
