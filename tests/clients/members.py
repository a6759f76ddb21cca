"""Runs group_member.py processes and follows what each reports."""
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _die_with_parent():
    # PR_SET_PDEATHSIG: a member never outlives the test that started it.
    ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)


class Members:
    def __init__(self, bootstrap, topic):
        self.bootstrap, self.topic = bootstrap, topic
        self.lock = threading.Lock()
        self.procs = {}
        self.assigned = {}  # name -> set of partitions it holds now
        self.records = []  # (name, partition, offset, value) in arrival order
        self.closed = set()
        self.log = []

    def start(self, name, group, instance=None):
        args = [sys.executable, os.path.join(HERE, "group_member.py"), self.bootstrap, group, self.topic, name]
        if instance:
            args.append(instance)
        p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             preexec_fn=_die_with_parent)
        self.procs[name] = p
        with self.lock:
            self.assigned[name] = set()
        threading.Thread(target=self._follow, args=(name, p), daemon=True).start()

    def _follow(self, name, p):
        for line in p.stdout:
            parts = line.split()
            with self.lock:
                self.log.append(line.rstrip())
                if parts[0] == "ASSIGNED":
                    self.assigned[name] = {int(x) for x in parts[2].split(",")} if len(parts) > 2 else set()
                elif parts[0] == "REVOKED":
                    self.assigned[name] = set()
                elif parts[0] == "REC":
                    self.records.append((name, int(parts[2]), int(parts[3]), parts[4]))
                elif parts[0] == "CLOSED":
                    self.closed.add(name)
        with self.lock:
            self.assigned[name] = set()

    def close(self, name):
        p = self.procs[name]
        p.stdin.write("close\n")
        p.stdin.flush()
        p.wait(timeout=30)

    def kill(self, name):
        self.procs[name].kill()
        self.procs[name].wait(timeout=10)

    def stop_all(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()

    def snapshot(self):
        with self.lock:
            return {n: set(a) for n, a in self.assigned.items()}, list(self.records)

    def wait_until(self, what, check, timeout=45):
        deadline = time.time() + timeout
        while time.time() < deadline:
            assigned, records = self.snapshot()
            if check(assigned, records):
                return
            time.sleep(0.1)
        assigned, records = self.snapshot()
        raise AssertionError(f"timed out waiting for {what}: assigned={assigned}, records={len(records)}\n"
                             + "\n".join(self.log[-40:]))

    def wait_split(self, names, partitions, timeout=45):
        """Until `names` each hold some partitions, disjoint, covering all of them."""
        def check(assigned, _):
            held = [assigned.get(n, set()) for n in names]
            together = set().union(*held)
            return all(held) and together == set(range(partitions)) and sum(map(len, held)) == partitions
        self.wait_until(f"{names} to split {partitions} partitions", check, timeout)
        return {n: a for n, a in self.snapshot()[0].items() if n in names}
