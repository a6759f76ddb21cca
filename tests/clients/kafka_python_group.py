"""kafka-python's KafkaConsumer in a group: two consumers split a topic, commit, and a new
consumer of the group resumes after the committed offsets."""
import sys
import threading
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

bootstrap = sys.argv[1]
TOPIC, PARTITIONS, GROUP = "kp-group", 4, "kp-g"
admin = KafkaAdminClient(bootstrap_servers=bootstrap)
admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
admin.close()

producer = KafkaProducer(bootstrap_servers=bootstrap)
for i in range(400):
    producer.send(TOPIC, value=f"k{i}".encode(), partition=i % PARTITIONS)
producer.flush(timeout=30)

got = {}  # consumer name -> [(partition, offset)]
assignments = {}
lock = threading.Lock()
stop = threading.Event()


def consume(name):
    c = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=GROUP, client_id=name,
                      auto_offset_reset="earliest", enable_auto_commit=False,
                      session_timeout_ms=10000, heartbeat_interval_ms=500)
    mine = []
    while not stop.is_set():
        for records in c.poll(timeout_ms=200).values():
            mine.extend((r.partition, r.offset) for r in records)
        c.commit()
        with lock:
            got[name] = list(mine)
            assignments[name] = {tp.partition for tp in c.assignment()}
    c.close()


threads = [threading.Thread(target=consume, args=(n,)) for n in ("one", "two")]
for t in threads:
    t.start()
deadline = time.time() + 60
while time.time() < deadline:
    with lock:
        both = len(assignments) == 2 and all(assignments.values())
        split = both and assignments["one"].isdisjoint(assignments["two"])
        total = sum(len(v) for v in got.values())
    if split and total >= 400:
        break
    time.sleep(0.2)
stop.set()
for t in threads:
    t.join(timeout=30)
assert split, f"the two consumers did not split the partitions: {assignments}"
every = [r for v in got.values() for r in v]
assert sorted(every) == sorted((i % PARTITIONS, i // PARTITIONS) for i in range(400)), \
    f"{len(every)} records, {len(set(every))} distinct"

# Committed offsets are the end of each partition; a new member starts there.
for i in range(400, 440):
    producer.send(TOPIC, value=f"k{i}".encode(), partition=i % PARTITIONS)
producer.flush(timeout=30)
producer.close()
c = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=GROUP, auto_offset_reset="earliest",
                  enable_auto_commit=False, consumer_timeout_ms=5000)
later = []
deadline = time.time() + 30
while len(later) < 40 and time.time() < deadline:
    for records in c.poll(timeout_ms=500).values():
        later.extend(r.value.decode() for r in records)
assert sorted(later) == sorted(f"k{i}" for i in range(400, 440)), later
assert c.committed(TopicPartition(TOPIC, 0)) == 100
c.close()
print("kafka-python group ok")
