"""Initialises a transactional producer (confluent-kafka), which makes the broker create
__transaction_state, and prints "ready".

  confluent_init_transactions.py BOOTSTRAP TRANSACTIONAL_ID
"""
import sys

from confluent_kafka import Producer

bootstrap, txn_id = sys.argv[1:3]
producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
producer.init_transactions(60)
print("ready", flush=True)
