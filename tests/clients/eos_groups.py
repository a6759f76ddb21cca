"""The consumer group of an exactly-once loop, placed by the broker that coordinates it.

  pick_group(BOOTSTRAP, PLACEMENT)

PLACEMENT is None (the group "eos"), "avoid:N" (the first of "eos-0", "eos-1", ... that broker
N does not coordinate) or "on:N" (the first that broker N coordinates). Prints "group NAME
coordinated by N". The coordinator is asked with confluent-kafka's DescribeGroups whichever
client runs the loop: only the answer is used.
"""
import time

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient


def pick_group(bootstrap, placement):
    if placement is None:
        return "eos"
    rule, broker = placement.split(":")
    broker = int(broker)
    wanted = {"avoid": lambda c: c != broker, "on": lambda c: c == broker}[rule]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.time() + 60
    for i in range(1000):
        name = f"eos-{i}"
        while True:
            try:
                described = admin.describe_consumer_groups([name])[name].result(10)
                break
            except (KafkaException, TimeoutError):
                # __consumer_offsets is created by the first lookup; its leaders come after.
                if time.time() > deadline:
                    raise
                time.sleep(0.5)
        if wanted(described.coordinator.id):
            print(f"group {name} coordinated by {described.coordinator.id}", flush=True)
            return name
    raise RuntimeError(f"no group placed {placement}")
