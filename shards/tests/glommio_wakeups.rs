//! The vendored glommio's second patch (`vendor/glommio/PATCHED.md`): an executor about to
//! sleep and a remote executor waking it order themselves with a fence each instead of the
//! sleeper's process-wide `membarrier`. A wake-up lost to that race leaves an executor with no
//! timer asleep for good, so here two executors without timers play ping-pong across their
//! shared channels, each parking between messages, and every exchange must complete.

use glommio::channels::shared_channel;
use glommio::{LocalExecutorBuilder, Placement};
use std::sync::mpsc;
use std::time::Duration;

const EXCHANGES: u64 = 20_000;

#[test]
fn executors_that_park_between_messages_are_always_woken() {
    let (ping_tx, ping_rx) = shared_channel::new_bounded::<u64>(1);
    let (pong_tx, pong_rx) = shared_channel::new_bounded::<u64>(1);
    let (done_tx, done_rx) = mpsc::channel();
    let answering = ferrite_shards::testing::spawn_echo_executor(ping_rx, pong_tx, None);
    let asking = LocalExecutorBuilder::new(Placement::Unbound)
        .spawn(move || async move {
            let pings = ping_tx.connect().await;
            let pongs = pong_rx.connect().await;
            for n in 0..EXCHANGES {
                pings.send(n).await.expect("the answering side is there");
                assert_eq!(pongs.recv().await, Some(n));
                let _ = done_tx.send(n);
            }
        })
        .expect("an executor thread");
    // Each exchange takes microseconds; one lost wake-up stops them all.
    let mut last = None;
    while last != Some(EXCHANGES - 1) {
        match done_rx.recv_timeout(Duration::from_secs(30)) {
            Ok(n) => last = Some(n),
            Err(_) => panic!(
                "no exchange completed for 30 s after {last:?} of {EXCHANGES}: an executor \
                 slept through a remote wake-up"
            ),
        }
    }
    asking.join().expect("the asking executor");
    answering.join().expect("the answering executor");
}
