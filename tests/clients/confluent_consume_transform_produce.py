"""Exactly-once consume-transform-produce through librdkafka (confluent-kafka 2.16).

  confluent_consume_transform_produce.py BOOTSTRAP IN_TOPIC OUT_TOPIC COUNT TRANSACTIONAL_ID

Writes COUNT records "v-<i>" to IN_TOPIC (one partition), then a group member of "ctp"
(READ_COMMITTED, no auto commit) reads them in batches and, for each batch, in one transaction,
writes "x-<value>" to OUT_TOPIC and commits its position with send_offsets_to_transaction. The
third transaction is aborted instead, and the member rewinds to its committed position and
does that batch again. Prints JSON: {"out": [values read back READ_COMMITTED], "committed":
the group's committed offset of IN_TOPIC, "transactions": committed, "aborted": aborted}.
"""
import json
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition

bootstrap, in_topic, out_topic, count, txn_id = sys.argv[1:6]
count = int(count)

plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
for i in range(count):
    plain.produce(in_topic, f"v-{i}".encode(), partition=0)
plain.flush(30)

consumer = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": "ctp",
    "isolation.level": "read_committed",
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
})
consumer.subscribe([in_topic])
producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
producer.init_transactions(30)

done, committed_txns, aborted_txns = 0, 0, 0
deadline = time.time() + 90
while done < count and time.time() < deadline:
    batch = consumer.consume(num_messages=50, timeout=1)
    batch = [m for m in batch if m.error() is None]
    if not batch:
        continue
    producer.begin_transaction()
    for m in batch:
        producer.produce(out_topic, b"x-" + m.value(), partition=0)
    producer.send_offsets_to_transaction(
        consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30)
    if committed_txns == 2 and aborted_txns == 0:
        producer.abort_transaction(30)
        aborted_txns += 1
        # Back to the last committed position: the aborted batch is done again.
        for tp in consumer.committed(consumer.assignment(), 10):
            consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset))
        continue
    producer.commit_transaction(30)
    committed_txns += 1
    done = batch[-1].offset() + 1
consumer.close()

reader = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": "ctp-check",
    "isolation.level": "read_committed",
    "enable.partition.eof": True,
})
reader.assign([TopicPartition(out_topic, 0, 0)])
out, eof = [], False
deadline = time.time() + 30
while not eof and time.time() < deadline:
    m = reader.poll(0.5)
    if m is None:
        continue
    if m.error():
        eof = m.error().code() == -191
        continue
    out.append(m.value().decode())
reader.close()

check = Consumer({"bootstrap.servers": bootstrap, "group.id": "ctp"})
committed = check.committed([TopicPartition(in_topic, 0)], 10)[0].offset
check.close()
print(json.dumps({"out": out, "committed": committed,
                  "transactions": committed_txns, "aborted": aborted_txns}))
