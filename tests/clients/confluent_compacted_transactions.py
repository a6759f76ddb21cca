"""Compaction of transactional data, seen through confluent-kafka (librdkafka 2.16).

  confluent_compacted_transactions.py produce BOOTSTRAP TOPIC STATE
      Creates TOPIC (one partition, compact, small segments, delete.retention.ms=0). One
      transactional producer commits "c-<k>" for KEYS keys, then overwrites every key with
      "a-<k>" in a transaction it aborts, then commits unique filler keys so all of that lies
      in closed segments. Saves every record with its offset and whether it was committed.
  confluent_compacted_transactions.py check BOOTSTRAP TOPIC STATE WAIT_SECONDS
      Reads TOPIC from the start at both isolation levels until both hold exactly what Kafka's
      cleaner leaves: each key's committed value at its offset (the aborted overwrite went
      and did not hide it) and every filler. A READ_COMMITTED read never returns an aborted
      record, before compaction or after.
"""
import json
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

KEYS = 20
FILLERS = 200
T = 30


def produce(bootstrap, topic, state_path):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"cleanup.policy": "compact", "segment.bytes": "4096", "delete.retention.ms": "0",
              "min.cleanable.dirty.ratio": "0.01"}
    admin.create_topics([NewTopic(topic, 1, 1, config=config)], request_timeout=T)[topic].result(timeout=T)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-writer",
                         "linger.ms": 5})
    producer.init_transactions(T)
    records = []

    def delivered(err, msg):
        assert err is None, err
        records.append([msg.offset(), msg.key().decode(), msg.value().decode()])

    def transaction(pairs, commit):
        producer.begin_transaction()
        for key, value in pairs:
            producer.produce(topic, key=key, value=value, partition=0, on_delivery=delivered)
        producer.flush(T)
        (producer.commit_transaction if commit else producer.abort_transaction)(T)

    transaction([(f"key-{k}", f"c-{k}") for k in range(KEYS)], True)
    transaction([(f"key-{k}", f"a-{k}") for k in range(KEYS)], False)
    for start in range(0, FILLERS, 50):
        transaction([(f"filler-{i}", "f" * 100) for i in range(start, start + 50)], True)
    records.sort()
    assert len(records) == 2 * KEYS + FILLERS, len(records)
    with open(state_path, "w") as f:
        json.dump(records, f)
    print(f"produced {len(records)} records in {2 + FILLERS // 50} transactions")


def read_all(bootstrap, topic, isolation):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{isolation}",
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        records, deadline = [], time.time() + T
        while time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    return records
                raise RuntimeError(msg.error())
            records.append([msg.offset(), msg.key().decode(), msg.value().decode()])
        raise RuntimeError(f"{isolation}: the end of {topic} was not reached in {T} s")
    finally:
        consumer.close()


def check(bootstrap, topic, state_path, wait_seconds):
    with open(state_path) as f:
        written = json.load(f)
    committed = [r for r in written if not r[2].startswith("a-")]
    want = committed
    deadline = time.time() + wait_seconds
    while True:
        read_committed = read_all(bootstrap, topic, "read_committed")
        read_uncommitted = read_all(bootstrap, topic, "read_uncommitted")
        aborted_seen = [r for r in read_committed if r[2].startswith("a-")]
        assert not aborted_seen, f"read_committed returned aborted records: {aborted_seen[:3]}"
        assert read_committed == want, \
            f"read_committed: {len(read_committed)} records, want {len(want)}: {read_committed[:3]}"
        if read_uncommitted == want:
            print(f"compacted transactions ok: {len(want)} of {len(written)} records remain, "
                  "the same at both isolation levels")
            return
        if time.time() > deadline:
            left = sum(1 for r in read_uncommitted if r[2].startswith("a-"))
            raise AssertionError(f"not compacted after {wait_seconds}s: {left} aborted records left")
        time.sleep(0.5)


if __name__ == "__main__":
    command, bootstrap, topic, state_path = sys.argv[1:5]
    if command == "produce":
        produce(bootstrap, topic, state_path)
    else:
        check(bootstrap, topic, state_path, float(sys.argv[5]))
