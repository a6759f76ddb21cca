"""kafka-python 3 with its defaults (idempotent producer, acks=all) against Ferrite."""
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

bootstrap = sys.argv[1]
producer = KafkaProducer(bootstrap_servers=bootstrap, bootstrap_timeout_ms=15000)
futures = [producer.send("kp", key=f"k{i % 3}".encode(), value=f"value-{i}".encode()) for i in range(300)]
producer.flush(timeout=30)
sent = [f.get(timeout=30) for f in futures]
producer.close(timeout=10)
assert len({(m.partition, m.offset) for m in sent}) == 300, "every record has its own offset"

consumer = KafkaConsumer(bootstrap_servers=bootstrap, bootstrap_timeout_ms=15000, enable_auto_commit=False,
                         consumer_timeout_ms=10000)
partitions = sorted({m.partition for m in sent})
consumer.assign([TopicPartition("kp", p) for p in partitions])
consumer.seek_to_beginning()
got = []
deadline = time.time() + 30
while len(got) < 300 and time.time() < deadline:
    for records in consumer.poll(timeout_ms=1000).values():
        got.extend(records)
consumer.close()
assert len(got) == 300, f"read {len(got)} of 300"
assert sorted(r.value for r in got) == sorted(f"value-{i}".encode() for i in range(300))
for p in partitions:
    offsets = [r.offset for r in got if r.partition == p]
    assert offsets == sorted(offsets) == list(range(len(offsets))), f"partition {p} in order"
print("kafka-python ok")
