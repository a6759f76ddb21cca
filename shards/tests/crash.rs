//! Kill -9 a process that appends to a log, many times over: every batch it acknowledged must
//! be there afterwards with identical bytes, offsets contiguous, and appends must go on.
//!
//! The test binary runs itself as the child (`crash_child`, which does nothing unless the parent
//! set `FERRITE_CRASH_CHILD_DIR`). The child appends batches whose content is a function of
//! their base offset and prints `ack <base> <count>` after each acknowledged append.

use bytes::Bytes;
use ferrite_shards::batch::build::{build_batch, NewRecord, ProducerFields};
use ferrite_shards::batch::{self, BatchHeader, BatchOrigin};
use ferrite_shards::log::{BatchCache, Log, LogOptions};
use ferrite_shards::{IoMode, LogConfig};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD_DIR: &str = "FERRITE_CRASH_CHILD_DIR";
const CHILD_MODE: &str = "FERRITE_CRASH_CHILD_MODE";
const CHILD_FLUSH_MESSAGES: &str = "FERRITE_CRASH_CHILD_FLUSH_MESSAGES";
const ROUNDS_PER_MODE: usize = 12;
/// Longest a child may take to recover and open the log (a loaded CI machine).
const OPEN_TIMEOUT: Duration = Duration::from_secs(60);

/// The batch written at `base`: its size and bytes follow from the offset alone.
fn batch_at(base: i64) -> Bytes {
    let count = 1 + (base % 4) as usize;
    let records: Vec<NewRecord> = (0..count)
        .map(|i| NewRecord {
            key: Some(Bytes::from(format!("k{}", base + i as i64))),
            value: Some(Bytes::from(vec![
                (base as usize + i) as u8;
                50 + (base % 700) as usize
            ])),
            timestamp_ms: 1_700_000_000_000 + base,
            headers: vec![],
        })
        .collect();
    build_batch(&records, ProducerFields::NONE)
}

fn mode_from(name: &str) -> IoMode {
    IoMode::parse(name).expect("mode name")
}

fn options(mode: IoMode, flush_messages: i64) -> LogOptions {
    let config = LogConfig {
        segment_bytes: 64 * 1024, // many rolls, so crashes land around them too
        index_interval_bytes: 1024,
        flush_messages,
        ..LogConfig::default()
    };
    LogOptions {
        config,
        io_mode: mode,
        writer: Default::default(),
        cache: (mode == IoMode::Direct).then(|| BatchCache::new(4 << 20)),
    }
}

#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return; // run directly: nothing to do
    };
    let mode = mode_from(&std::env::var(CHILD_MODE).expect("mode"));
    let flush_messages: i64 = std::env::var(CHILD_FLUSH_MESSAGES)
        .expect("flush policy")
        .parse()
        .expect("number");
    ferrite_shards::testing::run_local(|| async move {
        let log = Log::open(Path::new(&dir), options(mode, flush_messages))
            .await
            .expect("recover");
        println!("open {}", log.log_end_offset());
        let flusher = log.clone();
        glommio::spawn_local(async move {
            loop {
                glommio::timer::sleep(Duration::from_millis(40)).await;
                let _ = flusher.flush().await;
            }
        })
        .detach();
        let mut next = log.log_end_offset();
        loop {
            let bytes = batch_at(next);
            let valid = log.validate(&bytes, BatchOrigin::Client).expect("valid");
            let info = log.append(valid, 0).await.expect("append");
            assert_eq!(info.base_offset, next);
            let count = info.last_offset - info.base_offset + 1;
            println!("ack {} {}", info.base_offset, count);
            next = info.last_offset + 1;
        }
    });
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// When the kill comes.
#[derive(Copy, Clone)]
enum Kill {
    /// This long after the child has recovered and reported the log open.
    AfterOpen(Duration),
    /// This long after the child starts: maybe in the middle of its own recovery.
    AfterStart(Duration),
}

