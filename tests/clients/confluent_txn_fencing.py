"""Zombie fencing and transaction timeouts through librdkafka (confluent-kafka 2.16).

  confluent_txn_fencing.py BOOTSTRAP TOPIC

1. Fencing: producer A ("fence-id") opens a transaction and writes "zombie-<i>"; producer B
   with the same transactional id initializes, which aborts A's transaction and fences A. A's
   commit then fails (fatal, fenced); B commits "fresh-<i>".
2. Timeout: producer C ("slow-id", transaction.timeout.ms=2000) writes "late-<i>" in a
   transaction it never ends; the coordinator aborts it once the timeout passes, so the last
   stable offset moves past it without C doing anything.
A READ_COMMITTED reader then reads TOPIC to its end (which it can reach only once C's
transaction is aborted). Prints JSON: {"a_commit_error": ..., "a_fatal": ..., "read": [...],
"waited_s": seconds until the end was reached}.
"""
import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

bootstrap, topic = sys.argv[1:3]
out = {}

a = Producer({"bootstrap.servers": bootstrap, "transactional.id": "fence-id"})
a.init_transactions(30)
a.begin_transaction()
for i in range(5):
    a.produce(topic, f"zombie-{i}".encode(), partition=0)
a.flush(30)

b = Producer({"bootstrap.servers": bootstrap, "transactional.id": "fence-id"})
b.init_transactions(30)
try:
    a.commit_transaction(10)
    out["a_commit_error"] = None
except KafkaException as e:
    err = e.args[0]
    out["a_commit_error"] = err.name()
    out["a_fatal"] = err.fatal()
b.begin_transaction()
for i in range(5):
    b.produce(topic, f"fresh-{i}".encode(), partition=0)
b.commit_transaction(30)

c = Producer({"bootstrap.servers": bootstrap, "transactional.id": "slow-id",
              "transaction.timeout.ms": 2000})
c.init_transactions(30)
c.begin_transaction()
for i in range(3):
    c.produce(topic, f"late-{i}".encode(), partition=0)
c.flush(30)
started = time.time()

reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "fence-check",
                   "isolation.level": "read_committed", "enable.partition.eof": True})
reader.assign([TopicPartition(topic, 0, 0)])
read, eof = [], False
deadline = time.time() + 30
while not eof and time.time() < deadline:
    m = reader.poll(0.2)
    if m is None:
        continue
    if m.error():
        eof = m.error().code() == -191 and reader.get_watermark_offsets(
            TopicPartition(topic, 0), cached=True)[1] == m.offset()
        continue
    read.append(m.value().decode())
out["read"] = read
out["eof"] = eof
out["waited_s"] = round(time.time() - started, 1)
reader.close()
print(json.dumps(out))
