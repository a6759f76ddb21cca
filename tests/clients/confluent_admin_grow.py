"""Grows a topic with AdminClient (librdkafka 2.16): confluent_admin_grow.py BOOTSTRAP TOPIC COUNT"""
import sys

from confluent_kafka.admin import AdminClient, NewPartitions

bootstrap, topic, count = sys.argv[1:4]
admin = AdminClient({"bootstrap.servers": bootstrap})
admin.create_partitions([NewPartitions(topic, int(count))], request_timeout=20)[topic].result(timeout=20)
print(f"grew {topic} to {count}")
