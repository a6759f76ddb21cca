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
        partition_epoch: 0,
        replicas: vec![1, 2],
        isr,
    }
}

/// `role` as metadata of partition epoch `partition_epoch` gives it.
fn role_at(partition_epoch: i32, leader: i32, isr: Vec<i32>) -> Role {
    Role {
        partition_epoch,
        ..role(leader, isr)
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

/// Broker 1 leading in epoch 5 alone in the ISR, broker 2 caught up at the log end (3) and
/// asked into the ISR: the change is pending.
async fn leading_while_2_joins(dir: &Path) -> Rc<Partition> {
    let p = open(dir).await;
    p.set_leader_epoch(5);
    p.set_role(role_at(10, 1, vec![1]));
    p.produce(&plain(3, "before")).await.unwrap();
    p.read_for_follower(2, 5, 3, 1 << 20).await.unwrap();
    let isr = p.wanted_isr(30_000).expect("broker 2 is caught up");
    assert_eq!(isr, vec![1, 2]);
    p.begin_isr_change(&isr);
    p
}

#[test]
fn a_follower_asked_into_the_isr_holds_the_high_watermark_until_the_change_is_known() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    run(|| async move {
        let p = leading_while_2_joins(&path).await;
        assert_eq!(p.wanted_isr(30_000), None, "one change at a time");
        // Acknowledged now, these would be lost if broker 2, which lacks them, were elected
        // once the ISR change lands.
        p.produce(&plain(2, "during")).await.unwrap();
        assert_eq!(p.high_watermark(), 3, "broker 2 has only 3 records");
        // ZooKeeper took the change (partition epoch 11); metadata read before it still
        // names the old ISR and leaves the change pending.
        p.end_isr_change(Some(11));
        p.set_role(role_at(10, 1, vec![1]));
        p.produce(&plain(1, "stale")).await.unwrap();
        assert_eq!(p.high_watermark(), 3);
        assert!(p.isr_change_pending());
        p.read_for_follower(2, 5, 6, 1 << 20).await.unwrap();
        assert_eq!(p.high_watermark(), 6, "broker 2 has them all");
        p.set_role(role_at(11, 1, vec![1, 2]));
        assert!(!p.isr_change_pending());
    });
}

#[test]
fn a_refused_isr_change_lets_the_high_watermark_go_without_the_follower() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    run(|| async move {
        let p = leading_while_2_joins(&path).await;
        p.produce(&plain(2, "during")).await.unwrap();
        assert_eq!(p.high_watermark(), 3);
        p.end_isr_change(None);
        assert!(!p.isr_change_pending());
        assert_eq!(p.high_watermark(), 5, "the ISR is broker 1 alone");
    });
}

#[test]
fn a_pending_isr_change_ends_with_newer_metadata_or_a_new_leader_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    let other_path = dir.path().join("t-1");
    run(|| async move {
        // The controller shrank the ISR again after the write (broker 2 died): metadata past
        // the change's epoch ends it even though broker 2 is not in the ISR.
        let p = leading_while_2_joins(&path).await;
        p.end_isr_change(Some(11));
        p.set_role(role_at(12, 1, vec![1]));
        assert!(!p.isr_change_pending());
        p.produce(&plain(2, "after")).await.unwrap();
        assert_eq!(p.high_watermark(), 5);
        p.close().await.unwrap();

        // Leadership moved before ZooKeeper answered: the change is over.
        let p = leading_while_2_joins(&other_path).await;
        p.set_leader_epoch(6);
        p.set_role(role_at(12, 1, vec![1]));
        assert!(!p.isr_change_pending());
    });
}

/// Kafka decides a follower's return at its fetch: broker 2 fetched at the log end, and the
/// leader, alone in the ISR, appended again before the ISR was looked at. Broker 2 still
/// joins; compared with the moved high watermark it never would while appends keep coming.
#[test]
fn a_follower_that_fetched_at_the_high_watermark_joins_though_appends_moved_it_since() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    run(|| async move {
        let p = open(&path).await;
        p.set_leader_epoch(5);
        p.set_role(role_at(10, 1, vec![1]));
        p.produce(&plain(3, "before")).await.unwrap();
        p.read_for_follower(2, 5, 3, 1 << 20).await.unwrap();
        p.produce(&plain(2, "since")).await.unwrap();
        assert_eq!(p.high_watermark(), 5, "the leader alone acknowledges");
        assert_eq!(p.wanted_isr(30_000), Some(vec![1, 2]));
        // A fetch that stops short of the high watermark of its moment does not count.
        p.set_role(role_at(11, 1, vec![1]));
        p.read_for_follower(2, 5, 4, 1 << 20).await.unwrap();
        assert_eq!(p.wanted_isr(30_000), None, "broker 2 is behind");
        p.close().await.unwrap();
    });
}
