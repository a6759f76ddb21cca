"""kafka-python 3's alter_partition_reassignments / list_partition_reassignments against a
three-broker Ferrite cluster: a partition with two replicas moves to the broker that has none
and one of its two, while a producer sends with acks=all; every acknowledged record is read
back afterwards, and Kafka's refusals come back for bad targets. Prints one JSON line with the
replica sets, for the test to check the copy that left is deleted."""
import json
import sys
import threading
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import (InvalidReplicationAssignmentError, NoReassignmentInProgressError,
                          UnknownTopicOrPartitionError)

bootstrap = sys.argv[1]
T = 30
admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=T * 1000)
admin.create_topics([NewTopic("moving", 1, 2)])
tp = TopicPartition("moving", 0)


def partition():
    for t in admin.describe_topics(["moving"]):
        for p in t["partitions"]:
            if p["partition_index"] == 0 and p["leader_id"] >= 0:
                return p
    return None


def wait_for(condition):
    """The partition as one broker describes it, once `condition` holds for it. Each call of
    describe_topics may ask a different broker, and a broker that has not yet seen the topic
    answers without it, so every decision is taken on one answer, never on two."""
    deadline = time.time() + T
    while True:
        p = partition()
        if p is not None and condition(p):
            return p
        assert time.time() < deadline, admin.describe_topics(["moving"])
        time.sleep(0.1)


original = wait_for(lambda p: len(p["isr_nodes"]) >= 2)["replica_nodes"]
newcomer = ({1, 2, 3} - set(original)).pop()
# The first (preferred, leading) replica leaves: leadership has to move too.
target = [original[1], newcomer]

acked, failed = [], []
stop = threading.Event()


def produce():
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=1000,
                             retry_backoff_ms=50, linger_ms=5, request_timeout_ms=T * 1000)
    i = 0
    while not stop.is_set():
        value = b"v-%d" % i
        future = producer.send("moving", value=value, partition=0)
        future.add_callback(lambda _md, v=value: acked.append(v))
        future.add_errback(lambda e, v=value: failed.append((v, repr(e))))
        i += 1
        if i % 50 == 0:
            producer.flush(T)
    producer.flush(T)
    producer.close(T)


loader = threading.Thread(target=produce)
loader.start()
time.sleep(1.0)

result = admin.alter_partition_reassignments({tp: target})
assert result.get(tp) is None, result
seen_in_progress = False
deadline = time.time() + T
while True:
    ongoing = admin.list_partition_reassignments()
    if tp in ongoing:
        seen_in_progress = True
        r = ongoing[tp]
        assert r["adding_replicas"] == [newcomer] and r["removing_replicas"] == [original[0]], r
    p = partition()
    if tp not in ongoing and p is not None and sorted(p["replica_nodes"]) == sorted(target):
        break
    assert time.time() < deadline, (ongoing, p)
    time.sleep(0.1)
moved = wait_for(lambda p: sorted(p["isr_nodes"]) == sorted(target))

# The leadership went to the target's first replica, the preferred one: kafka-python's
# elect_leaders finds nothing to do (ELECTION_NOT_NEEDED, which it does not raise).
assert moved["leader_id"] == target[0], moved
answer = admin.elect_leaders(0, {"moving": [0]})
codes = [p.error_code for r in answer.replica_election_results for p in r.partition_result]
assert codes == [84], answer

# Kafka's refusals, per partition.
bad = {
    TopicPartition("moving", 0): [target[0], 9],
    TopicPartition("moving", 7): target,
}
result = admin.alter_partition_reassignments(bad)
assert result[TopicPartition("moving", 0)] is InvalidReplicationAssignmentError, result
assert result[TopicPartition("moving", 7)] is UnknownTopicOrPartitionError, result
result = admin.alter_partition_reassignments({tp: [target[0], target[0]]})
assert result[tp] is InvalidReplicationAssignmentError, result
result = admin.alter_partition_reassignments({tp: None})
assert result[tp] is NoReassignmentInProgressError, result

time.sleep(0.5)
stop.set()
loader.join(T)
assert not failed, failed[:5]
assert len(acked) > 100, len(acked)

consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                         enable_auto_commit=False, consumer_timeout_ms=5000)
consumer.assign([tp])
read = set()
deadline = time.time() + T
while not set(acked) <= read and time.time() < deadline:
    for m in consumer.poll(timeout_ms=1000).get(tp, []):
        read.add(m.value)
missing = set(acked) - read
assert not missing, (len(missing), sorted(missing)[:5])
print(json.dumps({"original": original, "target": target, "acked": len(acked),
                  "seen_in_progress": seen_in_progress}))
