//! Three brokers on one ZooKeeper, and reading their metadata through kcat.

use super::tls::{add_user_to, Certificates};
use super::zookeeper::ZooKeeper;
use super::{free_port, kcat, Broker};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::StrBytes;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Short sessions so failures are noticed in seconds, not Kafka's 18.
pub const SESSION_MS: u64 = 4000;

/// Broker `node` of a cluster on `zk`, one shard, with `extra` settings.
pub fn start_broker(zk: &ZooKeeper, node: i32, extra: &[&str]) -> Broker {
    start_broker_on(&zk.connect_string(), node, extra)
}

/// Broker `node` on the ZooKeeper connect string `connect` (a chroot may follow the servers).
pub fn start_broker_on(connect: &str, node: i32, extra: &[&str]) -> Broker {
    let mut args = cluster_args(connect, node);
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Broker::start(&args)
}

/// What every cluster broker of the tests runs with.
pub fn cluster_args(connect: &str, node: i32) -> Vec<String> {
    [
        "--node-id",
        &node.to_string(),
        "--zookeeper",
        connect,
        "--cores",
        "1",
        "--set",
        &format!("zookeeper.session.timeout.ms={SESSION_MS}"),
        "--set",
        "num.partitions=6",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

pub fn start_cluster(zk: &ZooKeeper, extra: &[&str]) -> Vec<Broker> {
    (1..=3).map(|n| start_broker(zk, n, extra)).collect()
}

/// Three brokers that replicate over a SASL_SSL inter-broker listener: TLS with the test CA's
/// certificates, each broker logging in to the others as user `broker` with SCRAM-SHA-512
/// (made in ZooKeeper by `ferrite user add` first, as an operator would). Clients keep a
/// PLAINTEXT listener on `broker.addr`; `sasl_ssl_addrs[i]` is broker i's SASL_SSL listener,
/// for clients that log in too.
pub fn start_sasl_ssl_cluster(
    zk: &ZooKeeper,
    certs: &Certificates,
    extra: &[&str],
) -> SaslSslCluster {
    let connect = zk.connect_string();
    add_user_to(
        &["--zookeeper", &connect],
        "broker",
        "SCRAM-SHA-512",
        "broker-secret",
    );
    let mut cluster = SaslSslCluster {
        brokers: Vec::new(),
        sasl_ssl_addrs: Vec::new(),
    };
    for node in 1..=3 {
        let (plain, secure) = (free_port(), free_port());
        let settings = [
            format!("listeners=PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{secure}"),
            "inter.broker.listener.name=SASL_SSL".into(),
            "sasl.enabled.mechanisms=SCRAM-SHA-512".into(),
            "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512".into(),
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.\
                 security.scram.ScramLoginModule required username=\"broker\" \
                 password=\"broker-secret\";"
                .into(),
            format!("ssl.keystore.location={}", certs.broker_keystore.display()),
            format!("ssl.truststore.location={}", certs.ca.display()),
        ];
        let mut args: Vec<String> = cluster_args(&connect, node);
        for s in settings {
            args.extend(["--set".to_string(), s]);
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let tmp = tempfile::tempdir().expect("temp dir");
        let mut b = Broker::start_at(&tmp.path().join("data"), plain, &args);
        b._tmp = Some(tmp);
        cluster.brokers.push(b);
        cluster.sasl_ssl_addrs.push(format!("127.0.0.1:{secure}"));
    }
    cluster
}

pub struct SaslSslCluster {
    pub brokers: Vec<Broker>,
    pub sasl_ssl_addrs: Vec<String>,
}

/// Every broker's address, comma-separated: a client's bootstrap list.
pub fn bootstrap(brokers: &[Broker]) -> String {
    brokers
        .iter()
        .map(|b| b.addr.clone())
        .collect::<Vec<_>>()
        .join(",")
}

/// Metadata as kcat's JSON, asked of `broker`.
pub fn metadata(broker: &Broker, topic: Option<&str>) -> Value {
    let mut args = vec!["-L", "-J"];
    if let Some(t) = topic {
        args.extend(["-t", t]);
    }
    serde_json::from_slice(&kcat(broker, &args, None)).expect("kcat -J")
}

pub fn broker_ids(md: &Value) -> Vec<i64> {
    let mut ids: Vec<i64> = md["brokers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_i64().unwrap())
        .collect();
    ids.sort_unstable();
    ids
}

/// The partitions of `topic` in kcat's JSON metadata `md`.
pub fn partitions<'a>(md: &'a Value, topic: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    md["topics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(move |t| t["topic"] == topic)
        .flat_map(|t| t["partitions"].as_array().unwrap().iter())
}

/// Partition → leader (-1: none) of `topic`.
pub fn leaders(md: &Value, topic: &str) -> BTreeMap<i64, i64> {
    partitions(md, topic)
        .map(|p| {
            (
                p["partition"].as_i64().unwrap(),
                p["leader"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// The ISR of one partition, sorted.
pub fn isr(md: &Value, topic: &str, partition: i64) -> Vec<i64> {
    let mut ids: Vec<i64> = partitions(md, topic)
        .filter(|p| p["partition"] == partition)
        .flat_map(|p| p["isrs"].as_array().unwrap().iter())
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    ids.sort_unstable();
    ids
}

/// Polls `f` until it holds, for at most `timeout`.
pub fn wait_until(timeout: Duration, what: &str, mut f: impl FnMut() -> bool) {
    wait_until_explained(timeout, what, || f().then_some(()).ok_or_else(String::new));
}

/// Polls `f` until it gives `Ok`, for at most `timeout`; on timeout the panic shows what its
/// last `Err` said was still missing.
pub fn wait_until_explained(
    timeout: Duration,
    what: &str,
    mut f: impl FnMut() -> Result<(), String>,
) {
    let deadline = Instant::now() + timeout;
    while let Err(missing) = f() {
        assert!(
            Instant::now() < deadline,
            "not within {timeout:?}: {what}\n{missing}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// AlterPartitionReassignments (one partition, `None` to cancel) through `b`: its error code.
pub fn reassign(b: &Broker, topic: &str, target: Option<Vec<i32>>) -> i16 {
    use kafka_protocol::messages::alter_partition_reassignments_request::{
        ReassignablePartition, ReassignableTopic,
    };
    use kafka_protocol::messages::{
        AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ApiKey, BrokerId,
        TopicName,
    };
    use kafka_protocol::protocol::StrBytes;
    let mut conn = super::wire::connect(b);
    let body = AlterPartitionReassignmentsRequest::default().with_topics(vec![
        ReassignableTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![ReassignablePartition::default()
                .with_partition_index(0)
                .with_replicas(target.map(|t| t.into_iter().map(BrokerId).collect()))]),
    ]);
    let answer: AlterPartitionReassignmentsResponse =
        super::wire::call(&mut conn, ApiKey::AlterPartitionReassignments, 0, &body);
    answer.responses[0].partitions[0].error_code
}

/// ConfigResource types.
pub const TOPIC: i8 = 2;
pub const BROKER: i8 = 4;

/// One config of a resource as `b` describes it: value, source, and its synonyms' sources.
pub fn describe_config(
    b: &Broker,
    kind: i8,
    name: &str,
    key: &str,
) -> Option<(Option<String>, i8, Vec<i8>)> {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
    let mut conn = super::wire::connect(b);
    let body = DescribeConfigsRequest::default()
        .with_include_synonyms(true)
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(StrBytes::from_string(name.to_string()))
            .with_configuration_keys(Some(vec![StrBytes::from_string(
                key.to_string(),
            )]))]);
    let answer: DescribeConfigsResponse =
        super::wire::call(&mut conn, ApiKey::DescribeConfigs, 4, &body);
    let entry = answer.results[0].configs.first().cloned()?;
    Some((
        entry.value.map(|v| v.to_string()),
        entry.config_source,
        entry.synonyms.iter().map(|s| s.source).collect(),
    ))
}

/// IncrementalAlterConfigs SET of one key through `b`: the resource's error code.
pub fn set_config(b: &Broker, kind: i8, name: &str, key: &str, value: &str) -> i16 {
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    use kafka_protocol::messages::{
        IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    };
    let mut conn = super::wire::connect(b);
    let body = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(StrBytes::from_string(name.to_string()))
            .with_configs(vec![AlterableConfig::default()
                .with_name(StrBytes::from_string(key.to_string()))
                .with_config_operation(0)
                .with_value(Some(StrBytes::from_string(value.to_string())))]),
    ]);
    let answer: IncrementalAlterConfigsResponse =
        super::wire::call(&mut conn, ApiKey::IncrementalAlterConfigs, 1, &body);
    answer.responses[0].error_code
}
