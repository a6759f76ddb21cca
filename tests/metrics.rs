//! The Prometheus endpoint, scraped while confluent-kafka produces and consumes: its counters
//! move forward during the run and, at the end, match what was sent.

mod common;

use common::Broker;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One sample: metric name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

fn parse(body: &str) -> Vec<Sample> {
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').expect("series and value");
            let value: f64 = match value {
                "+Inf" => f64::INFINITY,
                v => v.parse().unwrap_or_else(|_| panic!("bad value in {l}")),
            };
            let (name, labels) = match series.split_once('{') {
                Some((n, rest)) => (n, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            let labels = labels
                .split(',')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').expect("label=value");
                    (k.to_string(), v.trim_matches('"').to_string())
                })
                .collect();
            (name.to_string(), labels, value)
        })
        .collect()
}

fn scrape(broker: &Broker) -> Vec<Sample> {
    let (head, body) = common::http_get(&broker.metrics_addr, "/metrics");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    parse(&body)
}

/// The sum of `name` over the series whose labels include every pair of `filter`.
fn sum(samples: &[Sample], name: &str, filter: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|(n, labels, _)| {
            n == name
                && filter
                    .iter()
                    .all(|(k, v)| labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|(_, _, v)| v)
        .sum()
}

fn log_file_bytes(broker: &Broker, topic: &str) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(&broker.data_dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.rsplit_once('-').map(|(t, _)| t) != Some(topic) {
            continue;
        }
        for f in std::fs::read_dir(entry.path()).unwrap() {
            let f = f.unwrap();
            if f.path().extension().is_some_and(|e| e == "log") {
                total += f.metadata().unwrap().len();
            }
        }
    }
    total
}

