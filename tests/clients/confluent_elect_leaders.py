"""ElectLeaders PREFERRED through confluent-kafka's AdminClient for partition 0 of a topic;
prints the outcome: `elected`, or the Kafka error's name."""
import sys

from confluent_kafka import ElectionType, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

bootstrap, topic = sys.argv[1], sys.argv[2]
admin = AdminClient({"bootstrap.servers": bootstrap})
tp = TopicPartition(topic, 0)
try:
    # (confluent-kafka 2.16 fails on any keyword argument to elect_leaders.)
    results = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(timeout=30)
except KafkaException as e:
    print(f"failed {e.args[0].name()}")
    sys.exit(0)
err = results.get(tp)
print("elected" if err is None else f"refused {err.name()}")
