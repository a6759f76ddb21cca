"""Produces COUNT keyless records to TOPIC (4 partitions) in ten rounds, then reads them all back
with a consumer group that commits: the run the metrics test scrapes. Prints what it did."""
import json
import sys
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
T = 20
admin = AdminClient({"bootstrap.servers": bootstrap})
for f in admin.create_topics([NewTopic(topic, 4, 1)], request_timeout=T).values():
    f.result(timeout=T)

producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "sticky.partitioning.linger.ms": 0,
                     "message.timeout.ms": 20000})
delivered = 0


def on_delivery(err, _msg):
    global delivered
    assert err is None, f"delivery failed: {err}"
    delivered += 1


rounds = 10
for r in range(rounds):
    for i in range(count // rounds):
        producer.produce(topic, value=f"record-{r}-{i}".encode() * 4, on_delivery=on_delivery)
    assert producer.flush(T) == 0
    time.sleep(0.2)  # leaves the test time to scrape in the middle of the run
assert delivered == count, (delivered, count)

consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "metrics-group", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})
consumer.subscribe([topic])
consumed = 0
deadline = time.time() + 60
while consumed < count:
    assert time.time() < deadline, f"consumed {consumed} of {count}"
    m = consumer.poll(0.5)
    if m is None:
        continue
    assert m.error() is None, m.error()
    consumed += 1
consumer.commit(asynchronous=False)
consumer.close()
print(json.dumps({"produced": delivered, "consumed": consumed}))
