//! The ZooKeeper harness itself: it starts a standalone server that answers, and leaves nothing
//! listening once dropped.

mod common;

use common::zookeeper::ZooKeeper;
use std::net::TcpStream;
use std::time::{Duration, Instant};

#[test]
fn zookeeper_starts_answers_and_stops_on_drop() {
    let started = Instant::now();
    let zk = ZooKeeper::start();
    eprintln!(
        "zookeeper served after {:?} on {}",
        started.elapsed(),
        zk.connect_string()
    );
    assert_eq!(zk.connect_string(), format!("127.0.0.1:{}", zk.port()));
    assert_eq!(zk.four_letter("ruok"), "imok");
    let srvr = zk.four_letter("srvr");
    assert!(srvr.contains("Mode: standalone"), "srvr answered:\n{srvr}");

    let addr = zk.connect_string();
    drop(zk);
    // Drop waits for the process, so the port is closed at once; the bound covers a slow kernel.
    let deadline = Instant::now() + Duration::from_secs(5);
    while TcpStream::connect(&addr).is_ok() {
        assert!(
            Instant::now() < deadline,
            "{addr} still accepts connections after drop"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
