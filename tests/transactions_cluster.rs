//! Transactions on three brokers in ZooKeeper mode (issue 16): the coordinator, the markers and
//! the KIP-890 verification across brokers, and under an exactly-once loop the coordinator's
//! broker killed, or the output partition's leader killed while the markers are written.

mod common;

use common::cluster::{bootstrap, leaders, metadata, start_cluster, wait_until, SESSION_MS};
use common::eos::{EosClient, EosLoop, GroupPlacement};
use common::zookeeper::ZooKeeper;
use common::{python, Broker};
use std::time::Duration;

/// Kafka's `partitionFor`: Java's String.hashCode, made non-negative, modulo the partitions.
fn state_partition(transactional_id: &str, partitions: i32) -> i64 {
    let hash = transactional_id
        .encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32));
    let positive = if hash == i32::MIN { 0 } else { hash.abs() };
    (positive % partitions) as i64
}

/// The loop's topics, one partition each, replicated three times with `min.insync.replicas`
/// 2: `eos-in` and `eos-out`.
fn create_loop_topics(broker: &Broker) {
    for topic in ["eos-in", "eos-out"] {
        let out = python(
            "confluent_admin_create.py",
            &[&broker.addr, topic, "1", "3", "min.insync.replicas=2"],
        );
        assert!(out.contains("created"), "{out}");
    }
}

/// `__transaction_state`, made by a first InitProducerId, so its leaders can be read.
fn create_transaction_state(broker: &Broker) {
    let out = python(
        "confluent_init_transactions.py",
        &[&broker.addr, "creates-the-state-topic"],
    );
    assert!(out.contains("ready"), "{out}");
}

/// The first of `PREFIX-0`, `PREFIX-1`, ... whose `__transaction_state` partition is led by a
/// broker other than `avoided`, and that broker.
fn transactional_id_not_on(broker: &Broker, prefix: &str, avoided: i64) -> (String, i64) {
    let coordinators = leaders(
        &metadata(broker, Some("__transaction_state")),
        "__transaction_state",
    );
    (0..)
        .map(|i| format!("{prefix}-{i}"))
        .map(|id| {
            let c = coordinators[&state_partition(&id, 50)];
            (id, c)
        })
        .find(|&(_, c)| c > 0 && c != avoided)
        .unwrap()
}

/// The exactly-once loop over 20,000 records while the broker coordinating its transactional
/// id is killed with SIGKILL: another broker takes `__transaction_state`'s partition over,
/// loads the id, completes or aborts what was in flight, and the output (replicated three
/// times, read READ_COMMITTED) holds every input once.
#[test]
fn exactly_once_survives_the_transaction_coordinators_death() {
    let zk = ZooKeeper::start();
    let mut brokers = start_cluster(
        &zk,
        &[
            "--set",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms=1000",
        ],
    );
    create_loop_topics(&brokers[0]);
    let bootstrap = bootstrap(&brokers);
    let count = 20_000;
    let id = "tx-cluster";
    let out = python("confluent_init_transactions.py", &[&brokers[0].addr, id]);
    assert!(out.contains("ready"), "{out}");
    let partition = state_partition(id, 50);
    let coordinator = leaders(
        &metadata(&brokers[0], Some("__transaction_state")),
        "__transaction_state",
    )[&partition];
    assert!(
        coordinator > 0,
        "__transaction_state-{partition} has a leader"
    );
    let mut eos = EosLoop::start(
        EosClient::Confluent,
        &bootstrap,
        count,
        id,
        GroupPlacement::Avoiding(coordinator),
        // Under nextest's 300 s: a loop that stops making progress fails with its client's
        // last errors rather than being killed without them.
        Duration::from_secs(240),
    );
    eos.wait_for(count / 4);
    let output_leader = leaders(&metadata(&brokers[0], Some("eos-out")), "eos-out")[&0];
    println!(
        "killing broker {coordinator}, the coordinator of {id} (__transaction_state-{partition}); \
         eos-out is led by broker {output_leader}"
    );
    let killed = (coordinator - 1) as usize;
    brokers[killed].kill9();
    let survivor = (killed + 1) % 3;
    wait_until(
        Duration::from_millis(SESSION_MS) + Duration::from_secs(15),
        "a new coordinator",
        || {
            let l = leaders(
                &metadata(&brokers[survivor], Some("__transaction_state")),
                "__transaction_state",
            )[&partition];
            l > 0 && l != coordinator
        },
    );
    eos.wait_for(count * 3 / 4);
    brokers[killed].restart();
    eos.finish_exactly_once();
}

