"""Fetch sessions' worth (KIP-227): one kafka-python consumer tails every partition of a topic,
with incremental fetch sessions and without, first idle and then while ferrite-bench produces
to the topic. For each of the four runs: fetches per second, request and response bytes per
second (the broker's ferrite_network_{received,sent}_bytes_total), and the broker's CPU
(user + system of all its threads, io_uring workers included, from /proc/<pid>/stat). A run
of the producer alone is printed beside the loaded runs: what they add is the consumer's. On a
2-core machine the Python consumer also takes CPU from the bench's producer, so loaded CPU
figures compare the two consumer settings with each other, not with the producer alone.

  perf/fetch-sessions.sh [PARTITIONS] [SECONDS] [RATE]    (default 1000, 10, 2000 records/s)

Run by perf/fetch-sessions.sh, which builds the broker and bench and starts the broker.
"""
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request

from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

bootstrap, metrics, pid, topic = sys.argv[1:5]
partitions, seconds, rate = int(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7])
bench = sys.argv[8]
TICKS = os.sysconf("SC_CLK_TCK")


def broker_cpu_seconds():
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def counters():
    text = urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10).read().decode()
    out = {"received": 0.0, "sent": 0.0, "fetches": 0.0}
    for line in text.splitlines():
        if line.startswith("ferrite_network_received_bytes_total"):
            out["received"] += float(line.split()[-1])
        elif line.startswith("ferrite_network_sent_bytes_total"):
            out["sent"] += float(line.split()[-1])
        elif line.startswith("ferrite_requests_total") and 'api="Fetch"' in line:
            out["fetches"] += float(line.split()[-1])
    return out


admin = KafkaAdminClient(bootstrap_servers=bootstrap)
admin.create_topics([NewTopic(topic, partitions, 1)])
admin.close()


def measure(sessions, loaded):
    """One run; `sessions` None: no consumer (the producer's own share, subtracted)."""
    consumer = None
    if sessions is not None:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                 enable_incremental_fetch_sessions=sessions)
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_end()
        # Settle: positions resolved and (with sessions) the session opened.
        settle = time.time() + 3
        while time.time() < settle:
            consumer.poll(timeout_ms=200)
    producer = None
    if loaded:
        producer = subprocess.Popen(
            [bench, "produce", "--brokers", bootstrap, "--topic", topic, "--size", "100",
             "--rate", str(rate), "--duration", str(seconds + 4), "--linger-ms", "5"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(2)
    before, cpu_before, start = counters(), broker_cpu_seconds(), time.time()
    records = 0
    while time.time() - start < seconds:
        if consumer is None:
            time.sleep(0.2)
            continue
        for batch in consumer.poll(timeout_ms=200).values():
            records += len(batch)
    elapsed = time.time() - start
    after, cpu_after = counters(), broker_cpu_seconds()
    if producer:
        producer.wait()
    if consumer:
        consumer.close()
    per_second = {k: (after[k] - before[k]) / elapsed for k in before}
    return {
        "sessions": sessions, "loaded": loaded, "seconds": round(elapsed, 2),
        "records_per_second": round(records / elapsed),
        "fetches_per_second": round(per_second["fetches"], 1),
        "request_bytes_per_second": round(per_second["received"]),
        "response_bytes_per_second": round(per_second["sent"]),
        "broker_cpu_percent": round(100 * (cpu_after - cpu_before) / elapsed, 1),
    }


rows = [measure(s, False) for s in (False, True)]
producer_only = measure(None, True)
rows += [measure(s, True) for s in (False, True)]
print(f"| {partitions} partitions, one kafka-python consumer | sessions | fetches/s | request B/s "
      "| response B/s | records/s | broker CPU |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    load = f"producing {rate} records/s" if r["loaded"] else "idle"
    print(f"| {load} | {'on' if r['sessions'] else 'off'} | {r['fetches_per_second']} "
          f"| {r['request_bytes_per_second']} | {r['response_bytes_per_second']} "
          f"| {r['records_per_second']} | {r['broker_cpu_percent']}% |")
p = producer_only
print(f"| the producer alone | — | {p['fetches_per_second']} | {p['request_bytes_per_second']} "
      f"| {p['response_bytes_per_second']} | — | {p['broker_cpu_percent']}% |")
print(json.dumps({"rows": rows, "producer_only": producer_only}))
