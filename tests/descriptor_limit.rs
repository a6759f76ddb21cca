//! File descriptors are never the limit that fails first: with a descriptor limit of 600, a
//! topic of 1,000 partitions (which would take more than 1,000 descriptors) is refused with
//! INVALID_PARTITIONS before anything is created, and the broker goes on accepting
//! connections and restarts on its data directory. Its own binary: it lowers this process's
//! limit, which the broker inherits.

mod common;

use common::wire::create_topic;
use common::{kcat, Broker};

const DESCRIPTOR_LIMIT: u64 = 600;

#[test]
fn a_creation_the_descriptors_cannot_hold_is_refused_and_the_broker_serves_on() {
    let limit = libc::rlimit {
        rlim_cur: DESCRIPTOR_LIMIT,
        rlim_max: DESCRIPTOR_LIMIT,
    };
    // SAFETY: setrlimit with a struct we own; lowering is always allowed.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) }, 0);
    let mut broker = Broker::start(&[]);

    let (code, message) = create_topic(&broker, "too-many", 1000);
    assert_eq!(code, 37, "INVALID_PARTITIONS: {message}");
    assert!(message.contains("file descriptors"), "{message}");
    assert!(message.contains("limit of 600"), "{message}");
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
