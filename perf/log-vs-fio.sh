#!/usr/bin/env bash
# The partition log's append throughput beside fio's sequential write, measured in the same run,
# in the same directory, with fio's block size equal to the log's batch size.
#
#   perf/log-vs-fio.sh [DIR]          (default target/bench-data)
#
# fio direct:   --direct=1 --ioengine=libaio --iodepth=16   (O_DIRECT, as the direct mode)
# fio buffered: --direct=0 --ioengine=psync --end_fsync=1  (page cache + final fsync, as the
#               buffered mode, whose run also ends with an fdatasync)
# Goal (issue 2): the log reaches at least 80% of fio's bandwidth in each mode.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-target/bench-data}
mkdir -p "$dir"
command -v fio >/dev/null || { echo "fio is not installed (apt-get install fio)" >&2; exit 1; }

fio_mb_per_s() { # block size, then fio's I/O options
  local bs=$1; shift
  fio --name=seqwrite --filename="$dir/fio.tmp" --rw=write --bs="$bs" --size=1G "$@" \
      --output-format=json 2>/dev/null |
    python3 -c 'import json,sys; print("%.1f" % (json.load(sys.stdin)["jobs"][0]["write"]["bw_bytes"]/1e6))'
  rm -f "$dir/fio.tmp"
}

declare -A fio
for bs in 16k 256k; do
  fio[direct-$bs]=$(fio_mb_per_s "$bs" --direct=1 --ioengine=libaio --iodepth=16)
  fio[buffered-$bs]=$(fio_mb_per_s "$bs" --direct=0 --ioengine=psync --end_fsync=1)
done

bench_out=$(cargo bench -q -p ferrite-shards --bench log_append -- --dir "$dir" 2>/dev/null)
echo "$bench_out"
echo
printf '| mode | batch | log MB/s | fio MB/s (bs) | log / fio |\n|---|---|---|---|---|\n'
while read -r line; do
  case "$line" in append*) ;; *) continue ;; esac
  mode=$(sed -E 's/.*mode=([a-z]+).*/\1/' <<<"$line")
  batch=$(sed -E 's/.*batch_bytes=([0-9]+).*/\1/' <<<"$line")
  rate=$(sed -E 's/.*mb_per_s=([0-9.]+).*/\1/' <<<"$line")
  if [ "$batch" -lt 100000 ]; then bs=16k; else bs=256k; fi
  ref=${fio[$mode-$bs]}
  ratio=$(python3 -c "print('%.0f%%' % (100*$rate/$ref))")
  printf '| %s | %s B | %s | %s (%s) | %s |\n' "$mode" "$batch" "$rate" "$ref" "$bs" "$ratio"
done <<<"$bench_out"
