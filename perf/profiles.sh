#!/usr/bin/env bash
# Compares tuning profiles on the same scenarios, in one run on this machine.
#
#   perf/profiles.sh [ROUNDS] [PROFILE ...]     (default: 2 rounds; default throughput latency)
#
# Each round runs every profile in turn on a fresh data directory (so noise hits all of them),
# with three ferrite-bench scenarios: 1 KiB records to 1 partition from 1 producer, 16
# partitions from 4 producers, and end-to-end latency at a fixed 20,000 records/s. Prints one
# line per profile, scenario and round, then the median over rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2}
shift || true
profiles=("$@")
[ ${#profiles[@]} -gt 0 ] || profiles=(default throughput latency)
cargo build -q --release -p ferrite -p ferrite-bench
perf/prepare-vm.sh
bin=target/release/ferrite
bench=target/release/ferrite-bench
work=target/perf-profiles
port=19392
rm -rf "$work" && mkdir -p "$work"

scenario_args() {
  case "$1" in
    produce-1p) echo "produce --partitions 1 --size 1024 --producers 1 --duration 8 --warmup 2" ;;
    produce-16p) echo "produce --partitions 16 --size 1024 --producers 4 --duration 8 --warmup 2" ;;
    e2e-20k) echo "e2e --partitions 1 --size 1024 --rate 20000 --linger-ms 1 --duration 8 --warmup 2" ;;
  esac
}

run_one() { # round profile scenario
  local dir="$work/$1-$2-$3"
  mkdir -p "$dir"
  "$bin" serve --config "tuning/$2.toml" --listen 127.0.0.1:$port --metrics off \
    --data-dir "$dir/data" >"$dir/broker.log" 2>&1 &
  local pid=$!
  until (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; do sleep 0.05; done
  # shellcheck disable=SC2046
  "$bench" $(scenario_args "$3") --brokers 127.0.0.1:$port --topic t --create \
    --json "$dir/result.json" >"$dir/bench.out" 2>&1 || true
  kill -TERM $pid; wait $pid || true
  rm -rf "$dir/data" # a produce run writes gigabytes; keep only the figures and logs
  python3 - "$dir/result.json" "$1" "$2" "$3" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
lat = r.get("latency_ms") or {}
print(f"{sys.argv[2]:>5} {sys.argv[3]:<11} {sys.argv[4]:<12} {r.get('mb_per_sec', 0):9.1f} MB/s "
      f"{r.get('msgs_per_sec', 0):10.0f} msg/s  p50 {lat.get('p50', 0):8.2f} ms  p99 {lat.get('p99', 0):8.2f} ms")
PY
}

echo "round profile     scenario        throughput             latency (produce ack, or e2e)"
for round in $(seq 1 "$rounds"); do
  for scenario in produce-1p produce-16p e2e-20k; do
    for profile in "${profiles[@]}"; do
      run_one "$round" "$profile" "$scenario" | tee -a "$work/lines.txt"
    done
  done
done
echo "--- median over $rounds rounds"
python3 - "$work/lines.txt" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    rows.setdefault((f[2], f[1]), []).append((float(f[3]), float(f[8]), float(f[11])))
for (scenario, profile), vals in sorted(rows.items()):
    med = lambda i: statistics.median(v[i] for v in vals)
    print(f"{scenario:<12} {profile:<11} {med(0):9.1f} MB/s  p50 {med(1):8.2f} ms  p99 {med(2):8.2f} ms")
PY
