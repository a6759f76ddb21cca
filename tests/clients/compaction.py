"""Log compaction seen through confluent-kafka (librdkafka 2.16).

  compaction.py produce BOOTSTRAP TOPIC STATE ROUNDS VALUE_BYTES
      Creates TOPIC (compact, small segments, delete.retention.ms=0), writes ROUNDS versions of
      KEYS keys (zstd batches), then tombstones for the first DELETED keys, then unique filler
      keys so every version lies in closed segments; saves what was acknowledged, with offsets.
  compaction.py check BOOTSTRAP TOPIC STATE WAIT_SECONDS [--partial-ok]
      Reads the topic from the start until it holds exactly what compaction must leave: below
      the fillers, only the latest value of each key not deleted, at its original offset; every
      filler. With --partial-ok it only checks that nothing was lost or moved, and says
      whether compaction is complete.
"""
import json
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

KEYS = 20
DELETED = 5
FILLERS = 300
T = 20


def produce(bootstrap, topic, state_path, rounds, value_bytes):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"cleanup.policy": "compact", "segment.bytes": "4096", "delete.retention.ms": "0",
              "min.cleanable.dirty.ratio": "0.01"}
    admin.create_topics([NewTopic(topic, 1, 1, config=config)], request_timeout=T)[topic].result(timeout=T)
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "zstd", "linger.ms": 1,
                         "acks": "all"})
    acked = []

    def delivered(err, msg):
        assert err is None, err
        value = msg.value().decode() if msg.value() is not None else None
        acked.append([msg.offset(), msg.key().decode(), value])

    for r in range(rounds):
        for k in range(KEYS):
            producer.produce(topic, key=f"key-{k}", value=f"round-{r}-key-{k}-" + "v" * value_bytes,
                             on_delivery=delivered)
        producer.flush(T)
    for k in range(DELETED):
        producer.produce(topic, key=f"key-{k}", value=None, on_delivery=delivered)
    producer.flush(T)
    fillers_from = max(o for o, _, _ in acked) + 1
    for i in range(FILLERS):
        producer.produce(topic, key=f"filler-{i}", value="f" * 100, on_delivery=delivered)
        if i % 10 == 9:
            producer.flush(T)
    producer.flush(T)
    acked.sort()
    assert len(acked) == rounds * KEYS + DELETED + FILLERS, len(acked)
    with open(state_path, "w") as f:
        json.dump({"acked": acked, "fillers_from": fillers_from}, f)
    print(f"produced {len(acked)} records; fillers from offset {fillers_from}")


def read_all(bootstrap, topic):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "compaction-check",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        tp = TopicPartition(topic, 0)
        _, high = consumer.get_watermark_offsets(tp, timeout=T)
        consumer.assign([TopicPartition(topic, 0, 0)])
        records, deadline = [], time.time() + T
        while time.time() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    if not records or records[-1][0] >= high - 1:
                        break
                    continue
                raise RuntimeError(msg.error())
            value = msg.value().decode() if msg.value() is not None else None
            records.append([msg.offset(), msg.key().decode(), value])
            if msg.offset() >= high - 1:
                break
        return records
    finally:
        consumer.close()


def expected(acked, fillers_from):
    latest = {}
    for o, k, v in acked:
        if o < fillers_from:
            latest[k] = [o, k, v]
    survivors = [r for r in latest.values() if r[2] is not None]
    return sorted(survivors) + [r for r in acked if r[0] >= fillers_from]


def check(bootstrap, topic, state_path, wait_seconds, partial_ok):
    with open(state_path) as f:
        state = json.load(f)
    acked = state["acked"]
    by_offset = {o: [o, k, v] for o, k, v in acked}
    want = expected(acked, state["fillers_from"])
    deadline = time.time() + wait_seconds
    while True:
        got = read_all(bootstrap, topic)
        # Nothing moved, nothing invented: every record read is one acknowledged at that offset.
        for r in got:
            assert by_offset.get(r[0]) == r, f"record {r} was never acknowledged at that offset"
        # Nothing lost: each key's latest value and every filler is there; a key whose latest
        # record is a tombstone has either the tombstone or no record at all.
        present = {r[0] for r in got}
        keys_present = {r[1] for r in got}
        latest = {}
        for o, k, v in acked:
            latest[k] = (o, v)
        missing = [o for k, (o, v) in latest.items()
                   if o not in present and (v is not None or k in keys_present)]
        missing += [r[0] for r in want if r[0] not in present]
        assert not missing, f"acknowledged latest records missing at offsets {sorted(set(missing))[:10]}"
        if got == want:
            print(f"compaction ok: {len(got)} of {len(acked)} records remain")
            return
        if partial_ok:
            print(f"nothing lost: {len(got)} of {len(acked)} records remain, compaction not complete")
            return
        if time.time() > deadline:
            raise AssertionError(f"not compacted after {wait_seconds}s: {len(got)} records, want {len(want)}")
        time.sleep(0.5)


if __name__ == "__main__":
    command, bootstrap, topic, state_path = sys.argv[1:5]
    if command == "produce":
        produce(bootstrap, topic, state_path, int(sys.argv[5]), int(sys.argv[6]))
    else:
        check(bootstrap, topic, state_path, float(sys.argv[5]), "--partial-ok" in sys.argv)
