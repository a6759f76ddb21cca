#!/usr/bin/env bash
# Where e2e tail latency goes on a small host: the e2e-half-max run (1 KiB records, one
# partition, open loop, linger 1 ms) with the broker and the bench sharing every core, against
# the same run with the broker on one shard (CPU 0) and the bench pinned to the other CPU.
# Rounds alternate the two placements on a fresh data directory each time, because this
# machine's speed moves from minute to minute.
#
#   perf/e2e-placement.sh [RATE] [ROUNDS]    (default 191451 records/s, 3 rounds)
#
# Prints one line per run: e2e and produce request latency percentiles, the CPU seconds of the
# broker (utime + stime from /proc, io_uring workers included) and of the bench, and the
# machine's steal time during the run (CPU the hypervisor gave to someone else, all CPUs).
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-191451}
rounds=${2:-3}
port=19296
metrics_port=19297
dir=target/perf-e2e-placement
cargo build -q --release -p ferrite -p ferrite-bench
perf/prepare-vm.sh
[ "$(nproc)" -ge 2 ] || { echo "needs two CPUs" >&2; exit 1; }
broker=""
trap '[ -n "$broker" ] && kill $broker 2>/dev/null; wait 2>/dev/null' EXIT

steal_ticks() { awk '/^cpu / {print $9}' /proc/stat; }

run() { # LABEL BROKER_CORES BENCH_PREFIX...
  local label=$1 cores=$2
  shift 2
  rm -rf "$dir/data" && mkdir -p "$dir/data"
  target/release/ferrite serve --listen "127.0.0.1:$port" --metrics "127.0.0.1:$metrics_port" \
    --cores "$cores" --data-dir "$dir/data" >"$dir/broker-$label.log" 2>&1 &
  broker=$!
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
  done
  local steal_before
  steal_before=$(steal_ticks)
  "$@" /usr/bin/time -f "%U %S" -o "$dir/bench-cpu" target/release/ferrite-bench e2e \
    --brokers "127.0.0.1:$port" --topic e2e --create --partitions 1 --size 1024 \
    --duration 10 --warmup 2 --linger-ms 1 --rate "$rate" --json "$dir/$label.json" \
    >"$dir/$label.out" 2>&1 || { cat "$dir/$label.out" >&2; exit 1; }
  local broker_ticks steal
  broker_ticks=$(awk '{print $14 + $15}' "/proc/$broker/stat")
  steal=$(($(steal_ticks) - steal_before))
  kill "$broker"
  wait "$broker" 2>/dev/null || true
  broker=""
  python3 - "$label" "$dir/$label.json" "$broker_ticks" "$(getconf CLK_TCK)" \
    "$(cat "$dir/bench-cpu")" "$steal" <<'PY'
import json, sys
label, path, ticks, hz, bench_cpu, steal = sys.argv[1:]
d = json.load(open(path))
e, r = d["e2e_latency_ms"], d["request_latency_ms"]
bench = sum(float(x) for x in bench_cpu.split())
print(f"| {label} | {d['mb_per_sec']:.1f} | {e['p50']:.2f} | {e['p99']:.2f} | {e['p999']:.2f} "
      f"| {r['p99']:.2f} | {int(ticks) / int(hz):.2f} | {bench:.2f} | {int(steal) / int(hz):.2f} |")
PY
}

echo "e2e at $rate records/s of 1 KiB, one partition; $(date -u +%FT%TZ)"
echo "| placement | MB/s | e2e p50 ms | e2e p99 ms | e2e p99.9 ms | request p99 ms | broker CPU s | bench CPU s | steal s |"
echo "|---|---|---|---|---|---|---|---|---|"
for round in $(seq "$rounds"); do
  run "shared-2-shards-r$round" 2 env
  run "shared-1-shard-r$round" 1 env
  run "apart-r$round" 1 taskset -c 1
done
