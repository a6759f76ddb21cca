"""Static membership (KIP-345) with confluent-kafka: a member that restarts with the same
group.instance.id within its session timeout gets its partitions back, and the group does not
rebalance (the other member keeps its partitions throughout)."""
import sys
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from members import Members

bootstrap = sys.argv[1]
TOPIC, PARTITIONS = "static", 4
admin = AdminClient({"bootstrap.servers": bootstrap})
admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)


def produce(start, count):
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(start, start + count):
        p.produce(TOPIC, value=f"s{i}".encode(), partition=i % PARTITIONS)
    assert p.flush(30) == 0


m = Members(bootstrap, TOPIC)
try:
    m.start("fixed", "static-group", instance="fixed-1")
    m.start("other", "static-group", instance="other-1")
    before = m.wait_split(["fixed", "other"], PARTITIONS)
    produce(0, 40)
    m.wait_until("40 records", lambda _, r: len(r) >= 40)
    events_of_other = sum(1 for line in m.log if line.split()[:2] in (["ASSIGNED", "other"], ["REVOKED", "other"]))

    # Restart "fixed" (a static member's close sends no LeaveGroup) well inside its 6 s session.
    m.close("fixed")
    m.start("fixed-again", "static-group", instance="fixed-1")
    m.wait_until("the restarted member's assignment", lambda a, _: a.get("fixed-again"))
    assigned = m.snapshot()[0]
    assert assigned["fixed-again"] == before["fixed"], f"{before} -> {assigned}"
    produce(40, 40)
    m.wait_until("40 more records", lambda _, r: len(r) >= 80)
    time.sleep(2)  # a rebalance, had there been one, would show in the other member's events by now
    after = sum(1 for line in m.log if line.split()[:2] in (["ASSIGNED", "other"], ["REVOKED", "other"]))
    assert after == events_of_other, "the other member was rebalanced:\n" + "\n".join(m.log)
    got = {r[3] for r in m.snapshot()[1] if r[0] == "fixed-again"}
    assert got == {f"s{i}" for i in range(40, 80) if i % PARTITIONS in before["fixed"]}, sorted(got)
    m.close("fixed-again")
    m.close("other")
finally:
    m.stop_all()
print("static membership ok")
