#!/usr/bin/env bash
# Compares broker builds on reading a hot backlog, in alternating rounds: for each binary, a
# fresh broker, 2 GB of 1 KiB records in one partition (ferrite-bench produce), one warming
# read, then two timed reads of 2,000,000 records (ferrite-bench consume). Prints each read's
# rate and the broker's CPU for it (utime + stime from /proc).
#
#   perf/consume-ab.sh ROUNDS BINARY...
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n '2,7p' "$0" >&2; exit 2; }
rounds=$1
shift
cargo build -q --release -p ferrite-bench
perf/prepare-vm.sh
bench=target/release/ferrite-bench
port=19496
cpu_ms() { awk '{print ($14 + $15) * 10}' "/proc/$1/stat"; }
for round in $(seq 1 "$rounds"); do
  for bin in "$@"; do
    dir=$(mktemp -d)
    "$bin" serve --listen 127.0.0.1:$port --data-dir "$dir" --metrics off 2>"$dir.log" &
    pid=$!
    until (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; do sleep 0.05; done
    "$bench" produce --brokers 127.0.0.1:$port --topic hot --create --partitions 1 --size 1024 \
      --messages 2000000 >/dev/null 2>&1
    "$bench" consume --brokers 127.0.0.1:$port --topic hot --messages 2000000 >/dev/null 2>&1
    for pass in 1 2; do
      c0=$(cpu_ms "$pid")
      out=$("$bench" consume --brokers 127.0.0.1:$port --topic hot --messages 2000000 2>&1 | grep '^consume:' | tail -1)
      c1=$(cpu_ms "$pid")
      echo "round $round $bin pass $pass: $out | broker cpu $((c1 - c0)) ms"
    done
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    rm -rf "$dir" "$dir.log"
  done
done
