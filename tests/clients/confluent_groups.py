"""confluent-kafka consumer groups against Ferrite: splitting, rebalancing on join, clean leave
and crash, a second group, and committed offsets that survive a broker restart.

  confluent_groups.py run <bootstrap> <state-file>     everything before the restart
  confluent_groups.py resume <bootstrap> <state-file>  after it
"""
import json
import sys
import time
from collections import Counter

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from members import Members

mode, bootstrap, state_file = sys.argv[1:4]
TOPIC, PARTITIONS, GROUP = "orders", 6, "g"
T = 30


def produce(start, count):
    """Values r<start>..r<start+count-1>, spread evenly over the partitions."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    for i in range(start, start + count):
        p.produce(TOPIC, value=f"r{i}".encode(), partition=i % PARTITIONS)
    assert p.flush(T) == 0


def committed(group, partitions):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    out = c.committed([TopicPartition(TOPIC, p) for p in partitions], timeout=T)
    c.close()
    return out


def no_record_twice(records, what):
    twice = [k for k, n in Counter((p, o) for _, p, o, _ in records).items() if n > 1]
    assert not twice, f"{what}: records delivered more than once: {twice[:10]}"


def run():
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(timeout=T)
    m = Members(bootstrap, TOPIC)
    try:
        # Two members split the six partitions; every record reaches exactly one of them.
        produce(0, 600)
        m.start("a", GROUP)
        m.start("b", GROUP)
        split = m.wait_split(["a", "b"], PARTITIONS)
        m.wait_until("600 records", lambda _, r: len(r) >= 600)
        no_record_twice(m.snapshot()[1], "two members")
        print("split between two:", split)

        # A third joins: the partitions are redistributed over three.
        m.start("c", GROUP)
        split = m.wait_split(["a", "b", "c"], PARTITIONS)
        produce(600, 600)
        m.wait_until("1200 records", lambda _, r: len(r) >= 1200)
        no_record_twice(m.snapshot()[1], "three members")
        print("split between three:", split)

        # One leaves cleanly: its partitions move at once.
        m.close("a")
        split = m.wait_split(["b", "c"], PARTITIONS)
        produce(1200, 600)
        m.wait_until("1800 records", lambda _, r: len(r) >= 1800)
        no_record_twice(m.snapshot()[1], "after a clean leave")
        print("after a left:", split)

        # One is killed: no LeaveGroup, so its partitions move only when its session expires.
        killed_at = time.time()
        m.kill("b")
        m.wait_split(["c"], PARTITIONS, timeout=60)
        moved_after = time.time() - killed_at
        assert moved_after > 3, f"partitions moved {moved_after:.1f}s after the kill, before the 6s session ran out"
        produce(1800, 600)
        m.wait_until("2400 records", lambda _, r: len(r) >= 2400)
        records = m.snapshot()[1]
        no_record_twice(records, "after a crash")
        assert {(p, o) for _, p, o, _ in records} == {(i % PARTITIONS, i // PARTITIONS) for i in range(2400)}
        print(f"after b was killed: c holds everything, {moved_after:.1f}s after the kill")

        # A second group gets every record too (publish/subscribe across groups).
        m.start("other", "g2")
        m.wait_until("the second group's 2400 records",
                     lambda _, r: sum(1 for n, *_ in r if n == "other") >= 2400)
        theirs = [r for r in m.snapshot()[1] if r[0] == "other"]
        no_record_twice(theirs, "second group")
        assert sorted(v for *_, v in theirs) == sorted(f"r{i}" for i in range(2400))
        m.close("other")
        m.close("c")
    finally:
        m.stop_all()

    # Offsets with metadata and a leader epoch are returned exactly as committed.
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "with-metadata", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(TOPIC, 0, 17, metadata="checkpoint #1", leader_epoch=0),
                      TopicPartition(TOPIC, 3, 5, metadata="", leader_epoch=0)], asynchronous=False)
    c.close()
    positions = {tp.partition: tp.offset for tp in committed(GROUP, range(PARTITIONS))}
    assert positions == {p: 400 for p in range(PARTITIONS)}, positions
    json.dump({"positions": positions}, open(state_file, "w"))
    print("groups ok")


def resume():
    state = json.load(open(state_file))
    positions = {int(p): o for p, o in state["positions"].items()}
    after = {tp.partition: tp.offset for tp in committed(GROUP, range(PARTITIONS))}
    assert after == positions, f"committed offsets changed over the restart: {positions} -> {after}"
    meta = {tp.partition: (tp.offset, tp.metadata, tp.leader_epoch) for tp in committed("with-metadata", [0, 3])}
    assert meta == {0: (17, "checkpoint #1", 0), 3: (5, "", 0)}, meta

    # A restarted member resumes exactly after the committed offsets.
    produce(2400, 60)
    m = Members(bootstrap, TOPIC)
    try:
        m.start("again", GROUP)
        m.wait_until("the 60 new records", lambda _, r: len(r) >= 60)
        time.sleep(1)
        records = m.snapshot()[1]
        assert sorted(v for *_, v in records) == sorted(f"r{i}" for i in range(2400, 2460)), records[:5]
        for p in range(PARTITIONS):
            first = min(o for _, q, o, _ in records if q == p)
            assert first == positions[p], f"partition {p} resumed at {first}, not {positions[p]}"
        m.close("again")
    finally:
        m.stop_all()
    print("resume ok")


run() if mode == "run" else resume()
