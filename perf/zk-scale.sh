#!/usr/bin/env bash
# Issue 18's ZooKeeper-mode figures: three brokers on this machine (one shard each, ZooKeeper
# from Debian's package), TOPICS topics of PARTITIONS partitions at replication factor 3
# (default 100 × 100 = 10,000 partitions, 30,000 replicas). Prints:
#   - the time until every partition has its state and a leader, and leaders per broker;
#   - ZooKeeper requests per second from the three brokers while idle (the server's own count:
#     a control thread that re-read the tree would cost tens of thousands a second);
#   - after kill -9 of the controller: the time until every partition is led by a live broker
#     again, from the kill and from the dead broker's session expiry (the soonest anyone can
#     know), and the new controller;
#   - the killed broker back: the time until every ISR is whole again (ISR expansions);
#   - a follower paused past replica.lag.time.max.ms: the time until every partition it
#     follows has it out of the ISR (ISR shrinks, counted), then back in after it resumes.
# Times are read from a surviving broker's Metadata (kcat -L -J), polled every 200 ms, so
# they are what a client sees. Sessions time out after SESSION_MS (10 s here; Kafka's default
# is 18 s) and replicas leave the ISR after LAG_MS (3 s; Kafka's 30 s). Every process it
# starts is stopped on exit. Run with the release binaries and nothing else busy.
#
#   perf/zk-scale.sh [TOPICS] [PARTITIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
perf/prepare-vm.sh
topics=${1:-100}
per_topic=${2:-100}
total=$((topics * per_topic))
session_ms=${SESSION_MS:-10000}
lag_ms=${LAG_MS:-3000}
command -v java >/dev/null || { echo "java is missing (apt-get install zookeeper)" >&2; exit 1; }
[ -f /usr/share/java/zookeeper.jar ] || { echo "apt-get install zookeeper" >&2; exit 1; }
command -v kcat >/dev/null || { echo "apt-get install kcat" >&2; exit 1; }
bin=$PWD/target/release/ferrite
[ -x "$bin" ] || { echo "build it first: cargo build --release -p ferrite" >&2; exit 1; }
work=$(mktemp -d)
zk_port=21830
declare -A pid
cleanup() {
  for p in "${pid[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  # KEEP_LOGS=DIR keeps the brokers' and ZooKeeper's logs.
  if [ -n "${KEEP_LOGS:-}" ]; then
    mkdir -p "$KEEP_LOGS"
    for n in 1 2 3; do cp "$work/b$n/log" "$KEEP_LOGS/broker-$n.log" 2>/dev/null || true; done
    cp "$work/zk/log" "$KEEP_LOGS/zookeeper.log" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

wait_port() { until (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null; do sleep 0.05; done; }
now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc; }
port_of() { echo $((19720 + $1)); }
# four WORD: ZooKeeper's answer to a four-letter word (bash's /dev/tcp: no netcat needed).
four() { (exec 3<>/dev/tcp/127.0.0.1/$zk_port && printf %s "$1" >&3 && cat <&3) 2>/dev/null || true; }
zk_requests() { four srvr | awk '/^Received:/{print $2}'; }

mkdir -p "$work/zk/data"
cat >"$work/zk/zoo.cfg" <<CFG
tickTime=1000
initLimit=10
syncLimit=5
dataDir=$work/zk/data
clientPort=$zk_port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=*
CFG
java -Xmx1g -cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar \
  org.apache.zookeeper.server.quorum.QuorumPeerMain "$work/zk/zoo.cfg" >"$work/zk/log" 2>&1 &
pid[zk]=$!
until [ "$(four ruok)" = imok ]; do sleep 0.1; done

start_broker() { # node
  local n=$1
  mkdir -p "$work/b$n"
  "$bin" serve --listen 127.0.0.1:"$(port_of "$n")" --data-dir "$work/b$n/data" --metrics off \
    --cores 1 --zookeeper 127.0.0.1:$zk_port --node-id "$n" \
    --set num.partitions="$per_topic" --set default.replication.factor=3 \
    --set topic.partitions.per.shard=$((total + 1000)) \
    --set zookeeper.session.timeout.ms=$session_ms --set replica.lag.time.max.ms=$lag_ms \
    2>>"$work/b$n/log" &
  pid[$n]=$!
  wait_port "$(port_of "$n")"
}

# state NODE: one line from NODE's Metadata for the scale topics:
# "partitions led_by_live without_leader isr_short controller leaders_per_broker".
# DEAD names a broker whose leadership does not count as led; SHORT names the replica whose
# absence from an ISR counts as short (any absence when empty).
state() {
  kcat -b 127.0.0.1:"$(port_of "$1")" -L -J -m 30 2>/dev/null | python3 -c '
import json, sys
dead = int(sys.argv[1]) if sys.argv[1] else None
md = json.load(sys.stdin)
parts = led = leaderless = short = 0
per = {}
for t in md["topics"]:
    if not t["topic"].startswith("zs"):
        continue
    for p in t["partitions"]:
        parts += 1
        leader = p["leader"]
        if leader < 0:
            leaderless += 1
        elif leader != dead:
            led += 1
        per[leader] = per.get(leader, 0) + 1
        if len(p["isrs"]) < len(p["replicas"]):
            short += 1
print(parts, led, leaderless, short, md.get("controllerid", -1),
      ",".join(f"{b}:{n}" for b, n in sorted(per.items())))
' "${DEAD:-}" || echo "0 0 0 0 -1 -"
}

# until_state NODE LIMIT_S PYTHON_CONDITION: polls `state` every 200 ms until the condition
# on (parts, led, leaderless, short) holds; prints the seconds it took, or "not within".
until_state() {
  local node=$1 limit=$2 cond=$3 t0 line
  t0=$(now)
  while true; do
    line=$(state "$node")
    if python3 -c "parts, led, leaderless, short = map(int, '$line'.split()[:4]); exit(0 if ($cond) else 1)"; then
      echo "$line" >"$work/last_state"
      since "$t0"
      return
    fi
    if [ "$(echo "$(since "$t0") > $limit" | bc)" = 1 ]; then
      echo "$line" >"$work/last_state"
      echo "not within $limit"
      return
    fi
    sleep 0.2
  done
}

echo "# perf/zk-scale.sh $topics $per_topic ($(date -u +%FT%TZ), $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo "three brokers of one shard each, ZooKeeper 3.8 standalone; $total partitions, replication factor 3"
for n in 1 2 3; do start_broker "$n"; done

t0=$(now)
for i in $(seq 1 "$topics"); do kcat -b 127.0.0.1:"$(port_of 1)" -L -t "zs$i" >/dev/null 2>&1; done
asked=$(since "$t0")
took=$(until_state 2 300 "parts == $total and led == $total and short == 0")
printf 'created: asked in %.1f s; every partition led with its ISR whole %.2f s after the first ask\n' \
  "$asked" "$(echo "$asked + ${took/not within*/0}" | bc)"
[ "${took#not}" = "$took" ] || echo "  (not complete: $took s; last state $(cat "$work/last_state"))"
read -r _ _ _ _ controller balance <"$work/last_state"
echo "leaders per broker: $balance; controller: broker $controller"
for n in 1 2 3; do
  printf 'broker %s: resident %.0f MiB\n' "$n" "$(echo "$(awk '/VmRSS/{print $2}' /proc/"${pid[$n]}"/status)/1024" | bc -l)"
done

sleep 2
r0=$(zk_requests); sleep 10; r1=$(zk_requests)
echo "idle: ZooKeeper received $(( (r1 - r0) / 10 )) requests a second from the three brokers (and this script's 4-letter words)"

# The controller dies.
survivor=$(( controller % 3 + 1 ))
t0=$(now)
kill -9 "${pid[$controller]}"; wait "${pid[$controller]}" 2>/dev/null || true
took=$(DEAD=$controller until_state "$survivor" 60 "led == $total")
read -r _ _ _ _ new_controller balance <"$work/last_state"
if [ "${took#not}" = "$took" ]; then
  printf 'kill -9 of the controller (broker %s): every partition led by a live broker %.2f s after the kill, %.2f s after its session expired (%s ms)\n' \
    "$controller" "$took" "$(echo "$took - $session_ms / 1000" | bc -l)" "$session_ms"
else
  echo "kill -9 of the controller (broker $controller): $took s; last state $(cat "$work/last_state")"
fi
echo "  new controller: broker $new_controller; leaders per broker: $balance"

# It comes back: every ISR it belongs to grows again.
t0=$(now)
start_broker "$controller"
listening=$(since "$t0")
took=$(until_state "$survivor" 120 "short == 0")
printf 'broker %s back: listening in %.2f s, every ISR whole %s s after that\n' "$controller" "$listening" "$(printf %.2f "${took/not within*/-1}")"

# A follower stops answering: the leaders shrink every ISR it is in once it lags LAG_MS.
paused=$(( survivor % 3 + 1 ))
[ "$paused" != "$new_controller" ] || paused=$(( paused % 3 + 1 ))
[ "$paused" != "$survivor" ] || paused=$(( paused % 3 + 1 ))
expected=$(kcat -b 127.0.0.1:"$(port_of "$survivor")" -L -J 2>/dev/null | python3 -c '
import json, sys
b = int(sys.argv[1])
md = json.load(sys.stdin)
print(sum(1 for t in md["topics"] if t["topic"].startswith("zs")
          for p in t["partitions"]
          if p["leader"] != b and b in [r["id"] for r in p["replicas"]]))' "$paused")
t0=$(now)
kill -STOP "${pid[$paused]}"
took=$(until_state "$survivor" 30 "short >= $expected")
printf 'broker %s paused: %s partitions it follows out of their ISR %s s after the pause (%.2f s after replica.lag.time.max.ms)\n' \
  "$paused" "$expected" "$(printf %.2f "${took/not within*/-1}")" "$(echo "${took/not within*/0} - $lag_ms / 1000" | bc -l)"
kill -CONT "${pid[$paused]}"
took=$(until_state "$survivor" 60 "short == 0")
printf 'broker %s resumed: every ISR whole again %s s after it resumed\n' "$paused" "$(printf %.2f "${took/not within*/-1}")"
