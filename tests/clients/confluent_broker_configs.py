"""Dynamic broker configs through confluent-kafka's AdminClient, on this broker ("0"): read back
with their sources (DYNAMIC_BROKER_CONFIG = 2, DYNAMIC_DEFAULT_BROKER_CONFIG = 3,
STATIC_BROKER_CONFIG = 4, DEFAULT_CONFIG = 5) on the broker and on a topic that does not
override them, in force at once, and Kafka's refusals. confluent-kafka cannot name the cluster
default (it refuses an empty broker name), so the test sets that with Sarama between phases:
- per-broker: message.max.bytes raised for this broker lets a larger record in;
- cluster-default (after Sarama set message.max.bytes=3000000 and log.retention.ms=1000 at ""):
  this broker's value still wins; deleting it brings the default in; old segments go;
- replaced (after Sarama replaced the default's set with log.retention.ms=86400000), also
  after a restart."""
import sys
import time

import config_calls
from config_calls import op
from confluent_kafka import KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   NewTopic, OffsetSpec, ResourceType)

bootstrap, phase = sys.argv[1], sys.argv[2]
T = 20
admin = AdminClient({"bootstrap.servers": bootstrap})
me = ConfigResource(ResourceType.BROKER, "0")
topic = ConfigResource(ResourceType.TOPIC, "plain")


def configs(resource):
    return config_calls.describe(admin, resource)


def incremental(resource, *entries, validate_only=False):
    return config_calls.incremental(admin, resource, *entries, validate_only=validate_only)


def synonyms(entry):
    # confluent-kafka keeps synonyms in a dict by name: levels of one name collapse into one.
    return [(s.name, s.value, s.source) for s in entry.synonyms.values()]


def value_and_source(resource, name):
    entry = configs(resource)[name]
    return entry.value, entry.source


if phase == "per-broker":
    admin.create_topics([NewTopic("plain", 1, 1, config={"segment.bytes": "1048576"})],
                        request_timeout=T)["plain"].result(timeout=T)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                  "message.max.bytes": 10_000_000})
    big = b"x" * 1_500_000
    delivered = []
    p.produce("plain", value=big, on_delivery=lambda err, m: delivered.append(err))
    p.flush(T)
    assert delivered and delivered[0] is not None and delivered[0].code() == KafkaError.MSG_SIZE_TOO_LARGE, delivered

    # This broker's own value: the topic takes it at once, and reports where it comes from.
    assert incremental(me, op("message.max.bytes", "2000000")) == KafkaError.NO_ERROR
    assert value_and_source(topic, "max.message.bytes") == ("2000000", 2)
    b = configs(me)["message.max.bytes"]
    assert (b.value, b.source, b.is_read_only) == ("2000000", 2, False), b
    assert configs(me)["num.partitions"].is_read_only, "a static setting is read-only"
    delivered.clear()
    p.produce("plain", value=big, on_delivery=lambda err, m: delivered.append(err))
    p.flush(T)
    assert delivered == [None], delivered
    for i in range(5):
        p.produce("plain", value=b"r%d" % i)
    p.flush(T)

    # A list setting: APPEND starts from the value in force; SUBTRACT takes it away again.
    assert incremental(me, op("log.cleanup.policy", "compact", AlterConfigOpType.APPEND)) == KafkaError.NO_ERROR
    assert set(configs(topic)["cleanup.policy"].value.split(",")) == {"delete", "compact"}
    assert incremental(me, op("log.cleanup.policy", "compact", AlterConfigOpType.SUBTRACT)) == KafkaError.NO_ERROR
    assert configs(topic)["cleanup.policy"].value == "delete"

    # Kafka's refusals, each changing nothing.
    assert incremental(me, op("num.partitions", "3")) == KafkaError.INVALID_CONFIG, "static setting"
    assert incremental(me, op("no.such.config", "1")) == KafkaError.INVALID_CONFIG
    assert incremental(me, op("message.max.bytes", "-5")) == KafkaError.INVALID_CONFIG
    assert incremental(me, op("message.max.bytes", "1", AlterConfigOpType.APPEND)) == KafkaError.INVALID_CONFIG
    assert incremental(me, op("log.retention.ms", "5"), validate_only=True) == KafkaError.NO_ERROR
    assert configs(topic)["retention.ms"].value == "604800000", "validate_only changed nothing"
    assert value_and_source(topic, "max.message.bytes") == ("2000000", 2)
    print("per-broker ok")
elif phase == "cluster-default":
    # This broker's value wins over the cluster default.
    assert value_and_source(me, "message.max.bytes") == ("2000000", 2)
    assert value_and_source(topic, "max.message.bytes") == ("2000000", 2)
    assert incremental(me, op("message.max.bytes", None, AlterConfigOpType.DELETE)) == KafkaError.NO_ERROR
    assert value_and_source(topic, "max.message.bytes") == ("3000000", 3)
    assert value_and_source(me, "message.max.bytes") == ("3000000", 3)
    # The default's short retention removes the old records of every topic without an
    # override (the check runs every 500 ms).
    entry = configs(topic)["retention.ms"]
    assert (entry.value, entry.source) == ("1000", 3), entry
    assert synonyms(entry)[0] == ("log.retention.ms", "1000", 3), synonyms(entry)
    tp = TopicPartition("plain", 0)
    deadline = time.time() + T
    while admin.list_offsets({tp: OffsetSpec.earliest()}, request_timeout=T)[tp].result(timeout=T).offset < 2:
        assert time.time() < deadline, "log.retention.ms=1000 did not remove the old records"
        time.sleep(0.2)
    print("cluster default ok")
else:
    # AlterConfigs (the whole set) of this broker's own settings.
    legacy = ConfigResource(ResourceType.BROKER, "0", set_config={"log.cleaner.backoff.ms": "20000"})
    list(admin.alter_configs([legacy], request_timeout=T).values())[0].result(timeout=T)
    assert value_and_source(me, "log.cleaner.backoff.ms") == ("20000", 2)
    assert value_and_source(topic, "retention.ms") == ("86400000", 3)
    assert value_and_source(topic, "max.message.bytes")[1] == 5, "message.max.bytes is back to its default"
    assert value_and_source(me, "message.max.bytes")[1] == 5
    print("replaced ok")
