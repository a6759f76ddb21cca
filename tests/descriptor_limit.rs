//! The open file limit shares out, and never decides how many partitions a broker holds in
//! buffered mode: with `ulimit -n` at 1,000, a topic of 1,000 partitions is created, written and
//! read back through confluent-kafka, and served again after a restart, while each shard keeps
//! at most its share of segment files open. In direct mode (one O_DIRECT descriptor per
//! partition) the same topic is refused with INVALID_PARTITIONS before anything is created. A
//! limit too low for the shards stops the broker at start with the limit it needs.
//!
//! Its own binary: it lowers this process's limit, which the brokers inherit (nextest runs each
//! test in a process of its own).

mod common;

use common::wire::create_topic;
use common::{kcat, python, Broker};

const DESCRIPTOR_LIMIT: u64 = 1000;
const PARTITIONS: usize = 1000;

fn lower_descriptor_limit(to: u64) {
    let limit = libc::rlimit {
        rlim_cur: to,
        rlim_max: to,
    };
    // SAFETY: setrlimit with a struct we own; lowering is always allowed.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) }, 0);
}

fn open_descriptors(broker: &Broker) -> usize {
    std::fs::read_dir(format!("/proc/{}/fd", broker.pid()))
        .map(|d| d.count())
        .unwrap_or(0)
}

#[test]
fn more_partitions_than_open_files_are_created_written_read_and_restarted() {
    lower_descriptor_limit(DESCRIPTOR_LIMIT);
    let mut broker = Broker::start(&[]);
    assert!(
        broker
            .log()
            .contains("open file limit (ulimit -n) shared out"),
        "the limit is reported at start"
    );
    let (code, message) = create_topic(&broker, "wide", PARTITIONS as i32);
    assert_eq!(code, 0, "{message}");
    let partitions = PARTITIONS.to_string();
    let out = python(
        "confluent_every_partition.py",
        &[&broker.addr, "wide", &partitions, "2"],
    );
    assert!(
        out.contains("2000 records read back from 1000 partitions"),
        "{out}"
    );
    let open = open_descriptors(&broker);
    assert!(open < DESCRIPTOR_LIMIT as usize, "{open} descriptors open");
    // Two shards of (1000 - 256 - 2 × 32 pipes × 2) / 2 / 2 = 154 segment files each.
    let share = broker.metric("ferrite_segment_files_open_max");
    assert_eq!(share, 308.0);
    assert!(broker.metric("ferrite_segment_files_open") <= share);
    assert!(
        broker.metric("ferrite_segment_file_reopens_total") > 0.0,
        "1,000 partitions were served through 308 open files"
    );

    assert!(broker.stop().success());
    broker.restart();
    let out = python(
        "confluent_every_partition.py",
        &[&broker.addr, "wide", &partitions, "1", "--after", "2"],
    );
    assert!(
        out.contains("3000 records read back from 1000 partitions"),
        "{out}"
    );
}

#[test]
fn in_direct_mode_a_creation_the_descriptors_cannot_hold_is_refused() {
    lower_descriptor_limit(DESCRIPTOR_LIMIT);
    let dir = tempfile::tempdir().unwrap();
    let tuning = dir.path().join("tuning.toml");
    std::fs::write(&tuning, "[shards]\nio_mode = \"direct\"\n").unwrap();
    let mut broker = Broker::start(&["--config", tuning.to_str().unwrap()]);

    let (code, message) = create_topic(&broker, "too-many", PARTITIONS as i32);
    assert_eq!(code, 37, "INVALID_PARTITIONS: {message}");
    assert!(message.contains("file descriptors"), "{message}");
    assert!(message.contains("limit of 1000"), "{message}");
    let leftovers = std::fs::read_dir(&broker.data_dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("too-many"))
        .count();
    assert_eq!(leftovers, 0, "a refused topic left partition directories");

    // What fits is created; connections, produce and fetch go on.
    assert_eq!(create_topic(&broker, "fits", 40).0, 0);
    for round in 0..20 {
        kcat(
            &broker,
            &["-P", "-t", "fits", "-p", &(round % 40).to_string()],
            Some(format!("r{round}\n").as_bytes()),
        );
    }
    assert!(broker.stop().success());
    broker.restart();
    let read = kcat(
        &broker,
        &[
            "-C",
            "-t",
            "fits",
            "-p",
            "7",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%s\n",
        ],
        None,
    );
    assert_eq!(String::from_utf8_lossy(&read), "r7\n");
    assert!(
        broker
            .log()
            .contains("connections are bounded by the file descriptor limit"),
        "the lowered max.connections is logged"
    );
}

#[test]
fn a_limit_too_low_for_the_shards_stops_the_broker_at_start() {
    lower_descriptor_limit(300);
    let stderr = common::serve_refused(&["--cores", "2"]);
    assert!(
        stderr.contains("the open file limit (ulimit -n) is 300; 2 shards need at least 512"),
        "{stderr}"
    );
}
