//! Mutated real requests on the wire: for every API and version the broker advertises, real
//! request frames (`common::requests`) with bytes flipped, lengths and counts overwritten with
//! extreme values, or cut short, each sent on its own connection. The broker must answer each
//! or close that connection, keep answering a fresh client throughout, lose none of the records
//! it acknowledged before, log no panic, and stay within a memory bound.

mod common;

use common::{kcat, kcat_consume, requests, wire, Broker};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Mutated frames per API version.
const MUTATIONS_PER_VERSION: usize = 12;
/// Clients sending at once.
const SENDERS: usize = 4;
/// How long one mutated request may go unanswered before its connection is dropped (a
/// mutated wait time or a join may legitimately hold it).
const ANSWER_WAIT: Duration = Duration::from_millis(500);
/// The broker's resident memory may not grow past this.
const RSS_BOUND_MIB: u64 = 512;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One mutation of a request (header and body, no size prefix).
fn mutate(frame: &mut Vec<u8>, rng: &mut Rng) {
    if frame.is_empty() {
        return;
    }
    match rng.below(4) {
        0 => {
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(frame.len());
                frame[at] ^= 1 + rng.below(255) as u8;
            }
        }
        1 => {
            let extreme = [-1i32, 0, i32::MAX, 0x1000_0000, 65_536, rng.next() as i32];
            let value = extreme[rng.below(extreme.len())];
            let at = rng.below(frame.len());
            for (k, b) in value.to_be_bytes().into_iter().enumerate() {
                if let Some(slot) = frame.get_mut(at + k) {
                    *slot = b;
                }
            }
        }
        2 => {
            let at = rng.below(frame.len());
            frame[at] = 0xff;
            if let Some(next) = frame.get_mut(at + 1) {
                *next = 0xff;
            }
        }
        _ => frame.truncate(rng.below(frame.len())),
    }
}

/// Sends one framed request; reads until an answer, a close or `ANSWER_WAIT`.
fn send(addr: &str, frame: &[u8]) {
    let Ok(mut s) = TcpStream::connect(addr) else {
        panic!("the broker stopped accepting connections");
    };
    s.set_read_timeout(Some(ANSWER_WAIT)).unwrap();
    let mut framed = (frame.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(frame);
    if s.write_all(&framed).is_err() {
        return;
    }
    let mut size = [0u8; 4];
    if s.read_exact(&mut size).is_ok() {
        let mut body = vec![0u8; i32::from_be_bytes(size).clamp(0, 64 << 20) as usize];
        let _ = s.read_exact(&mut body);
    }
}

fn served(broker: &Broker) -> Vec<(ApiKey, i16)> {
    let mut s = wire::connect(broker);
    let resp: ApiVersionsResponse = wire::call(
        &mut s,
        ApiKey::ApiVersions,
        2,
        &ApiVersionsRequest::default(),
    );
    resp.api_keys
        .iter()
        .flat_map(|k| {
            let key = ApiKey::try_from(k.api_key).unwrap();
            (k.min_version..=k.max_version).map(move |v| (key, v))
        })
        .collect()
}

fn answers_a_fresh_client(broker: &Broker) {
    let mut s = wire::connect(broker);
    let _: ApiVersionsResponse = wire::call(
        &mut s,
        ApiKey::ApiVersions,
        0,
        &ApiVersionsRequest::default(),
    );
}

fn rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kib / 1024
}

#[test]
fn mutated_requests_of_every_api_and_version_leave_the_broker_whole() {
    let mut broker = Broker::start(&["--set", "num.partitions=2"]);
    let kept: Vec<String> = (0..200).map(|i| format!("kept-{i}")).collect();
    kcat(
        &broker,
        &["-P", "-t", "kept", "-X", "acks=all"],
        Some((kept.join("\n") + "\n").as_bytes()),
    );
    let versions = served(&broker);
    assert!(
        versions.len() > 150,
        "{} versions advertised",
        versions.len()
    );

    let seed = std::env::var("FERRITE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_f022u64);
    println!("mutation seed {seed}");
    let mut frames = Vec::new();
    let mut rng = Rng(seed | 1);
    for &(api, version) in &versions {
        for _ in 0..MUTATIONS_PER_VERSION {
            let mut f = requests::frame(api, version);
            mutate(&mut f, &mut rng);
            frames.push(((api, version), f));
        }
    }
    let frames = Arc::new(frames);
    let sent = Arc::new(AtomicUsize::new(0));
    let senders: Vec<_> = (0..SENDERS)
        .map(|k| {
            let (frames, sent, addr) = (frames.clone(), sent.clone(), broker.addr.clone());
            std::thread::spawn(move || {
                for (_, f) in frames.iter().skip(k).step_by(SENDERS) {
                    send(&addr, f);
                    sent.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let mut peak_rss = 0;
    while sent.load(Ordering::Relaxed) < frames.len() {
        assert!(broker.is_running(), "the broker died:\n{}", broker.log());
        answers_a_fresh_client(&broker);
        peak_rss = peak_rss.max(rss_mib(broker.pid()));
        std::thread::sleep(Duration::from_millis(200));
        if senders.iter().all(|s| s.is_finished()) {
            break;
        }
    }
    for s in senders {
        s.join().expect("a sender failed");
    }
    println!(
        "{} mutated frames over {} API versions; peak RSS {peak_rss} MiB",
        frames.len(),
        versions.len()
    );
    assert!(broker.is_running(), "the broker died:\n{}", broker.log());
    answers_a_fresh_client(&broker);
    peak_rss = peak_rss.max(rss_mib(broker.pid()));
    assert!(
        peak_rss < RSS_BOUND_MIB,
        "resident memory reached {peak_rss} MiB"
    );
    let log = broker.log();
    assert!(!log.contains("panicked"), "{log}");

    let mut read = kcat_consume(&broker, "kept", "%s\n");
    read.sort();
    let mut expected = kept.clone();
    expected.sort();
    assert_eq!(read, expected, "records acknowledged before the mutations");
    // And again after a restart: nothing the mutations did is in the way.
    assert!(broker.stop().success(), "{}", broker.log());
    broker.restart();
    let mut again = kcat_consume(&broker, "kept", "%s\n");
    again.sort();
    assert_eq!(again, expected);
}
