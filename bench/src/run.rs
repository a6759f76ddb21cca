//! One run: set up the topic, start the tasks on pinned threads, print a line a second, then
//! the summary (and the JSON file).

use crate::{Options, PartitionerArg};
use anyhow::{anyhow, Context, Result};
use ferrite_bench::client::{self, TopicLayout};
use ferrite_bench::consumer::{ConsumeConfig, Consumer};
use ferrite_bench::partitioner::Partitioner;
use ferrite_bench::producer::{ProduceConfig, Producer};
use ferrite_bench::stats::{Stats, Tick};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long e2e consumers keep reading after the producers finished.
const E2E_DRAIN: Duration = Duration::from_secs(15);

fn bootstrap(brokers: &str) -> Result<String> {
    let mut last = None;
    for b in brokers.split(',').map(str::trim).filter(|b| !b.is_empty()) {
        match client::Conn::connect(b) {
            Ok(_) => return Ok(b.to_string()),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| anyhow!("--brokers names no broker")))
}

/// Starts `f` on a thread pinned to a core, spreading threads over the cores in turn.
/// Counts it in `running` while it runs, and records when it ended in `last_ended`.
fn pinned<T: Send + 'static>(
    i: usize,
    running: &Arc<AtomicUsize>,
    last_ended: &Arc<Mutex<Option<Instant>>>,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> JoinHandle<Result<T>> {
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    let core = (!cores.is_empty()).then(|| cores[i % cores.len()]);
    running.fetch_add(1, Ordering::SeqCst);
    let running = running.clone();
    let last_ended = last_ended.clone();
    std::thread::spawn(move || {
        if let Some(c) = core {
            core_affinity::set_for_current(c);
        }
        let r = f();
        let now = Instant::now();
        let mut last = last_ended.lock().expect("last_ended lock");
        *last = Some(last.map_or(now, |l| l.max(now)));
        drop(last);
        running.fetch_sub(1, Ordering::SeqCst);
        r
    })
}

struct Tasks {
    producers: Vec<JoinHandle<Result<u64>>>,
    consumers: Vec<JoinHandle<Result<()>>>,
    producers_running: Arc<AtomicUsize>,
    consumers_running: Arc<AtomicUsize>,
    /// When the last task to end ended: the run's measured time stops there, not when the
    /// once-a-second report (which looks every 100 ms) noticed.
    last_ended: Arc<Mutex<Option<Instant>>>,
}

