"""Many short transactions through one librdkafka producer (confluent-kafka), for following
its transaction coordinator connection between shards.

  confluent_txn_loop.py BOOTSTRAP TOPIC TRANSACTIONAL_ID TRANSACTIONS

Each transaction writes one record "<TRANSACTIONAL_ID>-<n>" to each of TOPIC's two partitions
and commits. Prints "committed <TRANSACTIONS>".
"""
import sys

from confluent_kafka import Producer

bootstrap, topic, txn_id, transactions = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

producer = Producer({
    "bootstrap.servers": bootstrap,
    "transactional.id": txn_id,
    "linger.ms": 0,
})
producer.init_transactions(30)
for n in range(transactions):
    producer.begin_transaction()
    for partition in range(2):
        producer.produce(topic, f"{txn_id}-{n}".encode(), partition=partition)
    producer.commit_transaction(30)
print(f"committed {transactions}", flush=True)
