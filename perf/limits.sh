#!/usr/bin/env bash
# This machine's limits, measured now: sequential disk write in the data directory (fio, O_DIRECT
# and buffered with a final fsync), loopback TCP (iperf3, one and two streams) and memory copy
# bandwidth (perf bench mem memcpy). Prints one JSON object.
#
#   perf/limits.sh [DATA_DIR]       (default target/perf-data)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-target/perf-data}
mkdir -p "$dir"
for tool in fio iperf3; do
  command -v "$tool" >/dev/null || { echo "$tool is not installed (apt-get install $tool)" >&2; exit 1; }
done

fio_mb_per_s() {
  fio --name=seqwrite --filename="$dir/fio.tmp" --rw=write --bs=1M --size=1G "$@" --output-format=json 2>/dev/null |
    python3 -c 'import json,sys; print("%.1f" % (json.load(sys.stdin)["jobs"][0]["write"]["bw_bytes"]/1e6))'
  rm -f "$dir/fio.tmp"
}
direct=$(fio_mb_per_s --direct=1 --ioengine=libaio --iodepth=16)
buffered=$(fio_mb_per_s --direct=0 --ioengine=psync --end_fsync=1)

iperf3 -s -B 127.0.0.1 -p 15201 -1 >/dev/null 2>&1 &
sleep 0.5
one=$(iperf3 -c 127.0.0.1 -p 15201 -t 5 -J | python3 -c 'import json,sys; print("%.2f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e9))')
iperf3 -s -B 127.0.0.1 -p 15201 -1 >/dev/null 2>&1 &
sleep 0.5
two=$(iperf3 -c 127.0.0.1 -p 15201 -t 5 -P 2 -J | python3 -c 'import json,sys; print("%.2f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e9))')

memcpy="null"
if command -v perf >/dev/null && out=$(perf bench mem memcpy --size 1GB 2>/dev/null); then
  memcpy=$(echo "$out" | awk '/GB\/sec/ {print $1; exit}')
fi

cat <<JSON
{"disk_direct_mb_per_sec": $direct, "disk_buffered_fsync_mb_per_sec": $buffered,
 "loopback_gbit_one_stream": $one, "loopback_gbit_two_streams": $two,
 "memcpy_gb_per_sec": ${memcpy:-null}, "measured_at": "$(date -u +%FT%TZ)"}
JSON
