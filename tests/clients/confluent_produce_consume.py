"""confluent-kafka (librdkafka 2.16) producer and assign-based consumer against Ferrite."""
import sys
import time
from collections import defaultdict

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap = sys.argv[1]
T = 20
admin = AdminClient({"bootstrap.servers": bootstrap})
for t in admin.create_topics([NewTopic("keyed", 6, 1), NewTopic("keyless", 6, 1), NewTopic("idem", 1, 1),
                              NewTopic("stamped", 1, 1)], request_timeout=T).values():
    t.result(timeout=T)


def produce(topic, messages, **conf):
    """Sends (key, value) pairs; returns the delivery reports (key, value, partition, offset)."""
    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 20000, "linger.ms": 5, **conf})
    reports = []

    def on_delivery(err, msg):
        assert err is None, f"delivery failed: {err}"
        reports.append((msg.key(), msg.value(), msg.partition(), msg.offset()))

    for i, (key, value) in enumerate(messages):
        p.produce(topic, key=key, value=value, on_delivery=on_delivery)
        if i % 50 == 49:
            p.flush(T)
    assert p.flush(T) == 0, "unflushed messages"
    assert len(reports) == len(messages)
    return reports


def consume(tp, count, timeout=T):
    """Reads `count` messages from an assigned partition at `tp.offset`."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "assign-only", "enable.auto.commit": False,
                  "enable.auto.offset.store": False})
    c.assign([tp])
    out = []
    deadline = time.time() + timeout
    while len(out) < count:
        assert time.time() < deadline, f"only {len(out)} of {count} messages from {tp}"
        m = c.poll(0.5)
        if m is None:
            continue
        assert m.error() is None, m.error()
        out.append(m)
    c.close()
    return out


# Keyed: the same key always lands on the same partition.
keyed = produce("keyed", [(f"key-{i % 10}".encode(), f"v{i}".encode()) for i in range(300)])
partition_of = defaultdict(set)
for key, _, partition, _ in keyed:
    partition_of[key].add(partition)
assert all(len(ps) == 1 for ps in partition_of.values()), dict(partition_of)
assert len({next(iter(ps)) for ps in partition_of.values()}) > 1, "ten keys on one partition"

# Keyless: spread over the partitions. librdkafka's default sticky partitioner keeps a partition
# for sticky.partitioning.linger.ms; with it off, each keyless message picks a partition.
keyless = produce("keyless", [(None, f"n{i}".encode()) for i in range(600)],
                  **{"sticky.partitioning.linger.ms": 0})
assert len({r[2] for r in keyless}) >= 4, "keyless messages not spread over the partitions"

# Assign-based consumer from earliest: every message of a partition, in offset order.
part = keyed[0][2]
mine = sorted([r for r in keyed if r[2] == part], key=lambda r: r[3])
got = consume(TopicPartition("keyed", part, OFFSET_BEGINNING), len(mine))
assert [(m.offset(), m.key(), m.value()) for m in got] == [(r[3], r[0], r[1]) for r in mine]

# From an explicit offset.
got = consume(TopicPartition("keyed", part, 5), 3)
assert [m.offset() for m in got] == [5, 6, 7]

# From a timestamp (offsets_for_times).
produce("stamped", [(None, b"before-1"), (None, b"before-2")])
time.sleep(1.1)
cut = int(time.time() * 1000)
time.sleep(0.05)
produce("stamped", [(None, b"after-1"), (None, b"after-2")])
c = Consumer({"bootstrap.servers": bootstrap, "group.id": "assign-only", "enable.auto.commit": False})
found = c.offsets_for_times([TopicPartition("stamped", 0, cut)], timeout=T)
c.close()
assert found[0].offset == 2, found
got = consume(TopicPartition("stamped", 0, found[0].offset), 2)
assert [m.value() for m in got] == [b"after-1", b"after-2"]

# acks=all with idempotence: exactly once, in order.
idem = produce("idem", [(None, f"i{i}".encode()) for i in range(1000)], acks="all", **{"enable.idempotence": True})
assert sorted(r[3] for r in idem) == list(range(1000))
got = consume(TopicPartition("idem", 0, OFFSET_BEGINNING), 1000)
assert [m.value() for m in got] == [f"i{i}".encode() for i in range(1000)]
print("produce/consume ok")
