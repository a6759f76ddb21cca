//! confluent-kafka (librdkafka 2.16) and kafka-python 3 against the real broker.

mod common;

use common::{python, Broker};

#[test]
fn confluent_admin_client_creates_describes_grows_and_deletes_topics() {
    let broker = Broker::start(&[]);
    let out = python("confluent_admin.py", &[&broker.addr]);
    assert!(out.contains("admin ok"), "{out}");
}

#[test]
fn confluent_producer_and_assign_consumer() {
    let broker = Broker::start(&[]);
    let out = python("confluent_produce_consume.py", &[&broker.addr]);
    assert!(out.contains("produce/consume ok"), "{out}");
}

#[test]
fn kafka_python_with_its_defaults() {
    let broker = Broker::start(&["--set", "num.partitions=2"]);
    let out = python("kafka_python_defaults.py", &[&broker.addr]);
    assert!(out.contains("kafka-python ok"), "{out}");
}

/// kafka-python 3's KafkaAdminClient (topics, configs, partitions, groups), a group of two
/// KafkaConsumer processes with one killed and restarted, and KafkaProducer with every codec
/// (tests/clients/kafka_python_admin.py prints each step and what it negotiated).
#[test]
fn kafka_python_admin_client_groups_and_every_codec() {
    use ferrite_shards::batch::{split_batches, BatchHeader, Compression};
    let broker = Broker::start(&["--set", "num.partitions=2"]);
    let out = python("kafka_python_admin.py", &[&broker.addr]);
    println!("{out}");
    assert!(out.contains("kafka-python admin ok"), "{out}");
    // The producer's batches are stored as it compressed them.
    for (codec, want) in [
        ("none", Compression::None),
        ("gzip", Compression::Gzip),
        ("snappy", Compression::Snappy),
        ("lz4", Compression::Lz4),
        ("zstd", Compression::Zstd),
    ] {
        for partition in 0..2 {
            let dir = broker
                .data_dir
                .join(format!("kpa-codec-{codec}-{partition}"));
            let mut stored = Vec::new();
            for entry in
                std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|e| e == "log") {
                    let bytes = bytes::Bytes::from(std::fs::read(&path).unwrap());
                    for b in split_batches(&bytes).unwrap_or_default() {
                        stored.push(BatchHeader::parse(&b).unwrap().compression().unwrap());
                    }
                }
            }
            assert!(
                !stored.is_empty(),
                "{codec}/{partition}: no batches on disk"
            );
            assert!(
                stored.iter().all(|c| *c == want),
                "{codec}/{partition}: stored as {stored:?}"
            );
        }
    }
}

#[test]
fn delete_records_through_both_admin_clients_moves_the_log_start_for_good() {
    let mut broker = Broker::start(&["--set", "group.initial.rebalance.delay.ms=0"]);
    let out = python("delete_records.py", &[&broker.addr, "before-restart"]);
    assert!(out.contains("delete records ok (before-restart)"), "{out}");
    assert!(broker.stop().success());
    broker.restart();
    let out = python("delete_records.py", &[&broker.addr, "after-restart"]);
    assert!(out.contains("delete records ok (after-restart)"), "{out}");
}

#[test]
fn kafka_python_describes_the_log_dir_and_its_partitions() {
    let broker = Broker::start(&[]);
    let data_dir = std::fs::canonicalize(&broker.data_dir).unwrap();
    let out = python(
        "kafka_python_log_dirs.py",
        &[&broker.addr, data_dir.to_str().unwrap()],
    );
    assert!(out.contains("log dirs ok"), "{out}");
    assert!(out.contains("alter configs ok"), "{out}");
}

#[test]
fn kafka_python_deletes_group_offsets_as_kafka_does() {
    let broker = Broker::start(&["--set", "group.initial.rebalance.delay.ms=0"]);
    let out = python("kafka_python_offset_delete.py", &[&broker.addr]);
    assert!(out.contains("offset delete ok"), "{out}");
}

#[test]
fn confluent_alters_and_describes_scram_users_and_they_are_kept() {
    let mut broker = Broker::start(&[]);
    let data_dir = broker.data_dir.to_str().unwrap().to_string();
    let out = python(
        "confluent_scram_users.py",
        &[&broker.addr, &data_dir, "alter"],
    );
    assert!(out.contains("scram users ok"), "{out}");
    assert!(broker.stop().success());
    broker.restart();
    let out = python(
        "confluent_scram_users.py",
        &[&broker.addr, &data_dir, "kept"],
    );
    assert!(out.contains("scram users kept"), "{out}");
}

#[test]
fn confluent_alters_topic_configs_in_force_at_once_and_kept() {
    let mut broker = Broker::start(&["--set", "log.retention.check.interval.ms=500"]);
    let out = python(
        "confluent_alter_configs.py",
        &[&broker.addr, "before-restart"],
    );
    assert!(out.contains("alter configs ok"), "{out}");
    assert!(broker.stop().success());
    broker.restart();
    let out = python(
        "confluent_alter_configs.py",
        &[&broker.addr, "after-restart"],
    );
    assert!(out.contains("alter configs kept"), "{out}");
}