/// The exactly-once loop while the leader of its output partition, not the coordinator, is
/// killed with SIGKILL right after a commit: the coordinator is then writing that transaction's
/// markers (the next AddPartitionsToTxn waits for them). It must go on writing them to the new
/// leader (Kafka's TransactionMarkerChannelManager retries NOT_LEADER_OR_FOLLOWER after a
/// metadata refresh) and the output, read READ_COMMITTED, holds every input once.
#[test]
fn exactly_once_survives_the_output_leaders_death_while_markers_are_written() {
    let zk = ZooKeeper::start();
    let mut brokers = start_cluster(&zk, &[]);
    create_loop_topics(&brokers[0]);
    create_transaction_state(&brokers[0]);
    let output_leader = leaders(&metadata(&brokers[0], Some("eos-out")), "eos-out")[&0];
    // A transactional id coordinated by another broker than the one about to be killed.
    let (id, coordinator) = transactional_id_not_on(&brokers[0], "tx-markers", output_leader);
    let bootstrap = bootstrap(&brokers);
    let count = 10_000;
    let mut eos = EosLoop::start(
        EosClient::Confluent,
        &bootstrap,
        count,
        &id,
        GroupPlacement::Avoiding(output_leader),
        Duration::from_secs(240),
    );
    eos.wait_for(count / 4);
    println!(
        "killing broker {output_leader}, the leader of eos-out, after a commit of {id} \
         (coordinated by broker {coordinator})"
    );
    let killed = (output_leader - 1) as usize;
    brokers[killed].kill9();
    let survivor = (killed + 1) % 3;
    wait_until(
        Duration::from_millis(SESSION_MS) + Duration::from_secs(15),
        "a new leader of eos-out",
        || {
            let l = leaders(&metadata(&brokers[survivor], Some("eos-out")), "eos-out")[&0];
            l > 0 && l != output_leader
        },
    );
    eos.wait_for(count * 3 / 4);
    brokers[killed].restart();
    eos.finish_exactly_once();
}

/// kafka-python's exactly-once loop while the broker coordinating its consumer group, and
/// nothing else of the loop's, is killed with SIGKILL: another broker takes the group's
/// `__consumer_offsets` partition over and loads its committed offsets and any transactional
/// offset commit still pending; the consumer and the producer's TxnOffsetCommit find the new
/// coordinator, and the output, read READ_COMMITTED, holds every input once. The confluent
/// loops keep their groups off the broker they kill (librdkafka 2.16 can hang there, the
/// script says why), so this is the test of a group coordinator's death under transactions.
#[test]
fn exactly_once_survives_the_group_coordinators_death() {
    let zk = ZooKeeper::start();
    let mut brokers = start_cluster(&zk, &[]);
    create_loop_topics(&brokers[0]);
    create_transaction_state(&brokers[0]);
    let topic_leaders = [
        leaders(&metadata(&brokers[0], Some("eos-in")), "eos-in")[&0],
        leaders(&metadata(&brokers[0], Some("eos-out")), "eos-out")[&0],
    ];
    // Three brokers, two partition leaders: one broker leads neither.
    let victim = (1..=3)
        .find(|b| !topic_leaders.contains(b))
        .expect("a broker leading neither topic");
    let (id, coordinator) = transactional_id_not_on(&brokers[0], "tx-group", victim);
    let bootstrap = bootstrap(&brokers);
    let count = 10_000;
    let mut eos = EosLoop::start(
        EosClient::KafkaPython,
        &bootstrap,
        count,
        &id,
        GroupPlacement::On(victim),
        Duration::from_secs(240),
    );
    eos.wait_for(count / 4);
    println!(
        "killing broker {victim}, the coordinator of the loop's group (eos-in and eos-out are \
         led by brokers {topic_leaders:?}, {id} coordinated by broker {coordinator})"
    );
    brokers[(victim - 1) as usize].kill9();
    eos.wait_for(count * 3 / 4);
    brokers[(victim - 1) as usize].restart();
    eos.finish_exactly_once();
}
