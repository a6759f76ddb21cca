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

/// Kafka's cleaner rules for transactions, through a real transactional producer: the aborted
/// overwrites of committed keys go (and hide nothing), both isolation levels then read the
/// same records, and the abort markers follow their data: once no `.txnindex` entry is left,
/// the marker of the only aborted transaction went too (an entry lasts exactly as long as its
/// marker), and the records still read the same.
#[test]
fn compaction_drops_aborted_transactions_then_their_markers() {
    let broker = Broker::start(FAST_CLEANER);
    let state = broker.data_dir.with_extension("compacted-txn.json");
    let state = state.to_str().unwrap();
    let script = "confluent_compacted_transactions.py";
    let out = python(script, &["produce", &broker.addr, "txn-compacted", state]);
    assert!(out.contains("produced"), "{out}");
    let out = python(
        script,
        &["check", &broker.addr, "txn-compacted", state, "60"],
    );
    println!("{out}");
    assert!(out.contains("compacted transactions ok"), "{out}");
    let partition_dir = broker.data_dir.join("txn-compacted-0");
    let deadline = Instant::now() + Duration::from_secs(30);
    let aborts_left = || {
        let (aborts, _, index_bytes) = markers_and_index_bytes(&partition_dir);
        (aborts, index_bytes)
    };
    while aborts_left() != (0, 0) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        aborts_left(),
        (0, 0),
        "abort markers and .txnindex bytes left"
    );
    let (_, commits, _) = markers_and_index_bytes(&partition_dir);
    assert!(
        commits > 0,
        "the fillers' commit markers stay with their data"
    );
    let out = python(
        script,
        &["check", &broker.addr, "txn-compacted", state, "0"],
    );
    assert!(out.contains("compacted transactions ok"), "{out}");
}

/// What ends transactions in the segments of a partition directory: ABORT markers, COMMIT
/// markers, and the bytes of its `.txnindex` files. A marker is Kafka's control batch
/// (attributes bit 5) with one record whose key, `version i16, type i16` (0 ABORT, 1 COMMIT),
/// starts at byte 66 of the batch.
fn markers_and_index_bytes(dir: &Path) -> (usize, usize, u64) {
    let (mut aborts, mut commits, mut index_bytes) = (0, 0, 0);
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".txnindex") {
            index_bytes += entry.metadata().unwrap().len();
        }
        if !name.ends_with(".log") {
            continue;
        }
        let bytes = std::fs::read(entry.path()).unwrap();
        let mut at = 0;
        while at + 61 <= bytes.len() {
            let length = i32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
            let batch = &bytes[at..(at + 12 + length).min(bytes.len())];
            let attributes = i16::from_be_bytes([batch[21], batch[22]]);
            if attributes & 0x20 != 0 && batch.len() >= 70 {
                match batch[68..70] {
                    [0, 0] => aborts += 1,
                    [0, 1] => commits += 1,
                    _ => {}
                }
            }
            at += 12 + length;
        }
    }
    (aborts, commits, index_bytes)
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
