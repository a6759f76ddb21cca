"""AdminClient (librdkafka 2.16) against Ferrite: create, describe, grow and delete topics;\ndescribe the cluster."""
import sys
import time

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic, ResourceType

bootstrap = sys.argv[1]
admin = AdminClient({"bootstrap.servers": bootstrap})
T = 20


def code_of(future):
    try:
        future.result(timeout=T)
    except KafkaException as e:
        return e.args[0].code()
    return KafkaError.NO_ERROR


created = admin.create_topics(
    [NewTopic("admin-a", num_partitions=3, replication_factor=1,
              config={"retention.ms": "3600000", "segment.bytes": "1048576"})],
    operation_timeout=10, request_timeout=T)
created["admin-a"].result(timeout=T)

refusals = {
    "admin-a": (NewTopic("admin-a", 1, 1), KafkaError.TOPIC_ALREADY_EXISTS),
    "bad name!": (NewTopic("bad name!", 1, 1), KafkaError.TOPIC_EXCEPTION),
    "admin-rf": (NewTopic("admin-rf", 1, 3), KafkaError.INVALID_REPLICATION_FACTOR),
    "admin-cfg": (NewTopic("admin-cfg", 1, 1, config={"no.such.config": "1"}), KafkaError.INVALID_CONFIG),
    "admin-zero": (NewTopic("admin-zero", 0, 1), KafkaError.INVALID_PARTITIONS),
}
for name, (topic, want) in refusals.items():
    got = code_of(admin.create_topics([topic], request_timeout=T)[name])
    assert got == want, f"{name}: expected {want}, got {got}"

# validate_only checks and creates nothing.
admin.create_topics([NewTopic("admin-dry", 2, 1)], validate_only=True, request_timeout=T)["admin-dry"].result(timeout=T)
md = admin.list_topics(timeout=T)
assert "admin-dry" not in md.topics, "validate_only created the topic"
assert len(md.topics["admin-a"].partitions) == 3
assert len(md.brokers) == 1

configs = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "admin-a")], request_timeout=T)
entries = list(configs.values())[0].result(timeout=T)
assert entries["retention.ms"].value == "3600000", entries["retention.ms"]
assert entries["retention.ms"].source == 1, "TOPIC_CONFIG"
assert entries["segment.bytes"].value == "1048576"
assert entries["cleanup.policy"].value == "delete"
assert entries["cleanup.policy"].source == 5, "DEFAULT_CONFIG"
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AclOperation
described = admin.describe_topics(TopicCollection(["admin-a"]), include_authorized_operations=True,
                                  request_timeout=T)["admin-a"].result(timeout=T)
assert len(described.partitions) == 3
assert AclOperation.READ in described.authorized_operations, described.authorized_operations
assert AclOperation.ALTER_CONFIGS in described.authorized_operations
broker_cfg = list(admin.describe_configs([ConfigResource(ResourceType.BROKER, "0")], request_timeout=T).values())[0].result(timeout=T)
assert broker_cfg["num.partitions"].value == "1"

admin.create_partitions([NewPartitions("admin-a", 5)], request_timeout=T)["admin-a"].result(timeout=T)
assert len(admin.list_topics(timeout=T).topics["admin-a"].partitions) == 5
got = code_of(admin.create_partitions([NewPartitions("admin-a", 2)], request_timeout=T)["admin-a"])
assert got == KafkaError.INVALID_PARTITIONS, got

admin.delete_topics(["admin-a"], operation_timeout=10, request_timeout=T)["admin-a"].result(timeout=T)
deadline = time.time() + 10
while "admin-a" in admin.list_topics(timeout=T).topics:
    assert time.time() < deadline, "topic still listed after deletion"
    time.sleep(0.1)
got = code_of(admin.delete_topics(["admin-a"], request_timeout=T)["admin-a"])
assert got == KafkaError.UNKNOWN_TOPIC_OR_PART, got

# DescribeCluster (librdkafka uses the API itself, KIP-700).
cluster = admin.describe_cluster(include_authorized_operations=True, request_timeout=T).result(timeout=T)
assert cluster.cluster_id, cluster
assert [n.id for n in cluster.nodes] == [0], cluster.nodes
assert cluster.controller is not None and cluster.controller.id == 0, cluster.controller
assert cluster.nodes[0].port == int(bootstrap.rsplit(":", 1)[1])
assert AclOperation.ALTER_CONFIGS in cluster.authorized_operations, cluster.authorized_operations
assert AclOperation.IDEMPOTENT_WRITE in cluster.authorized_operations
print("admin ok")
