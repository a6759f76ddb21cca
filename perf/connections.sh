#!/usr/bin/env bash
# Issue 18's connection figures on one broker with default settings: CONNECTIONS client
# connections (default: as many as the broker accepts under this machine's open file limit,
# less a few), idle and then each sending one Metadata and one small Produce a second, beside
# a separate measuring client. Prints the broker's resident memory per idle connection and the
# measuring client's round trips alone, beside the idle connections and beside the active ones
# (perf/connections.py). Run with the release binary and nothing else busy.
#
# MAX_CONNECTIONS=N sets the broker's max.connections (unset, it takes a quarter of the open
# file limit; set, up to three quarters).
#
# FERRITE_BIN=PATH runs another broker binary (to compare builds).
#
#   MAX_CONNECTIONS=10010 perf/connections.sh 10000     # 10,000 under this machine's 20,000
#   perf/connections.sh [CONNECTIONS] [ACTIVE_SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
perf/prepare-vm.sh
bin=${FERRITE_BIN:-target/release/ferrite}
[ -x "$bin" ] || { echo "build it first: cargo build --release -p ferrite" >&2; exit 1; }
[ -x .venv/bin/python ] || { echo "run scripts/test once first: it makes .venv with kafka-python" >&2; exit 1; }
work=$(mktemp -d)
# The broker is waited for before its data goes: one still shutting down writes into the
# directory while it is removed, which leaves it behind (12 GB after a scale run).
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
port=19695
extra=()
[ -z "${MAX_CONNECTIONS:-}" ] || extra=(--set "max.connections=$MAX_CONNECTIONS")
"$bin" serve --listen 127.0.0.1:$port --data-dir "$work/data" --metrics off "${extra[@]}" 2>"$work/broker.log" &
pid=$!
until (echo > /dev/tcp/127.0.0.1/$port) 2>/dev/null; do
  kill -0 $pid 2>/dev/null || { tail "$work/broker.log" >&2; exit 1; }
  sleep 0.01
done
# The broker's connection bound, from its start-up line (max_connections=N).
allowed=$(grep -o 'max_connections=[0-9]*' "$work/broker.log" | head -1 | cut -d= -f2)
connections=${1:-$((allowed - 10))}
echo "# perf/connections.sh $connections ($(date -u +%FT%TZ), $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo "open file limit (ulimit -n) $(ulimit -n): the broker accepts at most $allowed connections"
kcat -b 127.0.0.1:$port -P -t conn <<<"first" 2>/dev/null
# The client side holds one descriptor per connection too.
ulimit -n "$(ulimit -Hn)"
.venv/bin/python perf/connections.py "$port" "$pid" "$connections" "${2:-10}"
grep -c "connection refused\|too many" "$work/broker.log" | sed 's/^/broker log lines about refused connections: /' || true