/// Runs the child until killed; returns the acknowledged (base, count) pairs.
fn run_child_and_kill(
    dir: &Path,
    mode: IoMode,
    flush_messages: i64,
    kill: Kill,
) -> Vec<(i64, i64)> {
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR, dir)
        .env(CHILD_MODE, mode.name())
        .env(CHILD_FLUSH_MESSAGES, flush_messages.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().expect("piped stdout");
    let (opened_tx, opened_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut acks = Vec::new();
        let mut opened = false;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            // libtest prints its own words before the child's first line.
            let line = match line.find("open ").or_else(|| line.find("ack ")) {
                Some(at) => &line[at..],
                None => continue,
            };
            let mut parts = line.split_whitespace();
            match parts.next() {
                Some("open") => {
                    opened = true;
                    let _ = opened_tx.send(());
                }
                Some("ack") => {
                    let base: i64 = parts.next().unwrap().parse().unwrap();
                    let count: i64 = parts.next().unwrap().parse().unwrap();
                    acks.push((base, count));
                }
                _ => {}
            }
        }
        (opened, acks)
    });
    let started = Instant::now();
    match kill {
        Kill::AfterOpen(after) => {
            let open = opened_rx.recv_timeout(OPEN_TIMEOUT);
            assert!(
                open.is_ok(),
                "the child did not recover within {OPEN_TIMEOUT:?}"
            );
            std::thread::sleep(after);
        }
        Kill::AfterStart(after) => std::thread::sleep(after),
    }
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    let _ = child.wait();
    let (opened, acks) = reader.join().expect("reader thread");
    if let Kill::AfterOpen(_) = kill {
        assert!(opened, "opened, after {:?}", started.elapsed());
    }
    acks
}

fn crash_repeatedly(mode: IoMode) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("crash-0");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ std::process::id() as u64);
    let mut acked: BTreeMap<i64, i64> = BTreeMap::new();
    for round in 0..ROUNDS_PER_MODE {
        let flush_messages = if round % 3 == 0 { 1 } else { i64::MAX };
        // Every fourth round the kill may land while the child is still recovering.
        let kill = if round % 4 == 3 {
            Kill::AfterStart(Duration::from_millis(rng.below(300)))
        } else {
            Kill::AfterOpen(Duration::from_millis(100 + rng.below(300)))
        };
        let acks = run_child_and_kill(&path, mode, flush_messages, kill);
        if let Kill::AfterOpen(_) = kill {
            assert!(
                !acks.is_empty(),
                "round {round}: the child acknowledged appends"
            );
        }
        for (base, count) in acks {
            acked.insert(base, count);
        }
    }
    // Every acknowledged batch is there, byte for byte, and the offsets leave no gap.
    ferrite_shards::testing::run_local(|| async move {
        let log = Log::open(&path, options(mode, i64::MAX))
            .await
            .expect("recover");
        let end = log.log_end_offset();
        let mut at = 0i64;
        let mut found: BTreeMap<i64, Bytes> = BTreeMap::new();
        while at < end {
            let r = log.read(at, 1 << 20, end).await.expect("read");
            let bytes = r.to_bytes().await.expect("bytes");
            for b in batch::split_batches(&bytes).expect("whole batches") {
                let h = BatchHeader::parse(&b).expect("header");
                assert_eq!(h.base_offset, at, "contiguous offsets");
                at = h.last_offset() + 1;
                found.insert(h.base_offset, b);
            }
        }
        for (base, count) in &acked {
            let stored = found
                .get(base)
                .unwrap_or_else(|| panic!("acknowledged batch at {base} is missing"));
            let mut want = batch_at(*base).to_vec();
            let stamp = batch::stamp(&want, *base, 0);
            want[..16].copy_from_slice(&stamp);
            assert_eq!(stored.as_ref(), &want[..], "batch at {base} intact");
            assert_eq!(BatchHeader::parse(stored).unwrap().offset_count(), *count);
        }
        // Appends continue after recovery.
        let next = batch_at(end);
        let valid = log.validate(&next, BatchOrigin::Client).unwrap();
        assert_eq!(log.append(valid, 0).await.unwrap().base_offset, end);
        println!(
            "{}: {} rounds, {} acknowledged batches checked, log end {end}, {} segments",
            mode.name(),
            ROUNDS_PER_MODE,
            acked.len(),
            log.segment_count()
        );
        log.close().await.unwrap();
    });
}

#[test]
fn acknowledged_batches_survive_kill_9_buffered() {
    crash_repeatedly(IoMode::Buffered);
}

#[test]
fn acknowledged_batches_survive_kill_9_direct() {
    crash_repeatedly(IoMode::Direct);
}
