#!/usr/bin/env bash
# Replication's cost, in one run: a single broker (rf=1) beside a three-broker cluster on this
# machine (ZooKeeper from Debian's package, brokers on 127.0.0.1 with their own data
# directories), the same ferrite-bench produce against each.
#
#   perf/cluster.sh [MESSAGES]        (default 300000 records of 1 KiB)
#
# Scenarios: rf=1 acks=1 on the single broker; rf=3 with acks=1 and with acks=all on the
# cluster (min.insync.replicas 2). Prints one line per scenario (MB/s, ack p50/p99). Every
# process it starts is stopped on exit. All brokers and the bench share this machine's cores,
# so the figures are the cost of replication on one host, not of a network.
set -euo pipefail
cd "$(dirname "$0")/.."
messages=${1:-300000}
command -v java >/dev/null || { echo "java is missing (apt-get install zookeeper)" >&2; exit 1; }
[ -f /usr/share/java/zookeeper.jar ] || { echo "apt-get install zookeeper" >&2; exit 1; }
cargo build -q --release -p ferrite -p ferrite-bench
perf/prepare-vm.sh
bin=$PWD/target/release/ferrite
bench=$PWD/target/release/ferrite-bench
work=$PWD/target/perf-cluster
rm -rf "$work" && mkdir -p "$work"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"/*/data "$work/zk/data"
}
trap cleanup EXIT

wait_port() { until (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null; do sleep 0.1; done; }

start_zookeeper() {
  mkdir -p "$work/zk/data"
  cat >"$work/zk/zoo.cfg" <<CFG
tickTime=500
initLimit=10
syncLimit=5
dataDir=$work/zk/data
clientPort=21810
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=*
CFG
  java -Xmx256m -cp /usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$work/zk/zoo.cfg" >"$work/zk/log" 2>&1 &
  pids+=($!)
  wait_port 21810
}

start_broker() { # name port [args...]
  local name=$1 port=$2; shift 2
  mkdir -p "$work/$name"
  "$bin" serve --listen 127.0.0.1:"$port" --data-dir "$work/$name/data" --metrics off "$@" \
    >"$work/$name/log" 2>&1 &
  pids+=($!)
  wait_port "$port"
}

run() { # label brokers bench-args...
  local label=$1 brokers=$2; shift 2
  # Create the topic and let every broker open its replicas before the measured run: records
  # sent before then get UNKNOWN_TOPIC_OR_PARTITION, which ferrite-bench counts, not retries.
  "$bench" produce --brokers "$brokers" --create --messages 1000 --size 1024 "$@" >/dev/null 2>&1 || true
  sleep 2
  "$bench" produce --brokers "$brokers" --create --messages "$messages" --size 1024 \
    --json "$work/$label.json" "$@" >"$work/$label.out" 2>&1 || true
  python3 - "$work/$label.json" "$label" <<'SUMMARY'
import json, sys
r = json.load(open(sys.argv[1]))
lat = r["latency_ms"]
print(f"{sys.argv[2]:<22} {r['mb_per_sec']:8.1f} MB/s  ack p50 {lat['p50']:7.2f} ms  p99 {lat['p99']:8.2f} ms  errors {r['errors']}")
SUMMARY
}

start_broker single 19600
echo "scenario                 throughput      acknowledgement latency"
run "rf1-acks1-single" 127.0.0.1:19600 --topic single --acks 1
kill -TERM "${pids[-1]}"; wait "${pids[-1]}" || true; unset 'pids[-1]'

start_zookeeper
for n in 0 1 2; do
  start_broker "node$n" $((19610 + n)) --zookeeper 127.0.0.1:21810 --node-id "$n" \
    --set min.insync.replicas=2
done
cluster=127.0.0.1:19610,127.0.0.1:19611,127.0.0.1:19612
run "rf3-acks1-cluster" "$cluster" --topic replicated-1 --replication-factor 3 --acks 1
run "rf3-acksall-cluster" "$cluster" --topic replicated-all --replication-factor 3 --acks all
