"""Transactions through librdkafka (confluent-kafka 2.16): commit, abort, and what each
isolation level reads.

  confluent_transactions.py BOOTSTRAP TOPIC TRANSACTIONAL_ID

One transactional producer writes three transactions to both partitions of TOPIC: ten records
"c1-<i>" committed, ten "a-<i>" aborted, five "c2-<i>" committed. Then a READ_COMMITTED
consumer and a READ_UNCOMMITTED consumer each read TOPIC from the beginning until they reach
its end. Prints JSON: {"committed": [...], "uncommitted": [...]}, values in read order.
"""
import json
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition

bootstrap, topic, txn_id = sys.argv[1:4]

producer = Producer({
    "bootstrap.servers": bootstrap,
    "transactional.id": txn_id,
    "linger.ms": 5,
})
producer.init_transactions(30)
for prefix, count, commit in [("c1", 10, True), ("a", 10, False), ("c2", 5, True)]:
    producer.begin_transaction()
    for i in range(count):
        producer.produce(topic, f"{prefix}-{i}".encode(), partition=i % 2)
    producer.flush(30)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


def read_all(isolation):
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"read-{isolation}",
        "isolation.level": isolation,
        "enable.auto.commit": False,
        "enable.partition.eof": True,
    })
    consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])
    values, at_end = [], set()
    deadline = time.time() + 30
    while len(at_end) < 2 and time.time() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == -191:  # _PARTITION_EOF
                at_end.add(msg.partition())
                continue
            raise RuntimeError(str(msg.error()))
        values.append(msg.value().decode())
    consumer.close()
    if len(at_end) < 2:
        raise RuntimeError(f"{isolation}: the end of {topic} was not reached in 30 s")
    return values


print(json.dumps({
    "committed": read_all("read_committed"),
    "uncommitted": read_all("read_uncommitted"),
}))
