"""An idempotent acks=all producer (librdkafka 2.16) that keeps going through failovers.

  acks_all_producer.py BOOTSTRAP TOPIC COUNT PROGRESS_FILE OUT_FILE [PAUSE_MS] [KEY=VALUE...]

Sends COUNT values "m-<i>" to partition 0 of TOPIC at a steady pace (PAUSE_MS, default 10,
after every 20), writes the number
acknowledged so far to PROGRESS_FILE as it goes (the test kills brokers by it), and at the end
writes every acknowledged (offset, value) as JSON to OUT_FILE. Delivery failures are counted,
not retried by hand: librdkafka retries within message.timeout.ms. Each KEY=VALUE is one more
librdkafka setting (security.protocol, sasl.*, ssl.* for a secured cluster).
"""
import json
import sys
import time

from confluent_kafka import Producer

bootstrap, topic, count, progress_path, out_path = sys.argv[1:6]
count = int(count)
rest = sys.argv[6:]
pause = float(rest.pop(0)) / 1000 if rest and "=" not in rest[0] else 0.01
settings = dict(arg.split("=", 1) for arg in rest)
producer = Producer({
    **settings,
    "bootstrap.servers": bootstrap,
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
    "message.timeout.ms": 60000,
    "topic.metadata.refresh.interval.ms": 1000,
})
acked, failed = [], []


def delivered(err, msg):
    if err is not None:
        failed.append(str(err))
    else:
        acked.append([msg.offset(), msg.value().decode()])


last_progress = 0
for i in range(count):
    producer.produce(topic, value=f"m-{i}", partition=0, on_delivery=delivered)
    producer.poll(0)
    if i % 20 == 19:
        time.sleep(pause)
    if len(acked) != last_progress:
        last_progress = len(acked)
        with open(progress_path, "w") as f:
            f.write(str(last_progress))
left = producer.flush(90)
with open(progress_path, "w") as f:
    f.write(str(len(acked)))
with open(out_path, "w") as f:
    json.dump({"acked": sorted(acked), "failed": failed, "unflushed": left}, f)
print(f"acked {len(acked)} failed {len(failed)} unflushed {left}")