#[test]
fn a_scrape_during_produce_and_consume_counts_what_was_sent() {
    const COUNT: usize = 3000;
    let broker = Broker::start(&[]);
    let bootstrap = broker.addr.clone();
    let client = std::thread::spawn(move || {
        common::python(
            "metrics_produce_consume.py",
            &[&bootstrap, "scraped", &COUNT.to_string()],
        )
    });
    // Scrape while the client runs: what was appended only ever grows.
    let mut during = Vec::new();
    while !client.is_finished() {
        let samples = scrape(&broker);
        during.push(sum(
            &samples,
            "ferrite_partition_appended_records_total",
            &[("topic", "scraped")],
        ));
        std::thread::sleep(Duration::from_millis(100));
    }
    let report = client.join().expect("client thread");
    assert!(
        report.contains(&format!("\"consumed\": {COUNT}")),
        "{report}"
    );
    assert!(
        during.len() >= 3,
        "only {} scrapes during the run",
        during.len()
    );
    assert!(
        during.windows(2).all(|w| w[0] <= w[1]),
        "appended records went backwards: {during:?}"
    );
    assert!(
        during.iter().any(|&n| n > 0.0 && n < COUNT as f64),
        "no scrape saw the run half way: {during:?}"
    );

    let s = scrape(&broker);
    let topic = [("topic", "scraped")];
    let n = COUNT as f64;
    assert_eq!(
        sum(&s, "ferrite_partition_appended_records_total", &topic),
        n
    );
    assert_eq!(sum(&s, "ferrite_partition_log_end_offset", &topic), n);
    assert_eq!(sum(&s, "ferrite_partition_high_watermark", &topic), n);
    assert_eq!(sum(&s, "ferrite_partition_log_start_offset", &topic), 0.0);
    // Batches are stored as the client sent them: appended bytes are the files' bytes.
    let on_disk = log_file_bytes(&broker, "scraped") as f64;
    assert!(on_disk > n * 30.0, "{on_disk} bytes on disk");
    assert_eq!(
        sum(&s, "ferrite_partition_appended_bytes_total", &topic),
        on_disk
    );
    assert_eq!(sum(&s, "ferrite_partition_size_bytes", &topic), on_disk);
    // The consumer read every batch at least once.
    let fetched = sum(&s, "ferrite_partition_fetched_bytes_total", &topic);
    assert!(fetched >= on_disk, "fetched {fetched} of {on_disk}");
    assert!(sum(&s, "ferrite_network_received_bytes_total", &[]) > on_disk);
    assert!(sum(&s, "ferrite_network_sent_bytes_total", &[]) > fetched);
    // Every request is counted once, with its latency.
    for api in ["Produce", "Fetch", "Metadata", "JoinGroup", "OffsetCommit"] {
        let requests = sum(&s, "ferrite_requests_total", &[("api", api)]);
        assert!(requests >= 1.0, "no {api} requests counted");
        assert_eq!(
            sum(
                &s,
                "ferrite_request_duration_seconds_count",
                &[("api", api)]
            ),
            requests,
            "{api}"
        );
        assert_eq!(
            sum(
                &s,
                "ferrite_request_duration_seconds_bucket",
                &[("api", api), ("le", "+Inf")]
            ),
            requests,
            "{api}"
        );
    }
    assert_eq!(sum(&s, "ferrite_requests_refused_total", &[]), 0.0);
    // librdkafka joins with an empty member id first; the coordinator answers
    // MEMBER_ID_REQUIRED (79) and the member joins again with the id it was given.
    assert!(
        sum(
            &s,
            "ferrite_request_errors_total",
            &[("api", "JoinGroup"), ("error_code", "79")]
        ) >= 1.0
    );
    assert_eq!(
        sum(&s, "ferrite_request_errors_total", &[("api", "Produce")]),
        0.0
    );
    // The group committed and left: one empty group, coordinated by one of the two shards.
    assert_eq!(
        sum(&s, "ferrite_consumer_groups", &[("state", "Empty")]),
        1.0
    );
    assert_eq!(sum(&s, "ferrite_under_replicated_partitions", &[]), 0.0);
    for shard in ["0", "1"] {
        let held = s
            .iter()
            .filter(|(name, l, _)| {
                name == "ferrite_partition_log_end_offset"
                    && l.get("shard").map(String::as_str) == Some(shard)
            })
            .count() as f64;
        assert!(held > 0.0, "shard {shard} holds partitions");
        assert_eq!(
            sum(
                &s,
                "ferrite_partitions",
                &[("shard", shard), ("role", "leader")]
            ),
            held,
            "shard {shard} leads every partition it holds"
        );
    }
    // Four partitions over two shards: the client's calls hop between cores.
    assert!(sum(&s, "ferrite_router_calls_total", &[("target", "remote")]) > 0.0);
    assert!(s
        .iter()
        .any(|(name, _, _)| name == "ferrite_fsync_duration_seconds_count"));

    let (head, _) = common::http_get(&broker.metrics_addr, "/nothing-here");
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
}

#[test]
fn refused_requests_and_error_codes_are_counted() {
    let broker = Broker::start(&["--cores", "1"]);
    let mut s = TcpStream::connect(&broker.addr).unwrap();
    // A frame of 12 bytes whose API key Ferrite does not serve (key 999).
    s.write_all(&[0, 0, 0, 8, 0x03, 0xe7, 0, 0, 0, 0, 0, 1])
        .unwrap();
    let mut buf = [0u8; 16];
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(s.read(&mut buf).unwrap_or(0), 0, "the broker closes it");
    // Metadata for a name Kafka does not allow answers INVALID_TOPIC_EXCEPTION (17).
    common::kcat(&broker, &["-L", "-t", "bad/name"], None);
    let samples = scrape(&broker);
    assert!(
        sum(
            &samples,
            "ferrite_request_errors_total",
            &[("api", "Metadata"), ("error_code", "17")]
        ) >= 1.0
    );
    assert_eq!(
        sum(
            &samples,
            "ferrite_requests_refused_total",
            &[("api", "Unknown")]
        ),
        1.0
    );
}
