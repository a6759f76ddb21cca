"""Creates a topic with AdminClient (librdkafka 2.16).

  confluent_admin_create.py BOOTSTRAP TOPIC PARTITIONS REPLICATION_FACTOR [NAME=VALUE ...]
"""
import sys

from confluent_kafka.admin import AdminClient, NewTopic

bootstrap, topic, partitions, rf = sys.argv[1:5]
config = dict(kv.split("=", 1) for kv in sys.argv[5:])
admin = AdminClient({"bootstrap.servers": bootstrap})
futures = admin.create_topics([NewTopic(topic, int(partitions), int(rf), config=config)],
                              request_timeout=20)
futures[topic].result(timeout=20)
print(f"created {topic}")
