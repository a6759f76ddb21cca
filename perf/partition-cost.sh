#!/usr/bin/env bash
# What a partition costs an idle broker, to choose topic.partitions.per.shard from: for 0 to
# 8,000 partitions (topics of 1,000, auto-created), the time to create them, resident memory,
# open file descriptors, CPU used in 10 idle seconds and the time to restart on the data
# directory. One line per count; run with the release binary, nothing else busy.
#
#   perf/partition-cost.sh [buffered|direct] [COUNTS...]     (default buffered 0 2000 4000 8000)
set -euo pipefail
cd "$(dirname "$0")/.."
perf/prepare-vm.sh
mode=${1:-buffered}
shift || true
counts=${*:-0 2000 4000 8000}
bin=target/release/ferrite
[ -x "$bin" ] || { echo "build it first: cargo build --release" >&2; exit 1; }
work=$(mktemp -d)
# The broker is waited for before its data goes: one still shutting down writes into the
# directory while it is removed, which leaves it behind (12 GB after a scale run).
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
printf '[shards]\nio_mode = "%s"\n' "$mode" > "$work/tuning.toml"
port=19692
ticks_per_s=$(getconf CLK_TCK)

start() {
  "$bin" serve --config "$work/tuning.toml" --listen 127.0.0.1:$port --data-dir "$work/data" \
    --metrics off "$@" 2>>"$work/broker.log" &
  pid=$!
  until (echo > /dev/tcp/127.0.0.1/$port) 2>/dev/null; do sleep 0.02; done
}

for total in $counts; do
  rm -rf "$work/data" 2>/dev/null || { sleep 1; rm -rf "$work/data"; }
  start --set num.partitions=1000 --set topic.partitions.per.shard=100000
  t0=$(date +%s.%N)
  for i in $(seq 1 $((total / 1000))); do kcat -b 127.0.0.1:$port -L -t "t$i" >/dev/null 2>&1; done
  t1=$(date +%s.%N)
  sleep 2
  rss=$(awk '/VmRSS/{print $2}' /proc/$pid/status)
  fds=$(ls /proc/$pid/fd | wc -l)
  c0=$(awk '{print $14+$15}' /proc/$pid/stat); sleep 10; c1=$(awk '{print $14+$15}' /proc/$pid/stat)
  kill $pid; wait $pid || true
  s0=$(date +%s.%N)
  start
  s1=$(date +%s.%N)
  kill $pid; wait $pid || true
  printf 'mode=%s partitions=%s create_s=%.2f rss_mib=%.1f fds=%s idle_cpu_pct=%.1f restart_s=%.2f\n' \
    "$mode" "$total" "$(echo "$t1-$t0" | bc)" "$(echo "$rss/1024" | bc -l)" "$fds" \
    "$(echo "($c1-$c0)*100/$ticks_per_s/10" | bc -l)" "$(echo "$s1-$s0" | bc)"
done
