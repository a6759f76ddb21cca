//! Structured logs: `--log-format json` writes one JSON object per line, each event carrying
//! the spans it happened in (shard, connection with its client id, and at debug level the
//! request), and `--log-level` filters them.

mod common;

use common::Broker;

fn json_lines(log: &str) -> Vec<serde_json::Value> {
    log.lines()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not one JSON object ({e}): {l}"))
        })
        .collect()
}

fn span<'a>(event: &'a serde_json::Value, name: &str) -> Option<&'a serde_json::Value> {
    event["spans"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == name)
}

/// Produces one record with kcat to a topic it auto-creates, and returns the broker's events
/// and the one that says the topic was created (logged inside the Metadata request).
fn auto_create_logged(log_level: &str) -> (Vec<serde_json::Value>, serde_json::Value) {
    let mut broker = Broker::start(&["--log-format", "json", "--log-level", log_level]);
    common::kcat(&broker, &["-t", "logged", "-P"], Some(b"one\n"));
    broker.stop();
    let events = json_lines(&broker.log());
    let created = events
        .iter()
        .find(|e| e["fields"]["message"] == "auto-created topic")
        .unwrap_or_else(|| panic!("no auto-create event in {events:#?}"))
        .clone();
    (events, created)
}

#[test]
fn json_logs_carry_shard_and_connection_context() {
    let (events, created) = auto_create_logged("info");
    let created = &created;
    assert_eq!(created["fields"]["topic"], "logged");
    assert_eq!(created["level"], "INFO");
    assert!(
        span(created, "shard").is_some_and(|s| s["id"].is_u64()),
        "{created}"
    );
    assert!(
        span(created, "conn").is_some_and(|s| s["peer"]
            .as_str()
            .is_some_and(|p| p.starts_with("127.0.0.1:"))
            && s["client"] == "rdkafka"),
        "{created}"
    );
    assert!(
        span(created, "request").is_none(),
        "a request's own span is at debug level: {created}"
    );
    assert!(events.iter().any(|e| e["fields"]["message"] == "stopped"));
    assert!(
        events.iter().all(|e| e["level"] != "DEBUG"),
        "--log-level info hides debug events"
    );
}

#[test]
fn at_debug_level_events_carry_their_request() {
    let (_, created) = auto_create_logged("info,ferrite::handlers=debug");
    let request = span(&created, "request").expect("request span");
    assert_eq!(request["api"], "Metadata", "{created}");
    assert!(
        request["corr"].is_i64() && request["client"] == "rdkafka",
        "{created}"
    );
    assert!(span(&created, "conn").is_some(), "{created}");
}

#[test]
fn the_log_level_lets_debug_events_through() {
    let mut broker = Broker::start(&["--log-level", "ferrite=debug", "--cores", "1"]);
    common::kcat(&broker, &["-L"], None);
    broker.stop();
    let log = broker.log();
    assert!(log.contains("DEBUG"), "{log}");
    assert!(log.contains("shard{id=0}"), "{log}");
}
