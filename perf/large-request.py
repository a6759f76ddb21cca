#!/usr/bin/env python3
"""The broker's CPU for reading one large request that arrives in small pieces.

Sends a 64 MiB frame (zeros: the broker reads it whole, then refuses it as a request) in
16 KiB writes with a pause after each, so that each of the broker's reads finds one piece, and
prints the wall time and the broker process's CPU (utime + stime from /proc) over it.

    perf/large-request.py PORT BROKER_PID
"""
import socket
import struct
import sys
import time

FRAME_BYTES = 64 << 20
PIECE_BYTES = 16 << 10


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100


def main():
    port, pid = int(sys.argv[1]), int(sys.argv[2])
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    cpu_before, started = cpu_seconds(pid), time.time()
    s.sendall(struct.pack(">i", FRAME_BYTES))
    piece = b"\0" * PIECE_BYTES
    for _ in range(FRAME_BYTES // PIECE_BYTES):
        s.sendall(piece)
        time.sleep(0.0002)
    # The broker answers or closes once it has read the frame.
    s.settimeout(30)
    try:
        s.recv(100)
    except OSError:
        pass
    print(f"{FRAME_BYTES >> 20} MiB frame in {PIECE_BYTES >> 10} KiB writes: "
          f"{time.time() - started:.1f} s, broker CPU {cpu_seconds(pid) - cpu_before:.2f} s")


if __name__ == "__main__":
    main()
