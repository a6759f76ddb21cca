#!/usr/bin/env bash
# Issue 18's single-broker figures: TOPICS topics of PARTITIONS partitions (default 200 × 100 =
# 20,000) on one broker with default settings but topic.partitions.per.shard raised to hold
# them. Prints the open file limit, the time to create them, open descriptors, resident memory
# per partition (against the same broker empty), Metadata for all topics (a raw v1 request,
# median and worst of 5), and the time until the broker listens again after a clean stop and
# after kill -9. Then, on a fresh broker: ferrite-bench producing keyed 1 KiB records to one
# partition and to 10,000 at once (throughput and acknowledgement p99), and the restart after
# a kill -9 in the middle of the 10,000-partition produce. Run with the release binary and
# nothing else busy.
#
#   perf/scale.sh [TOPICS] [PARTITIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
perf/prepare-vm.sh
topics=${1:-200}
per_topic=${2:-100}
total=$((topics * per_topic))
bin=target/release/ferrite
[ -x "$bin" ] || { echo "build it first: cargo build --release -p ferrite" >&2; exit 1; }
work=$(mktemp -d)
# The broker is waited for before its data goes: one still shutting down writes into the
# directory while it is removed, which leaves it behind (12 GB after a scale run).
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
port=19694
per_shard=$(( (total + 1) / 2 + 1000 ))

# start [DATA_DIR]: the broker, returning once it listens (or failing if it exits first).
start() {
  "$bin" serve --listen 127.0.0.1:$port --data-dir "${1:-$work/data}" --metrics off \
    --set num.partitions="$per_topic" --set topic.partitions.per.shard="$per_shard" \
    2>>"$work/broker.log" &
  pid=$!
  until (echo > /dev/tcp/127.0.0.1/$port) 2>/dev/null; do
    kill -0 $pid 2>/dev/null || { echo "the broker exited; its log:" >&2; tail "$work/broker.log" >&2; exit 1; }
    sleep 0.01
  done
}
now() { date +%s.%N; }
# kill -9 of the broker, returning once nothing listens on its port any more: a dead broker's
# listening sockets outlive it by some milliseconds and would answer the next start's probe.
kill_hard() {
  kill -9 $pid; wait $pid 2>/dev/null || true
  for _ in $(seq 500); do (echo > /dev/tcp/127.0.0.1/$port) 2>/dev/null || return 0; sleep 0.01; done
}
rss_kib() { awk '/VmRSS/{print $2}' "/proc/$1/status"; }

# Metadata v1 for every topic (topics: null), timed from the request's send to the last byte
# of the answer; prints "median worst" in milliseconds.
metadata_ms() {
  python3 - "$port" <<'EOF'
import socket, struct, sys, time
port = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", port))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
client = b"scale"
def call(correlation):
    body = struct.pack(">hhih", 3, 1, correlation, len(client)) + client + struct.pack(">i", -1)
    t0 = time.perf_counter()
    s.sendall(struct.pack(">i", len(body)) + body)
    head = b""
    while len(head) < 4:
        head += s.recv(4 - len(head))
    left = struct.unpack(">i", head)[0]
    size = left
    while left:
        left -= len(s.recv(min(left, 1 << 20)))
    return (time.perf_counter() - t0) * 1000, size
times = []
for i in range(5):
    ms, size = call(i)
    times.append(ms)
times.sort()
print(f"{times[2]:.1f} {times[-1]:.1f} {size}")
EOF
}

echo "# perf/scale.sh $topics $per_topic ($(date -u +%FT%TZ), $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo "open file limit (ulimit -n): soft $(ulimit -Sn), hard $(ulimit -Hn)"

start
sleep 1
rss_empty=$(rss_kib $pid)
t0=$(now)
for i in $(seq 1 "$topics"); do kcat -b 127.0.0.1:$port -L -t "t$i" >/dev/null 2>&1; done
t1=$(now)
sleep 2
dirs=$(find "$work/data" -maxdepth 1 -name 't*-*' | wc -l)
rss=$(rss_kib $pid)
fds=$(ls /proc/$pid/fd | wc -l)
read -r md_median md_worst md_bytes < <(metadata_ms)
printf 'partitions %s (directories %s), created in %.2f s\n' "$total" "$dirs" "$(echo "$t1-$t0" | bc)"
printf 'open descriptors %s; resident %.1f MiB (empty %.1f MiB): %.1f KiB per partition\n' \
  "$fds" "$(echo "$rss/1024" | bc -l)" "$(echo "$rss_empty/1024" | bc -l)" \
  "$(echo "($rss-$rss_empty)/$total" | bc -l)"
printf 'Metadata for all topics (%s bytes): median %s ms, worst %s ms of 5\n' "$md_bytes" "$md_median" "$md_worst"

kill $pid; wait $pid || true
s0=$(now); start; s1=$(now)
printf 'restart after a clean stop: listening in %.2f s\n' "$(echo "$s1-$s0" | bc)"
kill_hard
s0=$(now); start; s1=$(now)
printf 'restart after kill -9: listening in %.2f s\n' "$(echo "$s1-$s0" | bc)"
printf 'open descriptors after the restart: %s\n' "$(ls /proc/$pid/fd | wc -l)"
kill $pid; wait $pid || true

# produce_keyed TOPIC PARTITIONS SECONDS: keyed records spread over the topic's partitions;
# prints throughput and acknowledgement p99.
produce_keyed() {
  timeout 60 target/release/ferrite-bench produce --brokers 127.0.0.1:$port --topic "$1" --create \
    --partitions "$2" --keys 100000 --partitioner hash --size 1024 --duration "$3" --warmup 2 \
    --json "$work/$1.json" >"$work/$1.out" 2>&1
  python3 - "$work/$1.json" "$2" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
n = int(sys.argv[2])
print(f"produce to {n:,} partition{'s' if n > 1 else ''} (keyed, 1 KiB): {r['mb_per_sec']:.1f} MB/s, "
      f"ack p99 {r['latency_ms']['p99']:.2f} ms, errors {r['errors']}")
EOF
}

start "$work/produce"
produce_keyed one 1 10
produce_keyed many 10000 10
# A kill -9 in the middle of the 10,000-partition produce: every partition has records past
# its last checkpoint, which the restart scans and checkpoints.
(produce_keyed many 10000 8 >/dev/null 2>&1 || true) &
bench=$!
sleep 6
kill_hard
wait $bench || true
s0=$(now); start "$work/produce"; s1=$(now)
printf 'restart after kill -9 during the 10,000-partition produce: listening in %.2f s\n' "$(echo "$s1-$s0" | bc)"
kill $pid; wait $pid || true
