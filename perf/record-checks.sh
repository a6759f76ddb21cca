#!/usr/bin/env bash
# What checking every record of a produced batch costs (Kafka's LogValidator walk, which
# Ferrite does on every produce), beside the CRC pass each append already made; and what the
# old message formats' conversions cost. Figures from shards/benches/record_checks.rs, kept in
# perf/results/record-checks/<date>.txt.
#
#   perf/record-checks.sh [MIB]      (MiB of batches per row, default 64)
set -euo pipefail
cd "$(dirname "$0")/.."
mib=${1:-64}
out=perf/results/record-checks/$(date -u +%F).txt
mkdir -p "$(dirname "$out")"
{
  echo "# perf/record-checks.sh $mib, $(date -u +%FT%TZ), $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  cargo bench -q -p ferrite-shards --bench record_checks -- --mib "$mib" 2>/dev/null
} | tee "$out"
