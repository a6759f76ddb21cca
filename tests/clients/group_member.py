"""One confluent-kafka group member, driven by a test over stdin/stdout.

Args: bootstrap group topic name [group.instance.id]. Prints one line per event, flushed:
  ASSIGNED <name> <partitions, comma-separated>    after each assignment
  REVOKED <name>                                   when partitions are taken away
  REC <name> <partition> <offset> <value>          for each record, after committing past it
Reads stdin: a line "close" (or end of input) closes the consumer cleanly, which leaves the
group; the test kills the process to simulate a crash.
"""
import select
import sys

from confluent_kafka import Consumer, KafkaException, TopicPartition

bootstrap, group, topic, name = sys.argv[1:5]
instance = sys.argv[5] if len(sys.argv) > 5 else None


def say(*parts):
    print(*parts, flush=True)


conf = {
    "bootstrap.servers": bootstrap,
    "group.id": group,
    "client.id": name,
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 500,
    "topic.metadata.refresh.interval.ms": 1000,
}
if instance:
    conf["group.instance.id"] = instance
consumer = Consumer(conf)


def on_assign(c, partitions):
    say("ASSIGNED", name, ",".join(str(p.partition) for p in sorted(partitions, key=lambda p: p.partition)))


def on_revoke(c, partitions):
    say("REVOKED", name)


consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
while True:
    readable, _, _ = select.select([sys.stdin], [], [], 0)
    if readable:
        line = sys.stdin.readline()
        if line == "" or line.strip() == "close":
            break
    m = consumer.poll(0.2)
    if m is None:
        continue
    if m.error():
        say("ERROR", name, m.error())
        continue
    # Commit before reporting, so a record reported by one member is never given to another
    # after a clean rebalance.
    try:
        consumer.commit(offsets=[TopicPartition(m.topic(), m.partition(), m.offset() + 1)], asynchronous=False)
    except KafkaException as e:
        # The partition moved meanwhile: its new owner reads this record again.
        say("COMMIT-FAILED", name, m.partition(), m.offset(), e)
        continue
    say("REC", name, m.partition(), m.offset(), m.value().decode())
consumer.close()
say("CLOSED", name)
