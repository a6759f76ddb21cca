//! Replication rules of a partition: what a leader acknowledges, counts and keeps, and what a
//! follower keeps after a truncation.

use super::replication::Role;
use super::*;
use crate::batch::build::{build_batch, NewRecord, ProducerFields};
use crate::config::{IoMode, LogConfig};

use crate::testing::run_local as run;

fn batch(n: usize, tag: &str, producer: ProducerFields) -> Bytes {
    let records: Vec<NewRecord> = (0..n)
        .map(|i| NewRecord {
            value: Some(Bytes::from(format!("{tag}-{i}"))),
            timestamp_ms: 1,
            ..Default::default()
        })
        .collect();
    build_batch(&records, producer)
}

fn plain(n: usize, tag: &str) -> Bytes {
    batch(n, tag, ProducerFields::NONE)
}

fn idem(pid: i64, seq: i32, n: usize) -> Bytes {
    batch(
        n,
        "idem",
        ProducerFields {
            producer_id: pid,
            producer_epoch: 0,
            base_sequence: seq,
        },
    )
}

fn from_leader(b: Bytes, base: i64, epoch: i32) -> Bytes {
    let mut v = b.to_vec();
    let prefix = crate::batch::stamp(&v, base, epoch);
    v[..16].copy_from_slice(&prefix);
    Bytes::from(v)
}

fn role(leader: i32, isr: Vec<i32>) -> Role {
    Role {
        node_id: 1,
        leader,
        replicas: vec![1, 2],
        isr,
    }
}

async fn open(dir: &Path) -> Rc<Partition> {
    Partition::open(
        dir,
        Arc::from("t"),
        0,
        0,
        LogOptions {
            config: LogConfig::default(),
            io_mode: IoMode::Buffered,
            writer: Default::default(),
            cache: None,
        },
    )
    .await
    .unwrap()
}

/// Broker 1 leading in epoch 5, with broker 2 in the ISR.
async fn leading(dir: &Path) -> Rc<Partition> {
    let p = open(dir).await;
    p.set_leader_epoch(5);
    p.set_role(role(1, vec![1, 2]));
    p
}

#[test]
fn an_acks_all_waiter_fails_when_leadership_moves_and_the_record_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    run(|| async move {
        let p = leading(&path).await;
        let info = p.produce(&plain(3, "mine")).await.unwrap();
        assert_eq!(p.high_watermark(), 0);
        let p2 = p.clone();
        let waiter = glommio::spawn_local(async move {
            p2.wait_committed(info.last_offset, 5, Duration::from_secs(5))
                .await
        });
        glommio::timer::sleep(Duration::from_millis(10)).await;
        // Broker 2 is elected in epoch 6; this one becomes its follower and cuts its tail.
        p.set_leader_epoch(6);
        p.set_role(role(2, vec![2, 1]));
        p.truncate_to(0).await.unwrap();
        p.append_from_leader(&from_leader(plain(5, "theirs"), 0, 6))
            .await
            .unwrap();
        p.follow_high_watermark(5);
        assert!(
            matches!(waiter.await, Err(crate::error::Error::NotLeader(_))),
            "never acknowledged"
        );
    });
}

#[test]
fn a_fetch_beyond_the_leaders_end_moves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    run(|| async move {
        let p = leading(&path).await;
        p.produce(&plain(3, "x")).await.unwrap();
        assert!(p.read_for_follower(2, 5, 10, 1 << 20).await.is_err());
        assert_eq!(
            p.high_watermark(),
            0,
            "the follower has nothing the leader has"
        );
        // A follower naming another leader epoch is refused.
        assert!(p.read_for_follower(2, 4, 0, 1 << 20).await.is_err());
        p.read_for_follower(2, 5, 3, 1 << 20).await.unwrap();
        assert_eq!(p.high_watermark(), 3);
    });
}

#[test]
fn producer_state_is_rebuilt_after_a_truncation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    run(|| async move {
        let p = open(&path).await;
        p.set_leader_epoch(5);
        p.set_role(role(2, vec![2, 1]));
        // Replicated from old leader 2 (epoch 5), then cut as diverged.
        p.append_from_leader(&from_leader(idem(7, 0, 3), 0, 5))
            .await
            .unwrap();
        p.truncate_to(0).await.unwrap();
        p.append_from_leader(&from_leader(plain(3, "other"), 0, 6))
            .await
            .unwrap();
        // This broker leads next; producer 7 retries its batch: it is written, not "duplicate".
        p.set_leader_epoch(7);
        p.set_role(role(1, vec![1]));
        let r = p.produce(&idem(7, 0, 3)).await.unwrap();
        assert_eq!(r.base_offset, 3);
        assert_eq!(p.log().log_end_offset(), 6);
    });
}

#[test]
fn a_follower_a_record_behind_under_steady_load_stays_in_sync() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    run(|| async move {
        let p = leading(&path).await;
        for _ in 0..40 {
            let end = p.log().log_end_offset();
            p.produce(&plain(1, "x")).await.unwrap();
            // The follower's fetch arrives just after the next write: one record behind.
            let _ = p.read_for_follower(2, 5, end, 1 << 20).await;
            glommio::timer::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(p.wanted_isr(200), None, "caught up by Kafka's rule");
        // A follower that stops fetching leaves.
        glommio::timer::sleep(Duration::from_millis(300)).await;
        assert_eq!(p.wanted_isr(200), Some(vec![1]));
    });
}

#[test]
fn a_stored_high_watermark_is_where_a_restarted_replica_starts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    run(|| async move {
        let p = leading(&path).await;
        p.produce(&plain(5, "x")).await.unwrap();
        p.read_for_follower(2, 5, 3, 1 << 20).await.unwrap();
        assert_eq!(p.high_watermark(), 3);
        p.close().await.unwrap();
        let p = leading(&path).await;
        assert_eq!(
            p.high_watermark(),
            3,
            "committed records readable after the restart"
        );
        assert_eq!(p.log().log_end_offset(), 5);
        p.close().await.unwrap();
    });
}
