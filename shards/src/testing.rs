//! For tests and benchmarks: running async code on a fresh glommio executor of this thread.
//! Shard code needs an executor (its io_uring ring, timers, `spawn_local`); a test makes one
//! per case so cases share nothing.

use std::future::Future;

/// Runs `f` to completion on a new local executor and returns its output.
pub fn run_local<T, Fut>(f: impl FnOnce() -> Fut) -> T
where
    Fut: Future<Output = T>,
{
    glommio::LocalExecutorBuilder::default()
        .make()
        .expect("a glommio executor on this thread")
        .run(async move { f().await })
}

/// How hard the fuzz targets (proptest-driven) work: `default_cases` cases from a fixed seed,
/// so a CI run is repeatable, unless `FERRITE_FUZZ_CASES` / `FERRITE_FUZZ_SEED` ask for more
/// or another seed (`scripts/fuzz` runs them longer, each time from a new seed).
pub fn fuzz_budget(default_cases: u32) -> (u32, u64) {
    let read = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let cases = read("FERRITE_FUZZ_CASES").map_or(default_cases, |c| c as u32);
    let seed = read("FERRITE_FUZZ_SEED").unwrap_or(0x5eed_f022);
    (cases, seed)
}

/// The proptest configuration of a fuzz target: `fuzz_budget`'s cases and seed, and no
/// regression files (a fixed seed replays a failure).
#[cfg(test)]
pub(crate) fn fuzz_config(default_cases: u32) -> proptest::test_runner::Config {
    let (cases, seed) = fuzz_budget(default_cases);
    proptest::test_runner::Config {
        cases,
        rng_seed: proptest::test_runner::RngSeed::Fixed(seed),
        failure_persistence: None,
        ..Default::default()
    }
}

/// The submission queue tail of every io_uring ring this process has open, by descriptor, from
/// the kernel's view (`/proc/self/fdinfo`): what tests of the reactor's submissions count.
pub fn io_uring_submission_tails() -> std::collections::HashMap<String, u64> {
    let mut tails = std::collections::HashMap::new();
    for entry in std::fs::read_dir("/proc/self/fd").expect("/proc/self/fd") {
        let entry = entry.expect("a descriptor");
        let is_ring = std::fs::read_link(entry.path())
            .map(|target| target.to_string_lossy() == "anon_inode:[io_uring]")
            .unwrap_or(false);
        if !is_ring {
            continue;
        }
        let fd = entry.file_name().to_string_lossy().into_owned();
        let tail = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}"))
            .unwrap_or_default()
            .lines()
            .find_map(|line| line.strip_prefix("SqTail:"))
            .and_then(|tail| tail.trim().parse::<u64>().ok());
        if let Some(tail) = tail {
            tails.insert(fd, tail);
        }
    }
    tails
}

/// Submissions the kernel took since `before` (from [`io_uring_submission_tails`]), over the
/// rings open then and now: the rings of executors that have exited close in the background.
pub fn io_uring_submitted_since(before: &std::collections::HashMap<String, u64>) -> u64 {
    io_uring_submission_tails()
        .iter()
        .filter_map(|(fd, now)| before.get(fd).map(|then| now.saturating_sub(*then)))
        .sum()
}

/// An executor thread that sends back every number it receives until the sending side goes
/// away, parking between messages: the far end of the reactor tests' exchanges. With
/// `pending_timer`, it keeps a timer that far away pending meanwhile, as a broker's shards
/// always have one.
pub fn spawn_echo_executor(
    pings: glommio::channels::shared_channel::SharedReceiver<u64>,
    pongs: glommio::channels::shared_channel::SharedSender<u64>,
    pending_timer: Option<std::time::Duration>,
) -> glommio::ExecutorJoinHandle<()> {
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .spawn(move || async move {
            if let Some(after) = pending_timer {
                glommio::spawn_local(glommio::timer::sleep(after)).detach();
            }
            let pings = pings.connect().await;
            let pongs = pongs.connect().await;
            while let Some(n) = pings.recv().await {
                pongs.send(n).await.expect("the asking side is there");
            }
        })
        .expect("an executor thread")
}
