"""Transactions through kafka-python 3.0, a second client family: its transactional producer
(commit, abort, send_offsets_to_transaction) and its admin client's transaction calls.

  kafka_python_transactions.py BOOTSTRAP

1. Producer "kp-tx" commits ten records "k1-<i>" to kp-topic, aborts five "ka-<i>".
2. Consume-transform-produce: a READ_COMMITTED group member of "kp-ctp" reads kp-topic and,
   in one transaction, writes "y-<value>" to kp-out and commits its offsets to the group.
3. While a transaction of "kp-open" is open (one record written): list_transactions,
   describe_transactions and describe_producers; then it is aborted.
4. READ_COMMITTED readers of kp-topic and kp-out.
Prints one JSON object with what each step saw.
"""
import json
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

bootstrap = sys.argv[1]
admin = KafkaAdminClient(bootstrap_servers=bootstrap)
admin.create_topics([NewTopic("kp-topic", 1, 1), NewTopic("kp-out", 1, 1)])
out = {}

producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-tx")
producer.init_transactions()
producer.begin_transaction()
for i in range(10):
    producer.send("kp-topic", f"k1-{i}".encode(), partition=0)
producer.commit_transaction()
producer.begin_transaction()
for i in range(5):
    producer.send("kp-topic", f"ka-{i}".encode(), partition=0)
producer.flush()
producer.abort_transaction()

consumer = KafkaConsumer(
    "kp-topic", bootstrap_servers=bootstrap, group_id="kp-ctp",
    isolation_level="read_committed", enable_auto_commit=False,
    auto_offset_reset="earliest")
seen = []
deadline = time.time() + 30
while len(seen) < 10 and time.time() < deadline:
    for records in consumer.poll(timeout_ms=500).values():
        seen.extend(records)
producer.begin_transaction()
for r in seen:
    producer.send("kp-out", b"y-" + r.value, partition=0)
tp = TopicPartition("kp-topic", 0)
from kafka.structs import OffsetAndMetadata
producer.send_offsets_to_transaction(
    {tp: OffsetAndMetadata(seen[-1].offset + 1, "", -1)}, consumer.group_metadata())
producer.commit_transaction()
consumer.close()
out["ctp_read"] = [r.value.decode() for r in seen]
# EndTxn is answered once the commit is decided; the offsets count once its marker is on the
# group's partition, a moment later.
deadline = time.time() + 10
committed = None
while committed is None and time.time() < deadline:
    committed = admin.list_group_offsets("kp-ctp").get("kp-ctp", {}).get(tp)
    if committed is None:
        time.sleep(0.1)
out["ctp_committed"] = committed.offset if committed else None

open_producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-open")
open_producer.init_transactions()
open_producer.begin_transaction()
open_producer.send("kp-topic", b"open-0", partition=0)
open_producer.flush()
listed = admin.list_transactions()
out["listed"] = sorted([t.transactional_id, str(t.state)] for ts in listed.values() for t in ts)
described = admin.describe_transactions(["kp-open"])["kp-open"]
out["described"] = {"state": str(described.state),
                    "partitions": sorted([p.topic, p.partition] for p in described.topic_partitions)}
producers = admin.describe_producers([tp])[tp]
out["producers_open"] = sum(1 for p in producers.active_producers if p.current_transaction_start_offset >= 0)
open_producer.abort_transaction()


def read(topic):
    reader = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                           auto_offset_reset="earliest", consumer_timeout_ms=3000)
    reader.assign([TopicPartition(topic, 0)])
    values = [r.value.decode() for r in reader]
    reader.close()
    return values


out["topic"] = read("kp-topic")
out["out"] = read("kp-out")
print(json.dumps(out))
