"""IncrementalAlterConfigs and AlterConfigs through confluent-kafka's AdminClient: the values
and their sources read back, the behaviour changes at once (a larger max.message.bytes lets a
larger record in; a short retention.ms removes old segments), and Kafka's refusals. The second
phase, after a restart, checks the changes were kept."""
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
topic = ConfigResource(ResourceType.TOPIC, "tuned")


def configs():
    return config_calls.describe(admin, topic)


def incremental(*entries, resource=topic, validate_only=False):
    return config_calls.incremental(admin, resource, *entries, validate_only=validate_only)


if phase == "before-restart":
    admin.create_topics([NewTopic("tuned", 1, 1, config={"segment.bytes": "1048576"})],
                        request_timeout=T)["tuned"].result(timeout=T)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                  "message.max.bytes": 10_000_000})
    p.produce("tuned", value=b"small")
    p.flush(T)
    big = b"x" * 1_500_000
    # Refused at the default max.message.bytes (1 MB)...
    delivered = []
    p.produce("tuned", value=big, on_delivery=lambda err, m: delivered.append(err))
    p.flush(T)
    assert delivered and delivered[0] is not None and delivered[0].code() == KafkaError.MSG_SIZE_TOO_LARGE, delivered

    # ... accepted once raised, without a restart.
    assert incremental(op("max.message.bytes", "2000000")) == KafkaError.NO_ERROR
    c = configs()
    assert c["max.message.bytes"].value == "2000000", c["max.message.bytes"]
    assert c["max.message.bytes"].source == 1, "DYNAMIC_TOPIC_CONFIG"
    delivered.clear()
    p.produce("tuned", value=big, on_delivery=lambda err, m: delivered.append(err))
    p.flush(T)
    assert delivered == [None], delivered

    # APPEND to a list config starts from its default; SUBTRACT takes it away again.
    assert incremental(op("cleanup.policy", "compact", AlterConfigOpType.APPEND)) == KafkaError.NO_ERROR
    assert configs()["cleanup.policy"].value == "delete,compact"
    assert incremental(op("cleanup.policy", "compact", AlterConfigOpType.SUBTRACT)) == KafkaError.NO_ERROR
    assert configs()["cleanup.policy"].value == "delete"

    # Kafka's refusals, each changing nothing.
    assert incremental(op("no.such.config", "1")) == KafkaError.INVALID_CONFIG
    assert incremental(op("retention.ms", "soon")) == KafkaError.INVALID_CONFIG
    assert incremental(op("retention.ms", "1", AlterConfigOpType.APPEND)) == KafkaError.INVALID_CONFIG
    assert incremental(op("retention.ms", "1"), resource=ConfigResource(ResourceType.TOPIC, "missing")) \
        == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert incremental(op("retention.ms", "5"), validate_only=True) == KafkaError.NO_ERROR
    assert configs()["retention.ms"].value == "604800000", "validate_only changed nothing"

    # A short retention removes the old records at once (the check runs every 500 ms).
    assert incremental(op("retention.ms", "1000")) == KafkaError.NO_ERROR
    tp = TopicPartition("tuned", 0)
    deadline = time.time() + T
    while admin.list_offsets({tp: OffsetSpec.earliest()}, request_timeout=T)[tp].result(timeout=T).offset < 2:
        assert time.time() < deadline, "retention.ms=1000 did not remove the old records"
        time.sleep(0.2)

    # AlterConfigs replaces the whole set: max.message.bytes falls back to the default.
    legacy = ConfigResource(ResourceType.TOPIC, "tuned", set_config={"retention.ms": "86400000"})
    list(admin.alter_configs([legacy], request_timeout=T).values())[0].result(timeout=T)
    c = configs()
    assert c["retention.ms"].value == "86400000", c["retention.ms"]
    assert c["max.message.bytes"].source == 5, "back to DEFAULT_CONFIG"
    assert c["segment.bytes"].source == 5, "AlterConfigs dropped the creation-time override too"
    print("alter configs ok")
else:
    c = configs()
    assert c["retention.ms"].value == "86400000" and c["retention.ms"].source == 1, c["retention.ms"]
    assert c["max.message.bytes"].source == 5
    print("alter configs kept")
