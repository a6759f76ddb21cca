"""One kafka-python KafkaConsumer group member, driven over stdin/stdout: the kafka-python
counterpart of group_member.py, with the same lines.

Args: bootstrap group topic name. Prints one line per event, flushed:
  ASSIGNED <name> <partitions, comma-separated>    after each assignment
  REVOKED <name>                                   when partitions are taken away
  REC <name> <partition> <offset> <value>          for each record, after committing past it
  COMMIT-FAILED <name> <error>                     when a commit is refused (records not reported)
Reads stdin: a line "close" (or end of input) closes the consumer cleanly, which leaves the
group; the test kills the process to simulate a crash.
"""
import select
import sys

from kafka import KafkaConsumer, OffsetAndMetadata
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.errors import KafkaError

bootstrap, group, topic, name = sys.argv[1:5]


def say(*parts):
    print(*parts, flush=True)


class Listener(ConsumerRebalanceListener):
    def on_partitions_revoked(self, revoked):
        say("REVOKED", name)

    def on_partitions_assigned(self, assigned):
        say("ASSIGNED", name, ",".join(str(tp.partition) for tp in sorted(assigned, key=lambda tp: tp.partition)))


consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, client_id=name,
                         auto_offset_reset="earliest", enable_auto_commit=False,
                         session_timeout_ms=6000, heartbeat_interval_ms=500, max_poll_interval_ms=10000,
                         request_timeout_ms=10000, bootstrap_timeout_ms=10000, metadata_max_age_ms=1000)
consumer.subscribe([topic], listener=Listener())
while True:
    readable, _, _ = select.select([sys.stdin], [], [], 0)
    if readable:
        line = sys.stdin.readline()
        if line == "" or line.strip() == "close":
            break
    batches = consumer.poll(timeout_ms=200)
    if not batches:
        continue
    # Commit before reporting, so a record reported by one member is never given to another.
    offsets = {tp: OffsetAndMetadata(records[-1].offset + 1, name, -1) for tp, records in batches.items()}
    try:
        consumer.commit(offsets=offsets, timeout_ms=10000)
    except KafkaError as e:
        say("COMMIT-FAILED", name, repr(e).replace("\n", " "))
        continue
    for tp, records in batches.items():
        for r in records:
            say("REC", name, tp.partition, r.offset, r.value.decode())
consumer.close(timeout_ms=10000)
say("CLOSED", name)
