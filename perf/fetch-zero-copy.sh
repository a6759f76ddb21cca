#!/usr/bin/env bash
# Broker CPU per GB fetched: zero-copy fetch (splice from the page cache) against the copying
# path (`fetch.zero.copy.enable=false`: read into memory, then send), same data, same consumer
# (kcat). Then the cost of down-conversion for old readers, with one consumer that can be both:
# Sarama (Debian's 1.22) set to Kafka 2.2.0 reads v2 batches with Fetch v4 (zero copy), set to
# 0.10.0.0 it reads with Fetch v2, which the broker answers with magic 1 message sets built in
# memory. Last, the same kcat over TLS (an SSL listener beside the plaintext one, certificates
# made here with openssl): this kernel has no kTLS, so every byte is read into memory and
# encrypted by rustls; the row prices that against the zero-copy and copying rows.
#
#   perf/fetch-zero-copy.sh [GIB] [PASSES]      (default 1 GiB, 3 consuming passes)
#
# Fills one partition with GIB of 1 KiB records (kcat), then for each mode restarts the broker
# on the same data, warms the page cache with one pass, and runs PASSES more with kcat reading
# from the beginning to the end, discarding output. The broker's CPU time (user + system, all
# its threads, io_uring workers included) comes from /proc/<pid>/stat before and after.
set -euo pipefail
cd "$(dirname "$0")/.."
gib=${1:-1}
passes=${2:-3}
port=19192
dir=target/perf-zero-copy
bin=target/release/ferrite
cargo build -q --release --bin ferrite
perf/prepare-vm.sh
rm -rf "$dir" && mkdir -p "$dir"

tls_port=$((port + 1))
certs="$dir/certs"
mkdir -p "$certs"
(cd "$certs"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key \
    -out ca.crt -days 2 -subj "/CN=Ferrite perf CA" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout broker.key \
    -out broker.csr -subj "/CN=localhost" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >broker.ext
  openssl x509 -req -in broker.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
    -out broker.crt -extfile broker.ext 2>/dev/null
  cat broker.key broker.crt >broker.pem)
tls_listeners=(--set "listeners=PLAINTEXT://127.0.0.1:$port,SSL://127.0.0.1:$tls_port"
  --set ssl.keystore.type=PEM --set "ssl.keystore.location=$certs/broker.pem")

start() { # extra args; a `listeners` setting among them replaces --listen
  local listen=(--listen 127.0.0.1:$port)
  [[ "$*" == *listeners=* ]] && listen=()
  "$bin" serve "${listen[@]}" --data-dir "$dir/data" "$@" >>"$dir/broker.log" 2>&1 &
  pid=$!
  until kcat -b 127.0.0.1:$port -L >/dev/null 2>&1; do sleep 0.1; done
}
stop() { kill -TERM "$pid"; wait "$pid" || true; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
sarama=target/perf-sarama-client
(cd tests/clients/sarama && GO111MODULE=off GOPATH=/usr/share/gocode GOPROXY=off \
  GOCACHE="$PWD/../../../target/tmp/go/cache" go build -o "../../../$sarama" .)
consume() { # extra kcat args
  kcat -b 127.0.0.1:$port -C -t zc -p 0 -o beginning -e -q -f '' \
    -X fetch.max.bytes=52428800 -X max.partition.fetch.bytes=16777216 "$@" >/dev/null
}
tls_consume() {
  port=$tls_port consume -X security.protocol=ssl -X "ssl.ca.location=$certs/ca.crt"
}

start
python3 - "$gib" >"$dir/records.txt" <<'PY'
import sys
line = ("x" * 1023) + "\n"
for _ in range(int(float(sys.argv[1]) * 1024 * 1024)):
    sys.stdout.write(line)
PY
kcat -b 127.0.0.1:$port -P -t zc -p 0 -X linger.ms=20 -X batch.size=1000000 -X queue.buffering.max.kbytes=1048576 <"$dir/records.txt"
rm -f "$dir/records.txt"
stop
log_bytes=$(du -cb "$dir"/data/zc-0/*.log | tail -1 | cut -f1)
hz=$(getconf CLK_TCK)
echo "partition holds $log_bytes bytes; $passes passes each"
printf '| fetch path | GB sent | broker CPU s | CPU s per GB | wall s |\n|---|---|---|---|---|\n'
records=$(python3 -c "print(int(float('$gib') * 1024 * 1024))")
sarama_consume() { # sarama version
  "$sarama" consume -brokers 127.0.0.1:$port -version "$1" -topic zc -partitions 0 \
    -offset oldest -count "$records" -linger 0s -timeout 1200s >/dev/null
}
for mode in zero-copy copying sarama-fetch-v4 sarama-fetch-v2-down-converted tls; do
  case $mode in
    copying) start --set fetch.zero.copy.enable=false ;;
    tls) start "${tls_listeners[@]}" ;;
    *) start ;;
  esac
  read_once() {
    case $mode in
      sarama-fetch-v4) sarama_consume 2.2.0 ;;
      sarama-fetch-v2-down-converted) sarama_consume 0.10.0.0 ;;
      tls) tls_consume ;;
      *) consume ;;
    esac
  }
  read_once # warm the page cache
  before=$(cpu_ticks); t0=$(date +%s.%N)
  for _ in $(seq "$passes"); do read_once; done
  t1=$(date +%s.%N); after=$(cpu_ticks)
  stop
  python3 - "$mode" "$log_bytes" "$passes" "$before" "$after" "$hz" "$t0" "$t1" <<'PY'
import sys
mode, size, passes, before, after, hz, t0, t1 = sys.argv[1], *map(float, sys.argv[2:])
gb = size * passes / 1e9
cpu = (after - before) / hz
print(f"| {mode} | {gb:.2f} | {cpu:.2f} | {cpu / gb:.3f} | {t1 - t0:.1f} |")
PY
done
