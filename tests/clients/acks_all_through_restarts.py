"""Produces with acks=all and idempotence, through any number of broker restarts, until the file
named by the third argument exists; prints each acknowledged message as
`ack <partition> <offset> <value>` and each failed one as `fail <value> <error>`, then `done`."""
import os
import sys

from confluent_kafka import Producer

bootstrap, topic, stop_file = sys.argv[1], sys.argv[2], sys.argv[3]
# Long enough for a message to outlive every restart; librdkafka retries it meanwhile. Its
# re-bootstrap (KIP-899: every broker unreachable, so forget them and start over from
# bootstrap.servers) would pause producing for seconds after some kills: the one broker is
# the bootstrap server anyway.
p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
              "message.timeout.ms": 60000, "linger.ms": 5,
              "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 200,
              "metadata.recovery.strategy": "none"})


def on_delivery(err, msg):
    if err is None:
        print(f"ack {msg.partition()} {msg.offset()} {msg.value().decode()}", flush=True)
    else:
        print(f"fail {msg.value().decode()} {err}", flush=True)


i = 0
while not os.path.exists(stop_file):
    try:
        p.produce(topic, value=f"m{i}".encode(), on_delivery=on_delivery)
        i += 1
    except BufferError:
        p.poll(0.05)
    if i % 100 == 0:
        p.poll(0.001)
p.flush(70)
print("done", flush=True)
