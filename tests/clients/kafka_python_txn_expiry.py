"""A transactional id forgotten after transactional.id.expiration.ms (kafka-python 3.0).

  kafka_python_txn_expiry.py BOOTSTRAP WAIT_S

Producer "expiring" commits one transaction and closes. The admin client describes the id at
once, then again after WAIT_S seconds (the broker runs with a short expiration), and lists the
transactions both times. Prints JSON: {"before": state, "after": state or the error's name,
"listed_before": [...ids], "listed_after": [...ids]}.
"""
import json
import sys
import time

from kafka import KafkaAdminClient, KafkaProducer

bootstrap, wait_s = sys.argv[1], float(sys.argv[2])
producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="expiring")
producer.init_transactions()
producer.begin_transaction()
producer.send("expiring-topic", b"once")
producer.commit_transaction()
producer.close()

admin = KafkaAdminClient(bootstrap_servers=bootstrap)


def state():
    try:
        return str(admin.describe_transactions(["expiring"])["expiring"].state)
    except Exception as e:  # TransactionalIdNotFoundError once expired
        return type(e).__name__


def listed():
    return sorted(t.transactional_id for ts in admin.list_transactions().values() for t in ts)


# EndTxn is answered once the commit is decided; the markers and CompleteCommit follow.
deadline = time.time() + 5
before = state()
while before == "TransactionState.PREPARE_COMMIT" and time.time() < deadline:
    time.sleep(0.05)
    before = state()
out = {"before": before, "listed_before": listed()}
time.sleep(wait_s)
out["after"] = state()
out["listed_after"] = listed()
print(json.dumps(out))
