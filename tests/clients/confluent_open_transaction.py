"""Leaves a transaction open (confluent-kafka): initialises a transactional producer, writes
one record to each of PARTITIONS partitions of TOPIC in a transaction, flushes, prints "open"
and exits without ending it, as a producer that dies mid-transaction.

  confluent_open_transaction.py BOOTSTRAP TOPIC PARTITIONS TRANSACTIONAL_ID
"""
import os
import sys

from confluent_kafka import Producer

bootstrap, topic, partitions, txn_id = sys.argv[1:5]
producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                     "transaction.timeout.ms": 600000})
producer.init_transactions(60)
producer.begin_transaction()
for p in range(int(partitions)):
    producer.produce(topic, f"open-{p}".encode(), partition=p)
producer.flush(30)
print("open", flush=True)
# Neither commit nor abort: the transaction stays open on the broker.
os._exit(0)
