//! Durability across restarts: a graceful stop keeps everything; kill -9 keeps every record
//! that was acknowledged with acks=all.

mod common;

use common::{kcat, kcat_consume, Broker, CLIENT_TIMEOUT};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

fn consume_all(broker: &Broker, topic: &str) -> Vec<(i32, i64, String)> {
    kcat_consume(broker, topic, "%p %o %s\n")
        .iter()
        .map(|l| {
            let mut it = l.splitn(3, ' ');
            (
                it.next().unwrap().parse().unwrap(),
                it.next().unwrap().parse().unwrap(),
                it.next().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_graceful_stop_keeps_everything() {
    let mut broker = Broker::start(&["--set", "num.partitions=3"]);
    let lines: Vec<String> = (0..3000).map(|i| format!("record-{i}")).collect();
    kcat(
        &broker,
        &["-P", "-t", "kept"],
        Some((lines.join("\n") + "\n").as_bytes()),
    );
    let before = consume_all(&broker, "kept");
    assert_eq!(before.len(), 3000);
    let status = broker.stop();
    assert!(status.success(), "SIGTERM exits 0, got {status}");
    broker.restart();
    let after = consume_all(&broker, "kept");
    let mut a = after.clone();
    let mut b = before.clone();
    a.sort();
    b.sort();
    assert_eq!(a, b, "every record at its offset after the restart");
    // Appends continue after the old end.
    kcat(
        &broker,
        &["-P", "-t", "kept", "-p", "0"],
        Some(b"one-more\n"),
    );
    // Keyless records may all have gone to other partitions (sticky partitioning).
    let p0_max = before
        .iter()
        .filter(|r| r.0 == 0)
        .map(|r| r.1)
        .max()
        .unwrap_or(-1);
    let again = consume_all(&broker, "kept");
    assert!(again.contains(&(0, p0_max + 1, "one-more".to_string())));
}

#[test]
fn kill_9_keeps_every_record_acknowledged_with_acks_all() {
    let mut broker = Broker::start(&["--set", "num.partitions=2"]);
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/acks_all_until_killed.py");
    let python = std::env::var("FERRITE_PYTHON")
        .unwrap_or_else(|_| format!("{}/.venv/bin/python", env!("CARGO_MANIFEST_DIR")));
    let mut producer = Command::new(python)
        .arg(script)
        .args([&broker.addr, "durable", "200000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("python producer");
    let stdout = producer.stdout.take().unwrap();
    let mut acked = Vec::new();
    let deadline = Instant::now() + CLIENT_TIMEOUT;
    let mut lines = BufReader::new(stdout).lines();
    // Kill the broker in the middle of the stream of acknowledgements.
    while acked.len() < 5000 {
        assert!(
            Instant::now() < deadline,
            "only {} acknowledgements",
            acked.len()
        );
        match lines.next() {
            Some(Ok(l)) if l.starts_with("ack ") => acked.push(l),
            Some(Ok(_)) => {}
            _ => panic!(
                "producer ended early after {} acknowledgements",
                acked.len()
            ),
        }
    }
    broker.kill9();
    for l in lines.map_while(Result::ok) {
        if l.starts_with("ack ") {
            acked.push(l);
        }
    }
    let _ = producer.wait();
    broker.restart();
    let stored: std::collections::HashSet<(i32, i64, String)> =
        consume_all(&broker, "durable").into_iter().collect();
    for l in &acked {
        let mut it = l.split(' ').skip(1);
        let p: i32 = it.next().unwrap().parse().unwrap();
        let o: i64 = it.next().unwrap().parse().unwrap();
        let v = it.next().unwrap().to_string();
        assert!(
            stored.contains(&(p, o, v.clone())),
            "acknowledged {v} at {p}/{o} is missing after kill -9"
        );
    }
    println!(
        "{} acknowledged records checked after kill -9, {} stored",
        acked.len(),
        stored.len()
    );
}
