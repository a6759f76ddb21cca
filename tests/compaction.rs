//! Log compaction on the real broker, seen through confluent-kafka: what remains, at which
//! offsets, and what a crash in the middle of a pass does.

mod common;

use common::{python, Broker};
use std::path::Path;
use std::time::{Duration, Instant};

/// A cleaner that looks often, on logs checkpointed often (it cleans only below the recovery
/// point and the producer snapshot).
const FAST_CLEANER: &[&str] = &[
    "--set",
    "log.cleaner.backoff.ms=200",
    "--set",
    "log.recovery.checkpoint.interval.ms=200",
];

#[test]
fn only_the_latest_value_of_each_key_remains_at_its_offset() {
    let broker = Broker::start(FAST_CLEANER);
    let state = broker.data_dir.with_extension("compaction-state.json");
    let state = state.to_str().unwrap();
    let out = python(
        "compaction.py",
        &["produce", &broker.addr, "compacted", state, "40", "50"],
    );
    assert!(out.contains("produced"), "{out}");
    let out = python(
        "compaction.py",
        &["check", &broker.addr, "compacted", state, "40"],
    );
    println!("{out}");
    assert!(out.contains("compaction ok"), "{out}");
    assert!(broker.log().contains("compacted"), "{}", broker.log());
}

#[test]
fn a_crash_in_the_middle_of_a_pass_loses_nothing() {
    // 5 KB/s: a pass over this topic takes several seconds, so the kill lands inside one,
    // after some runs were swapped in.
    let mut broker = Broker::start(&[
        "--set",
        "log.cleaner.backoff.ms=200",
        "--set",
        "log.recovery.checkpoint.interval.ms=200",
        "--set",
        "log.cleaner.io.max.bytes.per.second=5000",
    ]);
    let state = broker.data_dir.with_extension("compaction-crash.json");
    let state = state.to_str().unwrap();
    let out = python(
        "compaction.py",
        &["produce", &broker.addr, "crashed", state, "60", "200"],
    );
    assert!(out.contains("produced"), "{out}");
    let partition_dir = broker.data_dir.join("crashed-0");
    assert!(
        wait_for_cleaned_file(&partition_dir, Duration::from_secs(60)),
        "no pass started: {}",
        broker.log()
    );
    std::thread::sleep(Duration::from_secs(1));
    broker.kill9();
    broker.restart();
    let out = python(
        "compaction.py",
        &["check", &broker.addr, "crashed", state, "0", "--partial-ok"],
    );
    println!("{out}");
    assert!(out.contains("nothing lost"), "{out}");
    // The cleaner starts over after the restart and finishes.
    let out = python(
        "compaction.py",
        &["check", &broker.addr, "crashed", state, "60"],
    );
    println!("{out}");
    assert!(out.contains("compaction ok"), "{out}");
}

/// Waits until a cleaned segment is being written in `dir`: a pass is under way.
fn wait_for_cleaned_file(dir: &Path, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        let busy = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().ends_with(".cleaned"));
        if busy {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}
