#!/usr/bin/env bash
# Readies a virtual machine for measurement: stops the balloon handing freed memory back to
# the host, and has the host back all available memory once. On hardware, or where the kernel
# has no free page reporting, it only says so.
#
# Why: on the reference VM the virtio balloon reports free memory to the host (free page
# reporting), so the page cache a run frees (its data directory deleted) goes back to the host,
# and the next run's page-cache writes fault every page in on the host again. Buffered produce
# of 1 KiB records to one partition measured 329-432 MB/s at 1.34-2.07 s of broker CPU per GB
# that way, and 783-785 MB/s at 0.64-0.65 s/GB after this script (same build, same commands:
# perf/results/vm/2026-12-06.txt). The figures of earlier notes vary with it.
#
#   perf/prepare-vm.sh      (root; perf/run and perf/ab.sh call it; touches memory once a boot)
set -euo pipefail
params=/sys/module/page_reporting/parameters
marker=/run/ferrite-perf-vm-prepared
if [ ! -w "$params/page_reporting_order" ]; then
  if [ -e "$params/page_reporting_order" ]; then
    echo "prepare-vm: free page reporting is on and cannot be changed here (not root); figures may vary" >&2
  else
    echo "prepare-vm: no free page reporting on this kernel; nothing to do" >&2
  fi
  exit 0
fi
# The buddy allocator's largest order is 10 on x86-64: at 11 no free block qualifies.
was=$(cat "$params/page_reporting_order")
echo 11 >"$params/page_reporting_order"
if [ -e "$marker" ]; then
  echo "prepare-vm: free page reporting off (order $was -> 11); memory already touched this boot" >&2
  exit 0
fi
python3 - <<'PY'
import mmap, sys
available = next(int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemAvailable")) * 1024
# Leave room for what else runs (a build, the broker about to start).
size = max(available - (4 << 30), 0)
if size:
    m = mmap.mmap(-1, size)
    for off in range(0, size, 4096):
        m[off] = 1
    m.close()
print(f"prepare-vm: touched {size >> 30} GiB once so the host backs it", file=sys.stderr)
PY
touch "$marker"
echo "prepare-vm: free page reporting off (order $was -> 11)" >&2
