//! What Kafka's own brokers and tools leave in ZooKeeper, read as Kafka reads it: a Ferrite
//! broker joining a ZooKeeper that Kafka has used must understand every znode there.

mod common;

use common::cluster::start_broker;
use common::wire;
use common::zookeeper::ZooKeeper;
use kafka_protocol::messages::{ApiKey, InitProducerIdRequest, InitProducerIdResponse};

/// Kafka's brokers create `/latest_producer_id_block` with no data at start-up
/// (`KafkaZkClient.createTopLevelPaths`), and a user + client-id quota creates the user's znode
/// with no data as its parent; Kafka reads both as "nothing yet". So does Ferrite: the first
/// producer id is 0, and the user's quota and credentials can be set.
#[test]
fn znodes_kafka_creates_without_data_read_as_nothing_yet() {
    use common::quotas::{alter, describe};
    let zk = ZooKeeper::start();
    for path in [
        "/latest_producer_id_block",
        "/config",
        "/config/users",
        "/config/users/dave",
    ] {
        let (created, out) = zk.cli(&["create", path]);
        assert!(created, "{path}: {out}");
    }
    let broker = start_broker(&zk, 1, &[]);

    let mut conn = wire::connect(&broker);
    let body = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(60_000);
    let answer: InitProducerIdResponse = wire::call(&mut conn, ApiKey::InitProducerId, 4, &body);
    assert_eq!(answer.error_code, 0, "{answer:?}");
    assert_eq!(answer.producer_id.0, 0, "the first block starts at 0");
    let (_, block) = zk.cli(&["get", "/latest_producer_id_block"]);
    assert!(
        block.contains(r#""block_start":"0""#) && block.contains(r#""block_end":"999""#),
        "{block}"
    );

    let dave = [("user", Some("dave"))];
    assert_eq!(
        alter(&broker, &dave, &[("producer_byte_rate", 1e6, false)], false),
        0
    );
    let (_, out) = zk.cli(&["get", "/config/users/dave"]);
    assert!(out.contains(r#""producer_byte_rate":"1000000""#), "{out}");
    common::cluster::wait_until(
        std::time::Duration::from_secs(10),
        "the broker describes dave's quota",
        || {
            describe(&broker, &[("user", 0, Some("dave"))], true)
                .1
                .len()
                == 1
        },
    );
}
