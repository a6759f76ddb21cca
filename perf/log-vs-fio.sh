#!/usr/bin/env bash
# The partition log's append throughput beside fio's sequential write, measured in the same run,
# in the same directory, with fio's block size equal to the log's batch size and as many
# appends in flight as fio's queue depth.
#
#   perf/log-vs-fio.sh [DIR] [ROUNDS]      (default target/bench-data, 3 rounds)
#
# Each side does the same work:
# - durable: 1 GiB written and made durable by one final fdatasync. The log: 16 appends in
#   flight, then `flush`. fio direct: --direct=1 --ioengine=libaio --iodepth=16 --end_fsync=1.
#   fio buffered: --direct=0 --ioengine=psync --end_fsync=1.
# - direct mode also without the final fdatasync: the log until its last append was
#   acknowledged, fio direct without --end_fsync (O_DIRECT writes into fresh extents leave the
#   extent conversions for that fdatasync to commit, which costs fio 15-35% here).
#
# The disk of a cloud VM changes speed from minute to minute, so each round runs fio and then
# the log right after it for every mode and size, and the table gives the median over rounds of
# each, and of the per-round ratio. Then it times recovery of a 1 GiB partition.
# Goal (issue 2): the log reaches at least 80% of fio's bandwidth in each mode.
set -euo pipefail
cd "$(dirname "$0")/.."
perf/prepare-vm.sh
dir=${1:-target/bench-data}
rounds=${2:-3}
inflight=16
mkdir -p "$dir"
command -v fio >/dev/null || { echo "fio is not installed (apt-get install fio)" >&2; exit 1; }

fio_mb_per_s() { # block size, then fio's I/O options
  local bs=$1; shift
  fio --name=seqwrite --filename="$dir/fio.tmp" --rw=write --bs="$bs" --size=1G "$@" \
      --output-format=json 2>/dev/null |
    python3 -c 'import json,sys; print("%.1f" % (json.load(sys.stdin)["jobs"][0]["write"]["bw_bytes"]/1e6))'
  rm -f "$dir/fio.tmp"
}

cargo bench -q -p ferrite-shards --bench log_append --no-run 2>/dev/null
bench() { cargo bench -q -p ferrite-shards --bench log_append -- --dir "$dir" "$@" 2>/dev/null; }
field() { sed -E "s/.* $1=([0-9.]+).*/\1/" <<<"$2"; }

results="$dir/log-vs-fio.txt"
: >"$results"
for round in $(seq 1 "$rounds"); do
  for mode in buffered direct; do
    for kib in 16 256; do
      if [ "$mode" = direct ]; then
        ref=$(fio_mb_per_s "${kib}k" --direct=1 --ioengine=libaio --iodepth=16 --end_fsync=1)
        ref_nosync=$(fio_mb_per_s "${kib}k" --direct=1 --ioengine=libaio --iodepth=16)
      else
        ref=$(fio_mb_per_s "${kib}k" --direct=0 --ioengine=psync --end_fsync=1)
      fi
      line=$(bench --mode "$mode" --batch-kib "$kib" --inflight "$inflight" --no-recovery | grep '^append')
      batch=$(field batch_bytes "$line")
      echo "round=$round mode=$mode batch_bytes=$batch sync=both log=$(field mb_per_s "$line") fio=$ref" |
        tee -a "$results"
      if [ "$mode" = direct ]; then
        echo "round=$round mode=$mode batch_bytes=$batch sync=neither log=$(field mb_per_s_before_fsync "$line") fio=$ref_nosync" |
          tee -a "$results"
      fi
    done
  done
done

echo
python3 - "$results" <<'SUMMARY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = dict(kv.split("=") for kv in line.split())
    rows.setdefault((f["mode"], int(f["batch_bytes"]), f["sync"]), []).append((float(f["log"]), float(f["fio"])))
print("| mode | batch | final fdatasync | log MB/s (median) | fio MB/s (median) | log / fio (median of rounds) | rounds (log/fio) |")
print("|---|---|---|---|---|---|---|")
for (mode, batch, sync), v in sorted(rows.items()):
    med = statistics.median
    ratio = med([l / f for l, f in v])
    print(f"| {mode} | {batch} B | {sync} | {med([l for l, _ in v]):.1f} | {med([f for _, f in v]):.1f} | "
          f"{ratio:.0%} | " + ", ".join(f"{l:.0f}/{f:.0f}" for l, f in v) + " |")
SUMMARY
echo
bench --mode buffered --batch-kib 256 --inflight "$inflight" --gib 0 | grep -v '^append' || true
