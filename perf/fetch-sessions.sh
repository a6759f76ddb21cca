#!/usr/bin/env bash
# Fetch sessions' worth (KIP-227) on a wide topic: see perf/fetch-sessions.py.
#
#   perf/fetch-sessions.sh [PARTITIONS] [SECONDS] [RATE]    (default 1000, 10, 2000)
#
# Uses the test venv's kafka-python (.venv, made by scripts/test; made here if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
partitions=${1:-1000}
seconds=${2:-10}
rate=${3:-2000}
port=19292
metrics_port=19293
dir=target/perf-fetch-sessions
cargo build -q --release -p ferrite -p ferrite-bench
perf/prepare-vm.sh
if ! .venv/bin/python -c 'import kafka' 2>/dev/null; then
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check kafka-python==3.0.12
fi
rm -rf "$dir" && mkdir -p "$dir"
target/release/ferrite serve --listen "127.0.0.1:$port" --metrics "127.0.0.1:$metrics_port" \
  --data-dir "$dir/data" >"$dir/broker.log" 2>&1 &
broker=$!
trap 'kill $broker 2>/dev/null; wait $broker 2>/dev/null' EXIT
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done
.venv/bin/python perf/fetch-sessions.py "127.0.0.1:$port" "127.0.0.1:$metrics_port" "$broker" \
  wide "$partitions" "$seconds" "$rate" target/release/ferrite-bench
