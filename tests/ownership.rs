//! One broker per data directory and per address, and a process that ends when any part of it
//! fails: a second `ferrite serve` on a taken directory or port exits 2 having changed
//! nothing, a restart right after kill -9 gets the port to itself, and a panic on one shard ends
//! the whole process.

mod common;

use common::{free_port, kcat, kcat_consume, Broker};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// How long a refused second broker may take: the busy-address retry (2 s) and start-up.
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(15);

/// Every file under `dir` with its contents: what "changed nothing" is checked against.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else {
                out.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, &mut out);
    out
}

/// A second broker with these flags, run to its exit.
fn second_broker(data_dir: &Path, listen: &str, metrics: &str) -> Output {
    let mut cmd = Command::new(common::ferrite_binary());
    cmd.args([
        "serve",
        "--cores",
        "2",
        "--listen",
        listen,
        "--metrics",
        metrics,
    ])
    .arg("--data-dir")
    .arg(data_dir);
    common::run(cmd, None, REFUSAL_TIMEOUT)
}

fn produce_and_read_back(broker: &Broker, topic: &str) {
    kcat(broker, &["-P", "-t", topic], Some(b"one\ntwo\nthree\n"));
    assert_eq!(
        kcat_consume(broker, topic, "%s\n"),
        vec!["one", "two", "three"]
    );
}

#[test]
fn a_second_broker_on_the_same_data_directory_exits_2_naming_the_holder() {
    let first = Broker::start(&[]);
    produce_and_read_back(&first, "held");
    let before = snapshot(&first.data_dir);
    let out = second_broker(
        &first.data_dir,
        &format!("127.0.0.1:{}", free_port()),
        &format!("127.0.0.1:{}", free_port()),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&first.data_dir.display().to_string())
            && stderr.contains(&format!("pid {}", first.pid())),
        "the refusal names the directory and the holder: {stderr}"
    );
    assert_eq!(snapshot(&first.data_dir), before, "nothing on disk changed");
    produce_and_read_back(&first, "still-served");
}

#[test]
fn a_second_broker_on_a_taken_port_exits_2_and_leaves_no_data_directory() {
    let first = Broker::start(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("second");
    let out = second_broker(&data, &first.addr, &format!("127.0.0.1:{}", free_port()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&first.addr) && stderr.contains("address already in use"),
        "{stderr}"
    );
    assert!(!data.exists(), "a refused broker creates nothing");
    // Every new connection still reaches the first broker: a second one in the port's group
    // would have been handed some of them, on its own empty data directory.
    produce_and_read_back(&first, "only-one");
    for _ in 0..10 {
        let listed = kcat(&first, &["-L", "-t", "only-one"], None);
        assert!(
            String::from_utf8_lossy(&listed).contains("topic \"only-one\""),
            "every connection sees the first broker's topic"
        );
    }
}

#[test]
fn a_second_broker_on_a_taken_metrics_port_exits_2() {
    let first = Broker::start(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let out = second_broker(
        &tmp.path().join("second"),
        &format!("127.0.0.1:{}", free_port()),
        &first.metrics_addr,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("metrics endpoint")
            && stderr.contains(&first.metrics_addr)
            && stderr.contains("address already in use"),
        "{stderr}"
    );
    let (status, _) = common::http_get(&first.metrics_addr, "/metrics");
    assert!(
        status.contains("200"),
        "the first broker's endpoint answers"
    );
}

#[test]
fn a_restart_right_after_kill_9_has_the_port_to_itself() {
    let mut broker = Broker::start(&["--set", "num.partitions=2"]);
    let mut expected = Vec::new();
    for round in 0..3 {
        let line = format!("round-{round}");
        kcat(
            &broker,
            &["-P", "-t", "restarted", "-X", "acks=all", "-p", "0"],
            Some(format!("{line}\n").as_bytes()),
        );
        expected.push(line);
        // A client still connected when the broker dies: the broker's side closes first and
        // stays in TIME_WAIT on the Kafka port for a minute, which must not keep the restart
        // off the port.
        let open_connection = std::net::TcpStream::connect(&broker.addr).unwrap();
        broker.kill9();
        // At once: the dead process's listeners may linger for some milliseconds; the
        // restart waits them out (it would exit at start, failing here, if it gave up).
        broker.restart();
        drop(open_connection);
        // Fresh connections, each of which would fail if handed to a dying socket.
        for _ in 0..5 {
            assert_eq!(
                kcat_consume(&broker, "restarted", "%s\n"),
                expected,
                "round {round}"
            );
        }
    }
}

#[test]
fn a_panic_on_one_shard_ends_the_process_with_its_message_in_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    let mut broker = Broker::start_with_env(
        &tmp.path().join("data"),
        free_port(),
        &[],
        &[("FERRITE_TEST_PANIC_SHARD", "1")],
    );
    let status = broker
        .wait_exit(Duration::from_secs(20))
        .expect("the process ends after a shard panics");
    assert!(!status.success(), "a panic is a failure: {status}");
    let log = broker.log();
    assert!(
        log.contains("panic: aborting the process")
            && log.contains("asked shard 1 to panic")
            && log.contains("src/server/mod.rs"),
        "the panic's message and place are logged: {log}"
    );
}
