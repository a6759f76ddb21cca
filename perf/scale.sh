#!/usr/bin/env bash
# Issue 18's single-broker figures: TOPICS topics of PARTITIONS partitions (default 200 × 100 =
# 20,000) on one broker with default settings but topic.partitions.per.shard raised to hold
# them. Prints the open file limit, the time to create them, open descriptors, resident memory
# per partition (against the same broker empty), Metadata for all topics (a raw v1 request,
# median and worst of 5), and the time until the broker listens again after a clean stop and
# after kill -9. Run with the release binary and nothing else busy.
#
#   perf/scale.sh [TOPICS] [PARTITIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
topics=${1:-200}
per_topic=${2:-100}
total=$((topics * per_topic))
bin=target/release/ferrite
[ -x "$bin" ] || { echo "build it first: cargo build --release -p ferrite" >&2; exit 1; }
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
port=19694
per_shard=$(( (total + 1) / 2 + 1000 ))

start() {
  "$bin" serve --listen 127.0.0.1:$port --data-dir "$work/data" --metrics off \
    --set num.partitions="$per_topic" --set topic.partitions.per.shard="$per_shard" \
    2>>"$work/broker.log" &
  pid=$!
  until (echo > /dev/tcp/127.0.0.1/$port) 2>/dev/null; do sleep 0.01; done
}
now() { date +%s.%N; }
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
kill -9 $pid; wait $pid 2>/dev/null || true
s0=$(now); start; s1=$(now)
printf 'restart after kill -9: listening in %.2f s\n' "$(echo "$s1-$s0" | bc)"
printf 'open descriptors after the restart: %s\n' "$(ls /proc/$pid/fd | wc -l)"
kill $pid; wait $pid || true
