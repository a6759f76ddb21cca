"""Produces with acks=all and prints each acknowledged message as `ack <partition> <offset> <value>`,
until the broker goes away (the test kills it) or all messages are sent."""
import sys

from confluent_kafka import Producer

bootstrap, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
              "message.timeout.ms": 3000, "linger.ms": 2})


def on_delivery(err, msg):
    if err is None:
        print(f"ack {msg.partition()} {msg.offset()} {msg.value().decode()}", flush=True)


for i in range(count):
    while True:
        try:
            p.produce(topic, value=f"m{i}".encode(), on_delivery=on_delivery)
            break
        except BufferError:
            p.poll(0.05)
    p.poll(0)
p.flush(10)
print("done", flush=True)
