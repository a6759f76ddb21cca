"""Reads partition 0 of a topic from the start until STOP_FILE appears (confluent-kafka).

  watching_consumer.py BOOTSTRAP TOPIC STOP_FILE OUT_FILE

Writes every record it saw as [offset, value] to OUT_FILE: what a consumer was served, to check
later that none of it was lost.
"""
import json
import os
import sys
import time

from confluent_kafka import Consumer, TopicPartition

bootstrap, topic, stop_file, out_path = sys.argv[1:5]
consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watcher",
                     "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000})
consumer.assign([TopicPartition(topic, 0, 0)])
seen = []
idle_since = None
deadline = time.time() + 180
while time.time() < deadline:
    msg = consumer.poll(0.2)
    if msg is not None and not msg.error():
        seen.append([msg.offset(), msg.value().decode()])
        idle_since = None
        continue
    if os.path.exists(stop_file):
        # Drain: stop once nothing has come for two seconds after the stop was asked.
        idle_since = idle_since or time.time()
        if time.time() - idle_since > 2:
            break
consumer.close()
with open(out_path, "w") as f:
    json.dump(seen, f)
print(f"saw {len(seen)} records")
