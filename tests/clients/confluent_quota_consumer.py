"""fill: produces COUNT records of 10 KB to TOPIC. consume: a confluent-kafka consumer with
client.id CLIENT reads TOPIC from the start for SECONDS and prints one JSON line: the value
bytes it read, and the throttle times the broker told it (throttle_cb)."""
import json
import sys
import time

from confluent_kafka import Consumer, Producer

mode, bootstrap, topic = sys.argv[1], sys.argv[2], sys.argv[3]
if mode == "fill":
    p = Producer({"bootstrap.servers": bootstrap, "client.id": "filler", "linger.ms": 5})
    for _ in range(int(sys.argv[4])):
        while True:
            try:
                p.produce(topic, value=b"y" * 10_000)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(30) == 0
    print("filled")
    sys.exit(0)

client, seconds = sys.argv[4], float(sys.argv[5])
throttles = []
c = Consumer({"bootstrap.servers": bootstrap, "client.id": client, "group.id": client,
              "auto.offset.reset": "earliest", "enable.auto.commit": False,
              "throttle_cb": lambda e: throttles.append(e.throttle_time)})
c.subscribe([topic])
read = 0
start = None
while start is None or time.time() < start + seconds:
    m = c.poll(0.2)
    if m is None or m.error():
        continue
    if start is None:
        start = time.time()
    read += len(m.value())
c.close()
print(json.dumps({"client": client, "bytes": read,
                  "throttled": len([t for t in throttles if t > 0])}))
