//! Log append throughput and recovery time, printed as figures (not a timed test).
//!
//! `cargo bench -p ferrite-shards --bench log_append -- [--dir DIR] [--gib N] [--inflight N]
//! [--mode buffered|direct] [--batch-kib N] [--write-bytes N] [--writes-in-flight N]
//! [--no-recovery]`
//!
//! For each I/O mode and batch size (16 KiB and 256 KiB batches of 1 KiB records) it appends
//! `--gib` GiB with `--inflight` appends outstanding, ending with an fdatasync, and prints MB/s.
//! Then it fills one partition with 1 GiB, takes a recovery point, appends a little more and
//! abandons the log without closing it (as kill -9 would), and times reopening it; a reopen
//! after a clean close and one with no recovery point (a full scan) are timed for comparison.
//! `perf/log-vs-fio.sh` runs fio in the same directory and sets these figures beside it.

use bytes::Bytes;
use ferrite_shards::batch::build::{build_batch, NewRecord, ProducerFields};
use ferrite_shards::batch::BatchOrigin;
use ferrite_shards::log::{BatchCache, Log, LogOptions, WriterTuning};
use ferrite_shards::{IoMode, LogConfig};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Instant;

const RECORD_BYTES: usize = 1024;

struct Args {
    dir: PathBuf,
    gib: f64,
    inflight: usize,
    modes: Vec<IoMode>,
    /// Batch sizes to append, in bytes (16 KiB and 256 KiB unless `--batch-kib` picks one).
    batches: Vec<usize>,
    recovery: bool,
    /// The writer's tuning (the tuning file's `write_bytes_max`, `writes_in_flight`).
    writer: WriterTuning,
}

fn args() -> Args {
    let mut out = Args {
        dir: PathBuf::from("target/bench-data"),
        gib: 1.0,
        inflight: 8,
        modes: vec![IoMode::Buffered, IoMode::Direct],
        batches: vec![16 * 1024, 256 * 1024],
        recovery: true,
        writer: WriterTuning::default(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--dir" => out.dir = PathBuf::from(it.next().expect("--dir DIR")),
            "--gib" => out.gib = it.next().expect("--gib N").parse().expect("number"),
            "--inflight" => {
                out.inflight = it.next().expect("--inflight N").parse().expect("number")
            }
            "--mode" => {
                let m = it.next().expect("--mode buffered|direct");
                out.modes = vec![IoMode::parse(&m).expect("buffered or direct")];
            }
            "--no-recovery" => out.recovery = false,
            "--batch-kib" => {
                let kib: usize = it.next().expect("--batch-kib N").parse().expect("number");
                out.batches = vec![kib * 1024];
            }
            "--write-bytes" => {
                let n = it.next().expect("--write-bytes N").parse().expect("number");
                out.writer.write_bytes_max = Some(n);
            }
            "--writes-in-flight" => {
                let n = it
                    .next()
                    .expect("--writes-in-flight N")
                    .parse()
                    .expect("number");
                out.writer.writes_in_flight = n;
            }
            _ => {} // cargo bench passes --bench
        }
    }
    out
}

fn batch_of(batch_bytes: usize) -> Bytes {
    let count = (batch_bytes / (RECORD_BYTES + 20)).max(1);
    let records: Vec<NewRecord> = (0..count)
        .map(|i| NewRecord {
            key: None,
            value: Some(Bytes::from(vec![(i % 256) as u8; RECORD_BYTES])),
            timestamp_ms: ferrite_shards::types::now_ms(),
            headers: vec![],
        })
        .collect();
    build_batch(&records, ProducerFields::NONE)
}

fn options(mode: IoMode, writer: WriterTuning) -> LogOptions {
    LogOptions {
        config: LogConfig::default(),
        io_mode: mode,
        writer,
        cache: (mode == IoMode::Direct).then(|| BatchCache::new(64 << 20)),
    }
}

