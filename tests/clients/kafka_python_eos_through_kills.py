"""Exactly-once consume-transform-produce with kafka-python 3.0 while a broker is killed: the
second client family's loop, run through the death of its group's coordinator.

  kafka_python_eos_through_kills.py BOOTSTRAP IN_TOPIC OUT_TOPIC COUNT TRANSACTIONAL_ID [PLACEMENT]

What `confluent_eos_through_kills.py` does, with kafka-python's producer and consumer: COUNT
records "v-<i>" to IN_TOPIC, then a READ_COMMITTED group member moves them to OUT_TOPIC as
"x-<value>" in transactions of up to 200 records, each committing its input position with
send_offsets_to_transaction. PLACEMENT ("on:N", "avoid:N") places the group by its
coordinator (`eos_groups.py`). A failed call aborts the transaction (or, if the abort fails
too, makes a new producer with the same transactional id, which fences and aborts what the
old one left) and rewinds to the committed position. Prints "progress N" after each commit
and at the end "result {json}" as the confluent script does.

kafka-python 3.0.12's transactional calls wait without a bound, and one of its requests can
be dropped: when the coordinator it is addressed to is not reachable, its sender looks the
coordinator up again but does not queue the request again (`Sender._maybe_send_transactional_
request`: the failed `await_ready` raises after `target_node` is set, so the final `retry` is
skipped), and the caller waits forever. Seen here with TxnOffsetCommit after the group
coordinator was killed: FindCoordinator was answered with the new coordinator within
milliseconds and the request never went out. Java's producer waits `max.block.ms` and throws
TimeoutException; the loop does the same (`bounded`, TXN_CALL_TIMEOUT_MS) and then aborts as
after any failure. A watchdog ends the process with every thread's stack on stderr when no
commit has come for WATCHDOG_S, so a test reports where the client stopped.
"""
import faulthandler
import json
import os
import sys
import threading
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaTimeoutError
from kafka.structs import OffsetAndMetadata

from eos_groups import pick_group

WATCHDOG_S = 90
TXN_CALL_TIMEOUT_MS = 15000
if os.environ.get("EOS_CLIENT_LOG"):
    # The client's own debug log, to a file: what it asked and what it was answered.
    import logging
    logging.basicConfig(filename=os.environ["EOS_CLIENT_LOG"], level=logging.DEBUG,
                        format="%(asctime)s %(threadName)s %(name)s %(message)s")

bootstrap, in_topic, out_topic, count, txn_id = sys.argv[1:6]
count = int(count)
group = pick_group(bootstrap, sys.argv[6] if len(sys.argv) > 6 else None)
servers = bootstrap.split(",")

plain = KafkaProducer(bootstrap_servers=servers, enable_idempotence=True, acks="all",
                      linger_ms=5, retries=1 << 30, delivery_timeout_ms=120000)
for i in range(count):
    plain.send(in_topic, f"v-{i}".encode(), partition=0)
plain.flush(120)
plain.close()
print("progress 0", flush=True)

last_progress = time.monotonic()
stage = "starting"


def watchdog():
    while True:
        time.sleep(1)
        if time.monotonic() - last_progress > WATCHDOG_S:
            print(f"no commit for {WATCHDOG_S} s, in {stage}; every thread's stack:",
                  file=sys.stderr, flush=True)
            faulthandler.dump_traceback(file=sys.stderr)
            sys.stderr.flush()
            os._exit(3)


threading.Thread(target=watchdog, daemon=True).start()


def bounded(producer, begin):
    """A transactional call that waits at most TXN_CALL_TIMEOUT_MS, as Java's producer waits
    max.block.ms: `begin` starts it on kafka-python's transaction manager and returns its
    result (what KafkaProducer's own methods do, then wait on without a bound)."""
    result = begin(producer._transaction_manager)
    producer._sender.wakeup()
    if not result.wait(timeout_ms=TXN_CALL_TIMEOUT_MS):
        raise KafkaTimeoutError(f"no answer in {TXN_CALL_TIMEOUT_MS} ms")


def log_error(e):
    print(f"error in {stage}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)


consumer = KafkaConsumer(in_topic, bootstrap_servers=servers, group_id=group,
                         isolation_level="read_committed", enable_auto_commit=False,
                         auto_offset_reset="earliest", session_timeout_ms=30000)
tp = TopicPartition(in_topic, 0)


def new_producer():
    global stage
    while True:
        stage = "init_transactions"
        p = KafkaProducer(bootstrap_servers=servers, transactional_id=txn_id,
                          transaction_timeout_ms=20000, max_block_ms=30000)
        try:
            p.init_transactions()
            return p
        except Exception as e:  # noqa: BLE001 - any failure: a new producer tries again
            log_error(e)
            p.close(timeout=1)
            time.sleep(0.5)


def rewind():
    global stage
    stage = "rewind"
    while True:
        try:
            committed = consumer.committed(tp, timeout_ms=10000)
            consumer.seek(tp, committed if committed is not None else 0)
            return
        except Exception as e:  # noqa: BLE001 - the coordinator may be moving
            log_error(e)
            time.sleep(0.5)


producer = new_producer()
done, aborted, restarted = 0, 0, 0
deadline = time.time() + 240
while done < count and time.time() < deadline:
    stage = "poll"
    batch = [r for rs in consumer.poll(timeout_ms=1000, max_records=200).values() for r in rs]
    if not batch:
        continue
    try:
        stage = "begin_transaction"
        producer.begin_transaction()
        stage = "send"
        for r in batch:
            producer.send(out_topic, b"x-" + r.value, partition=0)
        stage = "send_offsets_to_transaction"
        offsets = {tp: OffsetAndMetadata(batch[-1].offset + 1, "", -1)}
        metadata = consumer.group_metadata()
        bounded(producer, lambda tm: tm.send_offsets_to_transaction(offsets, metadata))
        stage = "commit_transaction"
        bounded(producer, lambda tm: tm.begin_commit())
        done = batch[-1].offset + 1
        last_progress = time.monotonic()
        print(f"progress {done}", flush=True)
    except Exception as e:  # noqa: BLE001 - every failure is handled the same way
        log_error(e)
        try:
            stage = "abort_transaction"
            bounded(producer, lambda tm: tm.begin_abort())
            aborted += 1
        except Exception as e2:  # noqa: BLE001
            log_error(e2)
            producer.close(timeout=1)
            producer = new_producer()
            restarted += 1
        rewind()
consumer.close()
producer.close(timeout=5)

stage = "reading the output"
reader = KafkaConsumer(bootstrap_servers=servers, isolation_level="read_committed",
                       enable_auto_commit=False, consumer_timeout_ms=5000)
out_tp = TopicPartition(out_topic, 0)
reader.assign([out_tp])
reader.seek(out_tp, 0)
end = reader.end_offsets([out_tp])[out_tp]
out = []
read_deadline = time.time() + 60
while reader.position(out_tp) < end and time.time() < read_deadline:
    for rs in reader.poll(timeout_ms=500).values():
        out.extend(r.value.decode() for r in rs)
reader.close()
print("result " + json.dumps({"out": out, "done": done, "aborted": aborted,
                              "restarted": restarted}), flush=True)