pub fn run(mode: &str, o: &Options) -> Result<bool> {
    let boot = bootstrap(&o.brokers)?;
    if o.create {
        client::create_topic(&boot, &o.topic, o.partitions, o.replication_factor)?;
    }
    let layout = client::topic_layout(&boot, &o.topic)?;
    let main = Arc::new(Stats::default());
    let produced = Arc::new(Stats::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Tasks {
        producers: Vec::new(),
        consumers: Vec::new(),
        producers_running: Arc::default(),
        consumers_running: Arc::default(),
        last_ended: Arc::default(),
    };
    let produce_stats = if mode == "e2e" {
        produced.clone()
    } else {
        main.clone()
    };
    if mode == "consume" || mode == "e2e" {
        let e2e = mode == "e2e";
        let start = client::offsets(&layout, &o.topic, if e2e { -1 } else { -2 })?;
        // Without a count or a duration, `consume` reads the backlog that is there now.
        let end_offsets = (!e2e && o.messages.is_none() && o.duration.is_none())
            .then(|| client::offsets(&layout, &o.topic, -1))
            .transpose()?;
        let cfg = ConsumeConfig {
            topic: o.topic.clone(),
            consumers: o.consumers,
            messages: o.messages,
            duration: if e2e { None } else { o.duration() },
            end_offsets,
            e2e,
            verify: o.verify,
            size: o.size,
            group: o.group.clone(),
            bootstrap: boot.clone(),
        };
        for i in 0..o.consumers {
            let c = Consumer::new(
                i,
                cfg.clone(),
                layout.clone(),
                start.clone(),
                main.clone(),
                stop.clone(),
            );
            tasks.consumers.push(pinned(
                i + 1,
                &tasks.consumers_running,
                &tasks.last_ended,
                move || c.run(),
            ));
        }
    }
    if mode == "produce" || mode == "e2e" {
        let cfg = produce_config(o);
        for i in 0..o.producers {
            let p = Producer::new(
                i as u32,
                cfg.clone(),
                layout.clone(),
                produce_stats.clone(),
                stop.clone(),
            );
            tasks.producers.push(pinned(
                i,
                &tasks.producers_running,
                &tasks.last_ended,
                move || p.run(),
            ));
        }
    }
    let reported = report(mode, o, &main, &produced, &tasks, &stop);
    let mut sent_total = 0u64;
    for p in tasks.producers {
        sent_total += p
            .join()
            .map_err(|_| anyhow!("a producer thread panicked"))??;
    }
    for c in tasks.consumers {
        c.join()
            .map_err(|_| anyhow!("a consumer thread panicked"))??;
    }
    let ended = tasks
        .last_ended
        .lock()
        .expect("last_ended lock")
        .unwrap_or_else(Instant::now);
    let seconds = ended
        .saturating_duration_since(reported.measured_from)
        .as_secs_f64()
        .max(1e-9);
    summarize(
        mode, o, &main, &produced, &layout, seconds, sent_total, reported,
    )
}

fn produce_config(o: &Options) -> ProduceConfig {
    ProduceConfig {
        topic: o.topic.clone(),
        messages: o.messages,
        duration: o.duration(),
        size: o.size,
        batch_bytes: o.batch_bytes,
        max_request_bytes: o.max_request_bytes,
        buffer_bytes: o.buffer_bytes,
        linger: Duration::from_millis(o.linger_ms),
        // A transactional producer writes with acks=all (Kafka's producer requires it).
        acks: if o.transactional_id.is_some() {
            -1
        } else {
            o.acks()
        },
        compression: o.compression(),
        keys: o.keys,
        partitioner: match o.partitioner {
            PartitionerArg::RoundRobin => Partitioner::RoundRobin,
            PartitionerArg::Sticky => Partitioner::Sticky,
            PartitionerArg::Hash => Partitioner::Hash,
        },
        producers: o.producers,
        rate: o.rate,
        transactional_id: o.transactional_id.clone(),
        transaction_records: o.transaction_records,
    }
}

/// What the once-a-second report saw over the run.
struct Reported {
    timeline: Vec<Tick>,
    /// When measuring began (after the warm-up).
    measured_from: Instant,
    /// Bytes moved during the warm-up, which the totals leave out. The perf harness adds them
    /// back when it divides the broker's CPU time (taken over the whole run) by bytes.
    warmup_bytes: u64,
}

/// Prints a line a second until the tasks are done.
fn report(
    mode: &str,
    o: &Options,
    main: &Stats,
    produced: &Stats,
    tasks: &Tasks,
    stop: &AtomicBool,
) -> Reported {
    let started = Instant::now();
    let mut warmup_bytes = 0;
    let mut measured_from = started;
    let warmup = Duration::from_secs_f64(o.warmup.max(0.0));
    let mut warming = !warmup.is_zero();
    let mut ticks = Vec::new();
    let (mut last_msgs, mut last_bytes, mut last_at) = (0u64, 0u64, started);
    let mut producers_done_at: Option<Instant> = None;
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let producers = tasks.producers_running.load(Ordering::SeqCst);
        let consumers = tasks.consumers_running.load(Ordering::SeqCst);
        if mode == "e2e" && producers == 0 {
            let done_at = *producers_done_at.get_or_insert_with(Instant::now);
            let all_in =
                main.messages.load(Ordering::Relaxed) >= produced.messages.load(Ordering::Relaxed);
            if all_in || done_at.elapsed() > E2E_DRAIN {
                stop.store(true, Ordering::Relaxed);
            }
        }
        if producers == 0 && consumers == 0 {
            break;
        }
        if warming && started.elapsed() >= warmup {
            warmup_bytes = main.bytes.load(Ordering::Relaxed);
            main.reset();
            produced.reset();
            warming = false;
            measured_from = Instant::now();
            (last_msgs, last_bytes, last_at) = (0, 0, measured_from);
            continue;
        }
        if last_at.elapsed() < Duration::from_secs(1) {
            continue;
        }
        let now = Instant::now();
        let msgs = main.messages.load(Ordering::Relaxed);
        let bytes = main.bytes.load(Ordering::Relaxed);
        let dt = (now - last_at).as_secs_f64();
        let p99 = if mode == "e2e" {
            main.e2e_percentile_ms(0.99)
        } else {
            main.ack_percentile_ms(0.99)
        };
        let tick = Tick {
            second: (now - measured_from).as_secs_f64(),
            msgs_per_sec: (msgs - last_msgs) as f64 / dt,
            mb_per_sec: (bytes - last_bytes) as f64 / dt / 1e6,
            p99_ms: p99,
        };
        let label = if mode == "e2e" { "e2e p99" } else { "ack p99" };
        let p99_text = match (mode, p99) {
            ("consume", _) | (_, None) => String::new(),
            (_, Some(v)) => format!("  {label} {v:.2} ms"),
        };
        println!(
            "[{:6.1}s{}] {mode:<7} {:>10.0} msg/s {:>8.1} MB/s{p99_text}  errors {}",
            tick.second,
            if warming { " warm-up" } else { "" },
            tick.msgs_per_sec,
            tick.mb_per_sec,
            main.error_total() + produced.error_total()
        );
        if !warming {
            ticks.push(tick);
        }
        (last_msgs, last_bytes, last_at) = (msgs, bytes, now);
    }
    Reported {
        timeline: ticks,
        measured_from,
        warmup_bytes,
    }
}

