//! A broker that is starting: clients hammering it from the first moment the port could open
//! get right answers, never a panic or a wrong "unknown topic" for a partition it has. The
//! port opens only once every shard holds its partitions.

mod common;

use common::{wire, Broker};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TOPIC: &str = "loaded";
const PARTITIONS: i32 = 48;
const RECORDS: usize = 960;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// One client: connects as soon as the port accepts, then sends `ask` until told to stop,
/// counting the answers; every answer is checked by `ask` itself.
fn hammer(
    addr: String,
    stop: Arc<AtomicBool>,
    answered: Arc<AtomicUsize>,
    ask: impl Fn(&mut TcpStream, usize) + Send + 'static,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut n = 0;
        while !stop.load(Ordering::Acquire) && Instant::now() < deadline {
            let Ok(mut s) = TcpStream::connect(&addr) else {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            };
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            // A few requests per connection, then a new one: new connections land on every
            // shard.
            for _ in 0..4 {
                ask(&mut s, n);
                n += 1;
                answered.fetch_add(1, Ordering::AcqRel);
            }
        }
    })
}

fn latest_offsets(s: &mut TcpStream) -> Vec<(i32, i16, i64)> {
    wire::latest_offsets(s, TOPIC, PARTITIONS, 0)
}

#[test]
fn a_starting_broker_answers_every_request_rightly_from_the_first_moment() {
    let mut broker = Broker::start(&["--set", &format!("num.partitions={PARTITIONS}")]);
    let lines: Vec<String> = (0..RECORDS).map(|i| format!("r{i}")).collect();
    common::kcat(
        &broker,
        &["-P", "-t", TOPIC, "-X", "acks=all"],
        Some((lines.join("\n") + "\n").as_bytes()),
    );
    let expected = latest_offsets(&mut wire::connect(&broker));
    assert_eq!(expected.len(), PARTITIONS as usize);
    let total: i64 = expected.iter().map(|(_, _, o)| o).sum();
    assert_eq!(total, RECORDS as i64, "every record is counted once");
    assert!(broker.stop().success());

    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicUsize::new(0));
    let listing = {
        let expected = expected.clone();
        hammer(
            broker.addr.clone(),
            stop.clone(),
            answered.clone(),
            move |s, _| {
                assert_eq!(
                    latest_offsets(s),
                    expected,
                    "every partition answers its end offset, none is unknown"
                )
            },
        )
    };
    let metadata = hammer(
        broker.addr.clone(),
        stop.clone(),
        answered.clone(),
        |s, _| {
            let req = MetadataRequest::default()
                .with_topics(Some(vec![
                    MetadataRequestTopic::default().with_name(Some(name(TOPIC)))
                ]))
                .with_allow_auto_topic_creation(false);
            let resp: MetadataResponse = wire::call(s, ApiKey::Metadata, 9, &req);
            let t = &resp.topics[0];
            assert_eq!(t.error_code, 0, "the topic is known");
            assert_eq!(t.partitions.len(), PARTITIONS as usize);
            let node = resp.brokers[0].node_id;
            assert!(
                t.partitions
                    .iter()
                    .all(|p| p.error_code == 0 && p.leader_id == node),
                "every partition has its leader"
            );
        },
    );
    let creating = hammer(
        broker.addr.clone(),
        stop.clone(),
        answered.clone(),
        |s, n| {
            let topic = format!("born-{n}");
            let req = CreateTopicsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![CreatableTopic::default()
                    .with_name(name(&topic))
                    .with_num_partitions(2)
                    .with_replication_factor(1)]);
            let resp: CreateTopicsResponse = wire::call(s, ApiKey::CreateTopics, 4, &req);
            assert_eq!(resp.topics[0].error_code, 0, "{topic} is created");
        },
    );
    broker.restart();
    let at_ready = answered.load(Ordering::Acquire);
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Release);
    for t in [listing, metadata, creating] {
        t.join().expect("every answer was right");
    }
    let total = answered.load(Ordering::Acquire);
    assert!(
        total > at_ready,
        "the hammer ran while the broker served: {total}"
    );
    assert!(broker.is_running(), "the broker is still up");
    let log = broker.log();
    assert!(!log.contains("panicked"), "{log}");
}
