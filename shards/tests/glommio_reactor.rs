//! The vendored glommio's patch (`vendor/glommio/PATCHED.md`): its reactor keeps the
//! throughput preemption timer armed from one turn to the next. Unpatched, every turn cancelled
//! the timer and armed a new one with its linked eventfd write, three submissions on the main
//! ring, and the cancel searched the ring's armed polls (one per idle connection) first.
//!
//! The submissions are counted from the kernel's view of the process's rings
//! (`/proc/self/fdinfo`, `SqTail`), so this file holds one test: the rings of tests running
//! beside it in the same process would count too.

use ferrite_shards::testing::{io_uring_submission_tails, io_uring_submitted_since};
use std::time::Duration;

#[test]
fn a_reactor_turn_leaves_the_throughput_timer_armed() {
    ferrite_shards::testing::run_local(|| async {
        // The rings' set-up and first turns are not counted.
        for _ in 0..10 {
            glommio::timer::sleep(Duration::from_micros(200)).await;
        }
        const TURNS: u64 = 500;
        let before = io_uring_submission_tails();
        for _ in 0..TURNS {
            // Each sleep parks the executor: a reactor turn that arms a wake-up timer and
            // links the rings to sleep, then one that finds the timer fired.
            glommio::timer::sleep(Duration::from_micros(200)).await;
        }
        let per_sleep = io_uring_submitted_since(&before) as f64 / TURNS as f64;
        println!("{per_sleep:.2} submissions per sleep");
        assert!(
            per_sleep < 5.0,
            "{per_sleep:.2} submissions per sleep: the reactor re-arms its throughput timer on \
             every turn again (is vendor/glommio's patch in place?)"
        );
    });
}
