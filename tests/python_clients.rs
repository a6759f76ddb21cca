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
