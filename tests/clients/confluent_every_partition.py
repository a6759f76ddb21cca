"""confluent-kafka: writes ROUNDS records to every partition of TOPIC (each named explicitly),
then reads the whole topic back from the beginning and checks every partition holds exactly
its records, in order. With --after EARLIER, the topic already holds EARLIER rounds (written
by an earlier run, before a restart) and the read checks those too.

    confluent_every_partition.py BOOTSTRAP TOPIC PARTITIONS ROUNDS [--after EARLIER]
"""
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

bootstrap, topic, partitions, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
earlier = int(sys.argv[6]) if len(sys.argv) > 6 and sys.argv[5] == "--after" else 0
T = 60

p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": T * 1000, "linger.ms": 20})
failed = []


def on_delivery(err, msg):
    if err is not None:
        failed.append(err)


for r in range(earlier, earlier + rounds):
    for partition in range(partitions):
        p.produce(topic, value=f"{partition}:{r}".encode(), partition=partition, on_delivery=on_delivery)
        p.poll(0)
    assert p.flush(T) == 0, "unflushed messages"
assert not failed, failed[:5]

c = Consumer({"bootstrap.servers": bootstrap, "group.id": "every-partition", "enable.auto.commit": False})
c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING) for partition in range(partitions)])
seen = {partition: [] for partition in range(partitions)}
want = partitions * (earlier + rounds)
got = 0
deadline = time.time() + T
while got < want:
    assert time.time() < deadline, f"only {got} of {want} records read back"
    m = c.poll(0.5)
    if m is None:
        continue
    assert m.error() is None, m.error()
    seen[m.partition()].append(m.value().decode())
    got += 1
c.close()
for partition, values in seen.items():
    assert values == [f"{partition}:{r}" for r in range(earlier + rounds)], (partition, values[:5])
print(f"{want} records read back from {partitions} partitions")
