"""DeleteRecords through confluent-kafka's and kafka-python's admin clients: the low watermark
moves, ListOffsets earliest follows, consumers see only what is left (a committed position
below it resets), and Kafka's errors for bad offsets and compacted topics."""
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from kafka import KafkaAdminClient
from kafka import TopicPartition as KpTopicPartition

bootstrap, phase = sys.argv[1], sys.argv[2]
T = 20
admin = AdminClient({"bootstrap.servers": bootstrap})


def earliest(topic, partition):
    tp = TopicPartition(topic, partition)
    return admin.list_offsets({tp: OffsetSpec.earliest()}, request_timeout=T)[tp].result(timeout=T).offset


def read_all(topic, group, reset="earliest"):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": reset,
                  "enable.auto.commit": False})
    c.subscribe([topic])
    got, deadline, idle = [], time.time() + T, 0
    while time.time() < deadline and idle < 4:
        m = c.poll(0.5)
        if m is None:
            idle += 1 if got else 0
            continue
        assert m.error() is None, m.error()
        got.append((m.partition(), m.offset(), m.value().decode()))
        idle = 0
    c.close()
    return sorted(got)


if phase == "before-restart":
    admin.create_topics([NewTopic("trimmed", 2, 1)], request_timeout=T)["trimmed"].result(timeout=T)
    admin.create_topics([NewTopic("compacted", 1, 1, config={"cleanup.policy": "compact"})],
                        request_timeout=T)["compacted"].result(timeout=T)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for i in range(100):
        p.produce("trimmed", value=f"r{i}".encode(), partition=i % 2)
        p.flush(T)  # one batch per record, so a cut can fall between any two
    p.produce("compacted", key=b"k", value=b"v")
    p.flush(T)
    # A group that read the first ten of partition 0 and committed them.
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "slow", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.assign([TopicPartition("trimmed", 0, 0)])
    for _ in range(10):
        c.poll(T)
    c.commit(offsets=[TopicPartition("trimmed", 0, 10)], asynchronous=False)
    c.close()

    # confluent-kafka: partition 0 before offset 20.
    done = admin.delete_records([TopicPartition("trimmed", 0, 20)], request_timeout=T)
    result = list(done.values())[0].result(timeout=T)
    assert result.low_watermark == 20, result
    assert earliest("trimmed", 0) == 20
    # kafka-python: partition 1 up to the high watermark (-1), i.e. everything.
    kp = KafkaAdminClient(bootstrap_servers=bootstrap)
    answer = kp.delete_records({KpTopicPartition("trimmed", 1): -1})
    assert answer[KpTopicPartition("trimmed", 1)]["low_watermark"] == 50, answer
    assert earliest("trimmed", 1) == 50

    # Kafka's refusals: past the high watermark, a compact-only topic.
    def refusal(tp):
        try:
            list(admin.delete_records([tp], request_timeout=T).values())[0].result(timeout=T)
        except KafkaException as e:
            return e.args[0].code()
        return KafkaError.NO_ERROR
    assert refusal(TopicPartition("trimmed", 0, 51)) == KafkaError.OFFSET_OUT_OF_RANGE
    assert refusal(TopicPartition("compacted", 0, 1)) == KafkaError.POLICY_VIOLATION
    assert earliest("trimmed", 0) == 20, "a refusal changed nothing"
    print("deleted")

got = read_all("trimmed", f"fresh-{phase}")
assert [o for (p, o, _) in got if p == 0] == list(range(20, 50)), got
assert [v for (p, _, v) in got if p == 1] == [], got
# The group committed at 10, now below the log start: its position resets (earliest) to 20.
slow = read_all("trimmed", "slow")
assert [o for (p, o, _) in slow if p == 0][:1] == [20], slow
assert earliest("trimmed", 0) == 20
print(f"delete records ok ({phase})")
