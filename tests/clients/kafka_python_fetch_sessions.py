"""kafka-python 3.0's consumer reading through an incremental fetch session (KIP-227).

  kafka_python_fetch_sessions.py BOOTSTRAP TOPIC PARTITIONS RECORDS

Creates TOPIC, produces half of RECORDS over its partitions, then assigns every partition to
one consumer (incremental fetch sessions on, kafka-python's default) and reads them; then the
other half is produced and read, through the session the first reads opened. Every partition must be read from offset 0 on, each record once and in
order. Prints JSON: "ok", the records read, and the consumer's session with the broker (its
id and epoch: an epoch above 1 means incremental fetches were answered).
"""
import json
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

bootstrap, topic, partitions, records = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
admin = KafkaAdminClient(bootstrap_servers=bootstrap)
admin.create_topics([NewTopic(topic, partitions, 1)])
admin.close()

producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)


def produce(start, end):
    for i in range(start, end):
        producer.send(topic, value=f"r{i}".encode(), partition=i % partitions)
    producer.flush(timeout=30)


produce(0, records // 2)
consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                         enable_incremental_fetch_sessions=True, fetch_max_wait_ms=100)
consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
consumer.seek_to_beginning()
offsets = {p: [] for p in range(partitions)}
read, deadline = 0, time.time() + 60


def read_until(count):
    global read
    while read < count and time.time() < deadline:
        for tp, batch in consumer.poll(timeout_ms=200).items():
            offsets[tp.partition].extend(r.offset for r in batch)
            read += len(batch)


read_until(records // 2)
produce(records // 2, records)
read_until(records)
sessions = [h.next_metadata for h in consumer._fetcher._session_handlers.values()]
consumer.close()
producer.close()

in_order = all(o == list(range(len(o))) for o in offsets.values())
session = sessions[0] if sessions else None
print(json.dumps({
    "ok": read == records and in_order and session is not None
          and session.session_id != 0 and session.epoch > 1,
    "read": read,
    "in_order": in_order,
    "session_id": session.session_id if session else None,
    "epoch": session.epoch if session else None,
}))
