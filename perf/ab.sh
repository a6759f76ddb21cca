#!/usr/bin/env bash
# Compares broker tuning files on one ferrite-bench scenario, in alternating rounds: each round
# runs every configuration in turn on a fresh data directory, so a slow minute on this machine
# hits all of them rather than one.
#
#   perf/ab.sh ROUNDS "BENCH ARGS" CONFIG...
#
# A CONFIG is the text of a tuning file, with \n for line breaks, optionally followed by
# "@@" and more bench arguments for that configuration only, by "##" and the path of
# another broker binary for it (to compare builds; the default is target/release/ferrite),
# and by "%%" and the path of another ferrite-bench binary (to compare clients):
#
#   perf/ab.sh 3 "produce --partitions 1 --size 100 --duration 10 --warmup 2" \
#     '[shards]\ninline_write_bytes_max = 0\n' '[shards]\n'
#
# Prints one line per run: throughput, the broker's CPU seconds (utime + stime from /proc,
# io_uring workers included) and per GB produced (warm-up included, as perf/run counts it),
# the machine's steal time during the run, the e2e latency percentiles (in e2e mode; else the
# acknowledgement latency) and the produce request latency p99.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 3 ] || { sed -n '2,19p' "$0" >&2; exit 2; }
rounds=$1
bench_args=$2
shift 2
port=19398
dir=target/perf-ab
cargo build -q --release -p ferrite -p ferrite-bench
perf/prepare-vm.sh
mkdir -p "$dir"
broker=""
trap '[ -n "$broker" ] && kill $broker 2>/dev/null; wait 2>/dev/null' EXIT

steal_ticks() { awk '/^cpu / {print $9}' /proc/stat; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

for round in $(seq 1 "$rounds"); do
  n=0
  for config in "$@"; do
    n=$((n + 1))
    extra=""
    binary=target/release/ferrite
    bench=target/release/ferrite-bench
    case "$config" in *%%*) bench=${config#*%%} config=${config%%%%*} ;; esac
    case "$config" in *"##"*) binary=${config#*##} config=${config%%##*} ;; esac
    case "$config" in *@@*) extra=${config#*@@} config=${config%%@@*} ;; esac
    printf '%b' "$config" >"$dir/config-$n.toml"
    rm -rf "$dir/data"
    "$binary" serve --config "$dir/config-$n.toml" --listen "127.0.0.1:$port" \
      --metrics off --data-dir "$dir/data" >"$dir/broker-$n.log" 2>&1 &
    broker=$!
    for _ in $(seq 100); do
      (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
      sleep 0.1
    done
    # A run that fails must not be reported with an earlier run's figures.
    rm -f "$dir/result-$n.json"
    steal_before=$(steal_ticks)
    cpu_before=$(cpu_ticks $broker)
    # shellcheck disable=SC2086
    "$bench" $bench_args $extra --brokers "127.0.0.1:$port" --topic t \
      --create --json "$dir/result-$n.json" >"$dir/bench-$n.out" 2>&1 || true
    cpu_after=$(cpu_ticks $broker)
    steal_after=$(steal_ticks)
    kill -TERM $broker && wait $broker || true
    broker=""
    python3 - "$dir/result-$n.json" "$round" "$n" "$cpu_before" "$cpu_after" \
      "$steal_before" "$steal_after" <<'PY'
import json, os, sys
result, rnd, n = sys.argv[1:4]
cpu = (int(sys.argv[5]) - int(sys.argv[4])) / os.sysconf("SC_CLK_TCK")
steal = (int(sys.argv[7]) - int(sys.argv[6])) / os.sysconf("SC_CLK_TCK")
r = json.load(open(result))
mb = r.get("mb_per_sec", 0)
# The broker's CPU covers the whole run, so the warm-up's bytes count too (as in perf/run).
gb = (r.get("bytes", 0) + r.get("warmup_bytes", 0)) / 1e9
lat = r.get("e2e_latency_ms") or r.get("latency_ms") or {}
req = r.get("request_latency_ms") or {}
errors = r.get("errors", 0)
print(f"round {rnd} config {n}: {mb:7.1f} MB/s  broker cpu {cpu:6.2f} s ({cpu / max(gb, 1e-9):5.2f} s/GB)"
      f"  steal {steal:5.2f} s  p50 {lat.get('p50', 0):7.2f}  p99 {lat.get('p99', 0):7.2f}"
      f"  p99.9 {lat.get('p999', 0):7.2f} ms  request p99 {req.get('p99', 0):6.2f} ms"
      f"  errors {errors}", flush=True)
PY
  done
done
