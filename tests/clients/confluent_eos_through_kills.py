"""Exactly-once consume-transform-produce (confluent-kafka 2.16) while the broker is killed.

  confluent_eos_through_kills.py BOOTSTRAP IN_TOPIC OUT_TOPIC COUNT TRANSACTIONAL_ID [PLACEMENT]

Writes COUNT records "v-<i>" to IN_TOPIC (one partition, idempotent, acks=all), then a group
member (READ_COMMITTED; the group "eos", or as PLACEMENT says) moves them to OUT_TOPIC as
"x-<value>" in transactions of up to 200 records, each committing its input position with
send_offsets_to_transaction. Whatever fails (the broker is killed under it) is handled as
Kafka's documentation says: an abortable error aborts and rewinds to the committed position; a
fatal one (fenced, or the producer's state lost) makes a new producer with the same
transactional id and rewinds. Prints "progress
N" after each commit (N = input records done), and at the end one line "result {json}":
{"out": [...READ_COMMITTED...], "aborted": n, "restarted": n}.

With PLACEMENT "avoid:N" the group is one broker N does not coordinate (`eos_groups.py`); the
test kills N. A group coordinator's death in the middle of send_offsets_to_transaction can hang
librdkafka 2.16 past the call's timeout (issues #5511 and #5456, with Kafka as with Ferrite;
seen twice in CI, both times with the killed broker also coordinating the group), and that is
not what these tests kill brokers to check: kafka-python's loop
(`kafka_python_eos_through_kills.py`) is the one run through the group coordinator's death.
"""
import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from eos_groups import pick_group

bootstrap, in_topic, out_topic, count, txn_id = sys.argv[1:6]
count = int(count)
placement = sys.argv[6] if len(sys.argv) > 6 else None
group = pick_group(bootstrap, placement)

plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                  "linger.ms": 5, "message.timeout.ms": 120000})
for i in range(count):
    while True:
        try:
            plain.produce(in_topic, f"v-{i}".encode(), partition=0)
            break
        except BufferError:
            plain.poll(0.1)
plain.flush(120)
print("progress 0", flush=True)

consumer = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": group,
    "isolation.level": "read_committed",
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "session.timeout.ms": 30000,
})
consumer.subscribe([in_topic])


def new_producer():
    # metadata.recovery.strategy=none: with librdkafka 2.16's default (rebootstrap), a
    # single broker's restart decommissions the cached group coordinator, and
    # send_offsets_to_transaction then hangs past its timeout (librdkafka issues #5511 and
    # #5456, with Kafka as with Ferrite). Without re-bootstrapping the broker's thread
    # reconnects and the request goes out.
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                  "transaction.timeout.ms": 20000, "metadata.recovery.strategy": "none"})
    while True:
        try:
            p.init_transactions(30)
            return p
        except KafkaException as e:
            if not e.args[0].retriable():
                raise
            time.sleep(0.5)


def rewind():
    while True:
        try:
            assigned = consumer.assignment()
            for tp in consumer.committed(assigned, 10):
                consumer.seek(TopicPartition(tp.topic, tp.partition,
                                             tp.offset if tp.offset >= 0 else 0))
            return
        except KafkaException:
            time.sleep(0.5)


producer = new_producer()
done, aborted, restarted = 0, 0, 0
deadline = time.time() + 240
while done < count and time.time() < deadline:
    batch = [m for m in consumer.consume(num_messages=200, timeout=1) if m.error() is None]
    if not batch:
        continue
    try:
        producer.begin_transaction()
        for m in batch:
            producer.produce(out_topic, b"x-" + m.value(), partition=0)
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        done = batch[-1].offset() + 1
        print(f"progress {done}", flush=True)
    except KafkaException as e:
        err = e.args[0]
        print(f"error {err.name()} abortable={err.txn_requires_abort()} fatal={err.fatal()}",
              file=sys.stderr, flush=True)
        if err.txn_requires_abort():
            try:
                producer.abort_transaction(30)
                aborted += 1
            except KafkaException:
                producer = new_producer()
                restarted += 1
        else:
            # Fatal or retriable mid-commit: a new producer aborts whatever is left open.
            producer = new_producer()
            restarted += 1
        rewind()
consumer.close()

reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-check",
                   "isolation.level": "read_committed", "enable.partition.eof": True})
reader.assign([TopicPartition(out_topic, 0, 0)])
out, eof = [], False
deadline = time.time() + 60
while not eof and time.time() < deadline:
    m = reader.poll(0.5)
    if m is None:
        continue
    if m.error():
        eof = m.error().code() == -191
        continue
    out.append(m.value().decode())
reader.close()
print("result " + json.dumps({"out": out, "done": done, "aborted": aborted,
                              "restarted": restarted}), flush=True)
