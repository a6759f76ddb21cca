"""A kafka-python producer and consumer whose work moves from one partition to another.

  kafka_python_moving.py BOOTSTRAP TOPIC RECORDS

Creates TOPIC with 2 partitions (a two-shard broker puts them on different shards). The
producer sends RECORDS to partition 0, one request at a time, then RECORDS to partition 1, on
its one connection to the broker. The consumer (incremental fetch sessions on, kafka-python's
default) reads partition 0 one batch per fetch, then partition 1. Each phase names only one
shard's partition, so wherever the kernel put a connection, one phase ran on the other shard.
Prints JSON: "ok" when each partition came back whole, once and in order.
"""
import json
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

bootstrap, topic, records = sys.argv[1], sys.argv[2], int(sys.argv[3])
admin = KafkaAdminClient(bootstrap_servers=bootstrap)
admin.create_topics([NewTopic(topic, 2, 1)])
admin.close()

producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0,
                         max_in_flight_requests_per_connection=1)
for partition in (0, 1):
    for i in range(records):
        producer.send(topic, value=f"p{partition}-{i}".encode(), partition=partition).get(timeout=30)
producer.close()

# One batch per fetch: the broker always returns the first batch, however small the limit.
consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                         max_partition_fetch_bytes=1, fetch_max_wait_ms=100)
read = {}
deadline = time.time() + 60
for partition in (0, 1):
    tp = TopicPartition(topic, partition)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    values = []
    while len(values) < records and time.time() < deadline:
        for batch in consumer.poll(timeout_ms=200).values():
            values.extend(r.value.decode() for r in batch)
    read[partition] = values
consumer.close()

whole = {p: read[p] == [f"p{p}-{i}" for i in range(records)] for p in (0, 1)}
print(json.dumps({"ok": all(whole.values()), "whole": whole,
                  "read": {p: len(v) for p, v in read.items()}}))
