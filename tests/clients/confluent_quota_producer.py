"""A confluent-kafka producer that sends 10 KB records as fast as it can for SECONDS with
client.id CLIENT, and prints one JSON line: the rate of what was acknowledged within that
time (bytes of values per second), and the throttle times the broker told it (throttle_cb)."""
import json
import sys
import time

from confluent_kafka import Producer

bootstrap, client, seconds, topic = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
throttles = []
p = Producer({"bootstrap.servers": bootstrap, "client.id": client, "acks": 1,
              "linger.ms": 5, "batch.size": 262_144, "queue.buffering.max.kbytes": 65536,
              "throttle_cb": lambda e: throttles.append(e.throttle_time)})
value = b"x" * 10_000
acked = [0]
start = time.time()
end = start + seconds


def delivered(err, msg):
    if err is None and time.time() <= end:
        acked[0] += len(msg.value())


# Metadata first, so the clock does not count topic auto-creation.
p.produce(topic, value=b"warm-up")
p.flush(10)
start = time.time()
end = start + seconds
while time.time() < end:
    try:
        p.produce(topic, value=value, on_delivery=delivered)
    except BufferError:
        p.poll(0.01)
        continue
    p.poll(0)
p.flush(30)
positive = [t for t in throttles if t > 0]
print(json.dumps({"client": client, "rate": acked[0] / seconds, "throttled": len(positive),
                  "max_throttle_ms": max(positive, default=0)}))