/// Appends `total_bytes` in batches of `batch`, `inflight` at a time, then fdatasyncs.
async fn fill(log: &Log, batch: &Bytes, total_bytes: u64, inflight: usize) -> Rates {
    let valid = Rc::new(log.validate(batch, BatchOrigin::Client).expect("valid"));
    let appends = (total_bytes / batch.len() as u64).max(1);
    let started = Instant::now();
    let workers: Vec<_> = (0..inflight)
        .map(|w| {
            let log = log.clone();
            let valid = valid.clone();
            glommio::spawn_local(async move {
                let mut i = w as u64;
                while i < appends {
                    log.append(valid.to_vec(), 0).await.expect("append");
                    i += inflight as u64;
                }
            })
        })
        .collect();
    for w in workers {
        w.await;
    }
    let appended = started.elapsed().as_secs_f64();
    log.flush().await.expect("flush");
    let bytes = (appends * batch.len() as u64) as f64;
    Rates {
        durable: bytes / started.elapsed().as_secs_f64(),
        acknowledged: bytes / appended,
    }
}

/// Bytes per second of a fill: until the final fdatasync returned, and until the last append
/// was acknowledged (before that fdatasync).
struct Rates {
    durable: f64,
    acknowledged: f64,
}

/// One throughput run: which mode and batch size, how much, and how the writer is tuned.
struct Run {
    mode: IoMode,
    batch_bytes: usize,
    total: u64,
    inflight: usize,
    writer: WriterTuning,
}

async fn throughput(root: &Path, run: Run) {
    let Run {
        mode,
        batch_bytes,
        total,
        inflight,
        writer,
    } = run;
    let dir = root.join(format!("append-{}-{batch_bytes}-0", mode.name()));
    let _ = std::fs::remove_dir_all(&dir);
    let log = Log::open(&dir, options(mode, writer)).await.expect("open");
    let batch = batch_of(batch_bytes);
    let rate = fill(&log, &batch, total, inflight).await;
    println!(
        "append mode={} batch_bytes={} bytes={} inflight={} mb_per_s={:.1} mb_per_s_before_fsync={:.1}",
        mode.name(),
        batch.len(),
        total,
        inflight,
        rate.durable / 1e6,
        rate.acknowledged / 1e6
    );
    log.close().await.expect("close");
    let _ = std::fs::remove_dir_all(&dir);
}

fn recovery(root: &Path, inflight: usize) {
    let dir = root.join("recovery-0");
    let _ = std::fs::remove_dir_all(&dir);
    let batch = batch_of(256 * 1024);
    let gib = 1u64 << 30;
    ferrite_shards::testing::run_local(|| {
        let dir = dir.clone();
        let batch = batch.clone();
        async move {
            let log = Log::open(&dir, options(IoMode::Buffered, WriterTuning::default()))
                .await
                .expect("open");
            fill(&log, &batch, gib, inflight).await;
            // A little more after the recovery point, then abandon the log unclosed.
            fill_unflushed(&log, &batch, 16 << 20).await;
            println!("recovery partition_bytes={}", log.size_bytes());
        }
    });
    let time_open = |label: &str| {
        let dir = dir.clone();
        let label = label.to_string();
        ferrite_shards::testing::run_local(|| async move {
            let started = Instant::now();
            let log = Log::open(&dir, options(IoMode::Buffered, WriterTuning::default()))
                .await
                .expect("open");
            let took = started.elapsed();
            println!(
                "recovery case={label} log_end={} open_ms={:.1}",
                log.log_end_offset(),
                took.as_secs_f64() * 1e3
            );
            log.close().await.expect("close");
        });
    };
    time_open("after_kill");
    time_open("after_clean_close");
    std::fs::remove_file(dir.join("recovery-point")).expect("remove recovery point");
    time_open("no_recovery_point_full_scan");
    let _ = std::fs::remove_dir_all(&dir);
}

async fn fill_unflushed(log: &Log, batch: &Bytes, bytes: u64) {
    let valid = log.validate(batch, BatchOrigin::Client).expect("valid");
    for _ in 0..(bytes / batch.len() as u64) {
        log.append(valid.clone(), 0).await.expect("append");
    }
}

fn main() {
    let args = args();
    std::fs::create_dir_all(&args.dir).expect("bench dir");
    let total = (args.gib * (1u64 << 30) as f64) as u64;
    for &mode in &args.modes {
        for &batch_bytes in &args.batches {
            let root = args.dir.clone();
            let run = Run {
                mode,
                batch_bytes,
                total,
                inflight: args.inflight,
                writer: args.writer,
            };
            ferrite_shards::testing::run_local(|| async move { throughput(&root, run).await });
        }
    }
    if args.recovery {
        recovery(&args.dir, args.inflight);
    }
}