fn latency_line(name: &str, v: &Value) -> String {
    format!(
        "{name} ms: p50 {:.3}  p90 {:.3}  p99 {:.3}  p99.9 {:.3}  p99.99 {:.3}  max {:.3}",
        v["p50"].as_f64().unwrap_or(0.0),
        v["p90"].as_f64().unwrap_or(0.0),
        v["p99"].as_f64().unwrap_or(0.0),
        v["p999"].as_f64().unwrap_or(0.0),
        v["p9999"].as_f64().unwrap_or(0.0),
        v["max"].as_f64().unwrap_or(0.0),
    )
}

#[allow(clippy::too_many_arguments)]
fn summarize(
    mode: &str,
    o: &Options,
    main: &Stats,
    produced: &Stats,
    layout: &TopicLayout,
    seconds: f64,
    sent_total: u64,
    reported: Reported,
) -> Result<bool> {
    let messages = main.messages.load(Ordering::Relaxed);
    let bytes = main.bytes.load(Ordering::Relaxed);
    let mut errors: HashMap<String, u64> = HashMap::new();
    for (code, n) in main.errors().into_iter().chain(produced.errors()) {
        *errors.entry(code.to_string()).or_default() += n;
    }
    let error_total: u64 = errors.values().sum();
    let verify_failures = main.verify_failures.load(Ordering::Relaxed);
    let duplicates = main.duplicates.load(Ordering::Relaxed);
    println!(
        "{mode}: {messages} messages, {:.1} MB in {seconds:.2} s: {:.0} msg/s, {:.1} MB/s; errors {error_total}{}",
        bytes as f64 / 1e6,
        messages as f64 / seconds,
        bytes as f64 / seconds / 1e6,
        if errors.is_empty() { String::new() } else { format!(" {errors:?}") }
    );
    let producing = if mode == "e2e" { produced } else { main };
    let ack = producing.ack_json();
    if let Some(v) = &ack {
        println!("{}", latency_line("acknowledgement latency", v));
    }
    let request = producing.request_json();
    if let Some(v) = &request {
        println!("{}", latency_line("produce request latency", v));
    }
    let produce_batches = producing.produce_batches.load(Ordering::Relaxed);
    let produce_requests = request
        .as_ref()
        .and_then(|v| v["count"].as_u64())
        .unwrap_or(0);
    if produce_batches > 0 && produce_requests > 0 {
        println!(
            "produce requests: {produce_requests}, {:.1} batches each, {:.1} records a batch",
            produce_batches as f64 / produce_requests as f64,
            producing.messages.load(Ordering::Relaxed) as f64 / produce_batches as f64,
        );
    }
    let produce_retries = producing.produce_retries.load(Ordering::Relaxed);
    let produce_retried_records = producing.produce_retried_records.load(Ordering::Relaxed);
    if produce_retries > 0 {
        println!(
            "produce: {produce_retries} batches ({produce_retried_records} records) sent again \
             after a retriable error"
        );
    }
    let e2e = main.e2e_json();
    if let Some(v) = &e2e {
        println!("{}", latency_line("end-to-end latency", v));
    }
    if o.verify {
        println!(
            "verify: {verify_failures} records failed the content check, {duplicates} came twice"
        );
    }
    let summed = |counter: fn(&Stats) -> &AtomicU64| {
        counter(produced).load(Ordering::Relaxed) + counter(main).load(Ordering::Relaxed)
    };
    let transactions = summed(|s| &s.transactions);
    let per_transaction_ms = |counter: fn(&Stats) -> &AtomicU64| {
        summed(counter) as f64 / transactions.max(1) as f64 / 1000.0
    };
    let transaction_json = json!({
        "committed": transactions,
        "add_partitions_ms": per_transaction_ms(|s| &s.begin_micros),
        "drain_ms": per_transaction_ms(|s| &s.drain_micros),
        "end_txn_ms": per_transaction_ms(|s| &s.commit_micros),
        "retries": summed(|s| &s.transaction_retries),
    });
    if transactions > 0 {
        println!(
            "transactions: {transactions} committed, {:.0} per second; mean per transaction: \
             waiting for AddPartitionsToTxn {:.3} ms, last acknowledgements {:.3} ms, EndTxn {:.3} ms; \
             {} coordinator calls retried",
            transactions as f64 / seconds,
            transaction_json["add_partitions_ms"]
                .as_f64()
                .unwrap_or(0.0),
            transaction_json["drain_ms"].as_f64().unwrap_or(0.0),
            transaction_json["end_txn_ms"].as_f64().unwrap_or(0.0),
            transaction_json["retries"],
        );
    }
    if let Some(path) = &o.json {
        let mut out = json!({
            "mode": mode,
            "messages": messages,
            "bytes": bytes,
            "warmup_bytes": reported.warmup_bytes,
            "seconds": seconds,
            "msgs_per_sec": messages as f64 / seconds,
            "mb_per_sec": bytes as f64 / seconds / 1e6,
            "errors": error_total,
            "errors_by_code": errors,
            "transactions": transactions,
            "transaction_costs": transaction_json,
            "sent": sent_total,
            "produce_batches": produce_batches,
            "produce_requests": produce_requests,
            "produce_retries": produce_retries,
            "produce_retried_records": produce_retried_records,
            "partitions": layout.partitions.len(),
            "timeline": reported.timeline.iter().map(Tick::json).collect::<Vec<_>>(),
            "config": {
                "brokers": o.brokers, "topic": o.topic, "size": o.size, "batch_bytes": o.batch_bytes,
                "max_request_bytes": o.max_request_bytes, "buffer_bytes": o.buffer_bytes,
                "linger_ms": o.linger_ms, "acks": format!("{:?}", o.acks), "compression": format!("{:?}", o.compression),
                "keys": o.keys, "partitioner": format!("{:?}", o.partitioner), "producers": o.producers,
                "consumers": o.consumers, "rate": o.rate, "warmup": o.warmup, "messages": o.messages,
                "duration": o.duration,
            },
        });
        if let Some(a) = ack {
            out["latency_ms"] = a;
        }
        if let Some(e) = e2e {
            out["e2e_latency_ms"] = e;
        }
        if let Some(r) = request {
            out["request_latency_ms"] = r;
        }
        if mode == "e2e" {
            out["produced"] = json!({
                "messages": produced.messages.load(Ordering::Relaxed),
                "bytes": produced.bytes.load(Ordering::Relaxed),
            });
        }
        if o.verify {
            out["verify_failures"] = json!(verify_failures);
            out["duplicates"] = json!(duplicates);
        }
        std::fs::write(path, serde_json::to_vec_pretty(&out)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(error_total == 0 && verify_failures == 0 && duplicates == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_ends_when_its_last_task_ends() {
        let running = Arc::new(AtomicUsize::new(0));
        let last_ended: Arc<Mutex<Option<Instant>>> = Arc::default();
        let (tx, rx) = std::sync::mpsc::channel();
        let quick = pinned(0, &running, &last_ended, || Ok(Instant::now()));
        let slow = pinned(1, &running, &last_ended, move || {
            // Ends only after the quick one has.
            rx.recv().expect("the quick task's end");
            Ok(Instant::now())
        });
        let quick_returned = quick.join().unwrap().unwrap();
        tx.send(()).unwrap();
        let slow_returned = slow.join().unwrap().unwrap();
        let ended = last_ended.lock().unwrap().expect("recorded");
        assert!(ended >= slow_returned && slow_returned >= quick_returned);
        assert_eq!(running.load(Ordering::SeqCst), 0);
    }
}
