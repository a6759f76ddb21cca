#!/usr/bin/env bash
# What a buffered append costs the kernel, by the size of the page-cache folios it lands in.
#
#   perf/page-cache-appends.sh [DIR] [ROUNDS]      (default target/bench-data, 3 rounds)
#
# A partition's writes are appends of whatever the producers sent: a 100-byte-record batch of
# 128 KiB starts and ends anywhere in a page. ext4 (with large folios, Linux 6.16+) sizes each
# new folio by the write's remaining length and the alignment of its page index, so an
# unaligned 128 KiB write allocates a staircase of small folios (orders 0 to 5), and every
# folio costs an allocation, a page-cache insertion, memory-cgroup accounting, buffer heads and
# its own writeback. This measures the CPU (user + system of the writing process, from
# getrusage) per GB of appends in CHUNK-byte writes, writeback started every 8 MiB as the log
# does (sync_file_range) and blocks reserved ahead (fallocate KEEP_SIZE), in two cases:
# - fresh: the region is not in the page cache; the writes allocate its folios (the log today);
# - large folios: the same region was first written in 2 MiB pieces and synced, so the page
#   cache already holds it in 2 MiB clean folios, and the timed appends only copy into them.
#   The filling is not timed: this is the lower bound a writer could reach if the folios came
#   for free, not a way to get them.
# - populated: a way to get them. The file's size covers the reserved region (fallocate
#   without KEEP_SIZE, as Kafka's `log.preallocate` sizes a segment), and each 2 MiB piece is
#   faulted in through a shared mapping advised MADV_HUGEPAGE: the fault reads the unwritten
#   extent as one zeroed 2 MiB folio, without disk I/O. Timed, faults included.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-target/bench-data}
rounds=${2:-3}
mkdir -p "$dir"
work=$(mktemp -d)
trap 'rm -rf "$work"; rm -f "$dir/page-cache-appends.dat"' EXIT
cat > "$work/appends.c" <<'EOF'
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

static double cpu_seconds(void) {
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return r.ru_utime.tv_sec + r.ru_stime.tv_sec + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

int main(int argc, char **argv) {
    const char *path = argv[1];
    /* 0: fresh region; 1: already in 2 MiB folios (filled untimed); 2: populated (timed) */
    int mode = atoi(argv[2]);
    size_t chunk = strtoul(argv[3], NULL, 10);
    size_t total = strtoul(argv[4], NULL, 10) << 20;
    const size_t piece = 2 << 20;
    unlink(path);
    int fd = open(path, O_CREAT | O_RDWR, 0644);
    if (fd < 0) { perror("open"); return 1; }
    int populate = mode == 2;
    if (fallocate(fd, populate ? 0 : FALLOC_FL_KEEP_SIZE, 0, total + piece)) {
        perror("fallocate");
        return 1;
    }
    char *buf = malloc(piece);
    memset(buf, 'x', piece);
    if (mode == 1) {
        for (size_t at = 0; at < total + piece; at += piece)
            if (pwrite(fd, buf, piece, at) != (ssize_t)piece) { perror("pwrite"); return 1; }
        fdatasync(fd);
    }
    double start = cpu_seconds();
    for (size_t at = 0; populate && at < total + piece; at += piece) {
        char *m = mmap(NULL, piece, PROT_READ, MAP_SHARED, fd, at);
        if (m == MAP_FAILED) { perror("mmap"); return 1; }
        if (madvise(m, piece, MADV_HUGEPAGE)) { perror("madvise"); return 1; }
        volatile char first = m[0];
        (void)first;
        munmap(m, piece);
    }
    size_t at = 0, started = 0;
    while (at < total) {
        if (pwrite(fd, buf, chunk, at) != (ssize_t)chunk) { perror("pwrite"); return 1; }
        at += chunk;
        if (at - started >= (8 << 20)) {
            sync_file_range(fd, started, at - started, SYNC_FILE_RANGE_WRITE);
            started = at;
        }
    }
    double written = cpu_seconds();
    fdatasync(fd);
    printf("%.3f %.3f\n", (written - start) / (total / 1e9), (cpu_seconds() - written) / (total / 1e9));
    close(fd);
    unlink(path);
    return 0;
}
EOF
cc -O2 -o "$work/appends" "$work/appends.c"
echo "# perf/page-cache-appends.sh $dir $rounds ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -r), $(df -T "$dir" | awk 'NR==2 {print $2}'))"
echo "# CPU s/GB of 512 MiB appended (+ the final fdatasync's): fresh region, one already in 2 MiB"
echo "# folios (filling untimed), one populated in 2 MiB folios through MADV_HUGEPAGE (timed)"
for round in $(seq "$rounds"); do
  for chunk in 130999 131072 1048575; do
    fresh=$("$work/appends" "$dir/page-cache-appends.dat" 0 "$chunk" 512)
    large=$("$work/appends" "$dir/page-cache-appends.dat" 1 "$chunk" 512)
    populated=$("$work/appends" "$dir/page-cache-appends.dat" 2 "$chunk" 512)
    printf 'round %d %8d-byte writes: fresh %s (+%s), large folios %s (+%s), populated %s (+%s)\n' \
      "$round" "$chunk" ${fresh% *} ${fresh#* } ${large% *} ${large#* } ${populated% *} ${populated#* }
  done
done
