"""Issue 18's connection figures, driven by perf/connections.sh against a running broker.

    connections.py PORT BROKER_PID CONNECTIONS ACTIVE_SECONDS

1. A measuring client (its own connection) times 1,000 Metadata and 1,000 Produce round trips
   (v1 Metadata for one topic; v3 Produce, acks=1, one 100-byte record) with no other client.
2. CONNECTIONS connections are opened; each sends one ApiVersions and then stays idle. The
   broker's resident memory is read before and after, and the measuring client runs again.
3. For ACTIVE_SECONDS every connection sends one Metadata and one small Produce a second
   (their sends spread evenly over the second), and the measuring client runs meanwhile.

Prints each phase's p50/p99 in milliseconds, the resident memory per idle connection, how
many of the connections' requests were answered, and the CPU the broker and this generator
used in the active phase (the measuring client shares the same cores). Raw requests over plain sockets, one thread
and a selector for all the connections, so the load generator is one process with one core's
worth of CPU at most; the measuring client is a process of its own.
"""

import multiprocessing
import os
import selectors
import socket
import struct
import sys
import time

from kafka.record.default_records import DefaultRecordBatchBuilder

TOPIC = b"conn"
CLIENT = b"perf-conn"


def request(api_key, version, correlation, body):
    header = struct.pack(">hhih", api_key, version, correlation, len(CLIENT)) + CLIENT
    frame = header + body
    return struct.pack(">i", len(frame)) + frame


def metadata_body():
    return struct.pack(">ih", 1, len(TOPIC)) + TOPIC


def produce_body():
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    builder.append(0, int(time.time() * 1000), None, b"v" * 100, [])
    batch = bytes(builder.build())
    return (
        struct.pack(">hhi", -1, 1, 5000)  # no transactional id, acks=1, timeout
        + struct.pack(">ih", 1, len(TOPIC))
        + TOPIC
        + struct.pack(">iii", 1, 0, len(batch))  # one partition: 0
        + batch
    )


def read_exact(sock, n):
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        out += chunk
    return out


def call(sock, frame):
    sock.sendall(frame)
    size = struct.unpack(">i", read_exact(sock, 4))[0]
    return read_exact(sock, size)


def percentile(sorted_values, q):
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def measure(port, rounds=1000):
    """Metadata and Produce round trips of a client of its own: {name: (p50, p99)} in ms."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    out = {}
    for name, api_key, version, body in (
        ("Metadata", 3, 1, metadata_body()),
        ("Produce", 0, 3, produce_body()),
    ):
        times = []
        for i in range(rounds):
            t0 = time.perf_counter()
            call(sock, request(api_key, version, i, body))
            times.append((time.perf_counter() - t0) * 1000)
            time.sleep(0.002)
        times.sort()
        out[name] = (percentile(times, 0.5), percentile(times, 0.99))
    sock.close()
    return out


def measure_into(port, results_queue):
    results_queue.put(measure(port))


def cpu_seconds(pid):
    """The broker's user and system time so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


class Connection:
    def __init__(self, port):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.connect(("127.0.0.1", port))
        self.sock.setblocking(False)
        self.inbox = b""
        self.outbox = b""
        self.answers = 0

    def queue(self, frame):
        self.outbox += frame
        self.flush()

    def flush(self):
        while self.outbox:
            try:
                sent = self.sock.send(self.outbox)
            except BlockingIOError:
                return
            self.outbox = self.outbox[sent:]

    def receive(self):
        try:
            chunk = self.sock.recv(1 << 16)
        except BlockingIOError:
            return
        if not chunk:
            raise ConnectionError("the broker closed a connection")
        self.inbox += chunk
        while len(self.inbox) >= 4:
            size = struct.unpack(">i", self.inbox[:4])[0]
            if len(self.inbox) < 4 + size:
                break
            self.inbox = self.inbox[4 + size :]
            self.answers += 1


def pump(selector, until):
    while time.monotonic() < until:
        for key, _ in selector.select(timeout=max(0.0, min(0.01, until - time.monotonic()))):
            conn = key.data
            conn.receive()
            conn.flush()


def main():
    port, pid, count, active_seconds = (int(a) for a in sys.argv[1:5])
    print(f"connections: {count}, active phase {active_seconds} s")
    alone = measure(port)
    rss_before = rss_kib(pid)
    selector = selectors.DefaultSelector()
    conns = []
    for i in range(count):
        conn = Connection(port)
        selector.register(conn.sock, selectors.EVENT_READ, conn)
        conn.queue(request(18, 0, i, b""))  # ApiVersions v0
        conns.append(conn)
    pump(selector, time.monotonic() + 3)
    greeted = sum(c.answers for c in conns)
    rss_idle = rss_kib(pid)
    idle = measure(port)

    # The measuring client is a process of its own: as a thread of this one it waited for the
    # generator's hold on the interpreter lock, and its round trips counted that wait.
    results_queue = multiprocessing.Queue()
    measuring = multiprocessing.Process(target=measure_into, args=(port, results_queue))
    meta, prod = metadata_body(), produce_body()
    asked_before = sum(c.answers for c in conns)
    start = time.monotonic()
    measuring.start()
    # GENERATOR_NICE=N: the generator yields the cores to the broker and the measuring client
    # (real clients would be on other machines); the measuring client keeps its priority.
    os.nice(int(os.environ.get("GENERATOR_NICE", "0")))
    cpu_before = cpu_seconds(pid)
    generator_before = os.times()
    sent = 0
    for second in range(active_seconds):
        for i, conn in enumerate(conns):
            due = start + second + i / count
            pump(selector, due)
            conn.queue(request(3, 1, 2 * i, meta) + request(0, 3, 2 * i + 1, prod))
            sent += 2
    elapsed = time.monotonic() - start
    broker_cpu = (cpu_seconds(pid) - cpu_before) / elapsed
    generator = os.times()
    generator_cpu = (
        generator.user + generator.system - generator_before.user - generator_before.system
    ) / elapsed
    pump(selector, time.monotonic() + 2)
    results = results_queue.get()
    measuring.join()
    answered = sum(c.answers for c in conns) - asked_before

    print(f"ApiVersions answered: {greeted} of {count}")
    print(
        f"resident: {rss_before / 1024:.1f} MiB before, {rss_idle / 1024:.1f} MiB with "
        f"{count} idle connections: {(rss_idle - rss_before) / count:.1f} KiB per connection"
    )
    for name in ("Metadata", "Produce"):
        a, i, r = alone[name], idle[name], results[name]
        print(
            f"{name} round trip p50/p99 ms: alone {a[0]:.2f}/{a[1]:.2f}, "
            f"beside idle connections {i[0]:.2f}/{i[1]:.2f}, "
            f"beside active ones {r[0]:.2f}/{r[1]:.2f} (p99 {r[1] / a[1]:.1f}x alone)"
        )
    print(
        f"active phase: {answered} of {sent} requests answered; the broker used "
        f"{broker_cpu:.2f} cores, the generator {generator_cpu:.2f}"
    )


if __name__ == "__main__":
    main()
