#!/usr/bin/env python3
"""Runs the perf scenarios against Ferrite and a peer broker, beside this machine's limits.

    perf/run [--scenarios a,b] [--no-peer] [--out DIR]

For each scenario (perf/scenarios/*.json) and broker: start the broker fresh, run the
scenario's preparation steps, then the measured ferrite-bench run, and keep its JSON. The peer
is Tansu (memory storage) from .cache/tansu/bin/tansu when it has been built (perf/build-peer);
without it the table says so. The machine's limits (perf/limits.sh) are measured in the same
run. Output in DIR (default perf/results/latest): one JSON per run, limits.json, results.md
(the table) and PNG plots (throughput over time, latency percentile curves).
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FERRITE = ROOT / "target/release/ferrite"
BENCH = ROOT / "target/release/ferrite-bench"
TANSU = ROOT / ".cache/tansu/bin/tansu"
DATA = ROOT / "target/perf-data"
FERRITE_PORT = 19400
TANSU_PORT = 19401


def log(msg):
    print(msg, flush=True)


def wait_port(port, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port} after {timeout}s")


class Broker:
    def __init__(self, kind, settings, out_dir):
        self.kind = kind
        self.port = FERRITE_PORT if kind == "ferrite" else TANSU_PORT
        self.settings = settings
        self.log_path = out_dir / f"{kind}-broker.log"
        self.proc = None

    def start(self, fresh=True):
        logf = open(self.log_path, "a")
        if self.kind == "ferrite":
            data = DATA / "ferrite"
            if fresh:
                subprocess.run(["rm", "-rf", str(data)], check=True)
            cmd = [str(FERRITE), "serve", "--listen", f"127.0.0.1:{self.port}", "--data-dir", str(data)]
            for s in self.settings:
                cmd += ["--set", s]
        else:
            url = f"tcp://127.0.0.1:{self.port}"
            cmd = [str(TANSU), "broker", "--storage-engine", "memory://tansu/",
                   "--listener-url", url, "--advertised-listener-url", url]
        self.proc = subprocess.Popen(cmd, stdout=logf, stderr=logf, cwd=ROOT)
        wait_port(self.port)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def cpu_seconds(self):
        """User + system CPU of the broker process so far (all its threads)."""
        try:
            fields = open(f"/proc/{self.proc.pid}/stat").read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, AttributeError):
            return None


def bench(mode, topic, port, args, json_path, timeout=600):
    cmd = [str(BENCH), mode, "--brokers", f"127.0.0.1:{port}", "--topic", topic, *args]
    if mode != "consume":
        cmd.append("--create")
    if json_path:
        cmd += ["--json", str(json_path)]
    log("  $ " + " ".join(cmd[1:]))
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if out.stdout.strip():
        log("    " + out.stdout.strip().splitlines()[-1])
    if out.returncode not in (0, 1):
        raise RuntimeError(f"ferrite-bench failed: {out.stderr.strip()}")
    return json.loads(Path(json_path).read_text()) if json_path else None


def steal_seconds():
    """CPU time the hypervisor gave to others so far, summed over every CPU (/proc/stat).

    On a shared virtual machine a burst of steal shows as a latency tail no broker change
    explains, so every run records what it suffered."""
    try:
        fields = open("/proc/stat").readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def drop_page_cache():
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def run_scenario(sc, kind, out_dir, results):
    name = sc["name"]
    broker = Broker(kind, sc.get("broker_settings", []), out_dir)
    topic = f"perf-{name}"
    args = list(sc["measure"]["args"])
    if "rate_from" in sc:
        ref = results.get((sc["rate_from"]["scenario"], kind))
        if not ref:
            log(f"  skipped: needs {sc['rate_from']['scenario']} first")
            return None
        rate = ref["msgs_per_sec"] * sc["rate_from"]["fraction"]
        args += ["--rate", f"{rate:.0f}"]
    try:
        broker.start()
        for i, step in enumerate(sc.get("prepare", [])):
            bench(step["mode"], topic, broker.port, step["args"], out_dir / f"{name}-{kind}-prepare{i}.json")
        cold = False
        if sc.get("cold"):
            if kind == "ferrite":
                broker.stop()
                cold = drop_page_cache()
                broker.start(fresh=False)
            else:
                cold = None  # memory storage: nothing to read from disk
        cpu_before, steal_before = broker.cpu_seconds(), steal_seconds()
        result = bench(sc["measure"]["mode"], topic, broker.port, args, out_dir / f"{name}-{kind}.json")
        cpu_after, steal_after = broker.cpu_seconds(), steal_seconds()
        if cpu_before is not None and cpu_after is not None:
            result["broker_cpu_seconds"] = cpu_after - cpu_before
        if steal_before is not None and steal_after is not None:
            result["steal_seconds"] = round(steal_after - steal_before, 2)
        result["cold_cache"] = cold
        (out_dir / f"{name}-{kind}.json").write_text(json.dumps(result, indent=2))
        return result
    except Exception as e:  # a broker that fails a scenario is reported, the run goes on
        log(f"  {kind} failed {name}: {e}")
        return {"failed": str(e)}
    finally:
        broker.stop()


def figure(result, which):
    if not result or "failed" in result:
        return None
    if which == "e2e_p99_ms":
        return result.get("e2e_latency_ms", {}).get("p99")
    return result.get(which)


def cpu_per_gb(result):
    """Broker CPU seconds (user + system, io_uring workers included) per GB the bench moved.

    The CPU is taken over the whole bench run, so the warm-up's bytes count too."""
    if not result or "failed" in result:
        return None
    cpu = result.get("broker_cpu_seconds")
    moved = result.get("bytes", 0) + result.get("warmup_bytes", 0)
    if cpu is None or not moved:
        return None
    return cpu / (moved / 1e9)


def limit_for(kind, limits):
    loopback_mb = limits["loopback_gbit_one_stream"] * 1e9 / 8 / 1e6
    disk = limits["disk_buffered_fsync_mb_per_sec"]
    if kind == "produce":
        return min(disk, loopback_mb), "min(disk, loopback)"
    if kind == "consume":
        return loopback_mb, "loopback"
    return None, ""


def table(scenarios, results, limits, peer):
    lines = [
        f"Measured {limits['measured_at']} on this machine: disk {limits['disk_buffered_fsync_mb_per_sec']} MB/s buffered+fsync, "
        f"{limits['disk_direct_mb_per_sec']} MB/s O_DIRECT; loopback {limits['loopback_gbit_one_stream']} Gbit/s "
        f"({limits['loopback_gbit_one_stream'] * 125:.0f} MB/s) one stream; memcpy {limits['memcpy_gb_per_sec']} GB/s.",
        "",
        "| scenario | figure | Ferrite | limit | Ferrite / limit | peer (Tansu) | Ferrite / peer | Ferrite p99 ack/e2e ms "
        "| broker CPU s/GB Ferrite | peer | Ferrite / peer CPU | steal s Ferrite / peer |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for sc in scenarios:
        f = results.get((sc["name"], "ferrite"))
        p = results.get((sc["name"], "tansu"))
        fv, pv = figure(f, sc["figure"]), figure(p, sc["figure"])
        lim, lim_name = limit_for(sc["limit"], limits)
        unit = "ms" if sc["figure"].endswith("_ms") else "MB/s"
        fmt = lambda v: "—" if v is None else f"{v:.2f} {unit}" if unit == "ms" else f"{v:.1f} {unit}"
        ratio_lim = f"{fv / lim:.0%}" if fv is not None and lim else "—"
        if not peer:
            peer_cell, ratio_peer = "absent", "—"
        elif p and "failed" in p:
            peer_cell, ratio_peer = "failed", "—"
        else:
            peer_cell = fmt(pv)
            if fv is not None and pv:
                ratio_peer = f"{pv / fv:.2f}× lower" if unit == "ms" else f"{fv / pv:.2f}×"
            else:
                ratio_peer = "—"
        lat = "—"
        if f and "failed" not in f:
            a = f.get("latency_ms", {}).get("p99")
            e = f.get("e2e_latency_ms", {}).get("p99")
            lat = " / ".join("—" if v is None else f"{v:.2f}" for v in (a, e))
        name = sc["name"] + (" (cold)" if f and f.get("cold_cache") else "")
        figure_name = "e2e p99" if sc["figure"] == "e2e_p99_ms" else "MB/s"
        lim_cell = f"{lim:.0f} MB/s ({lim_name})" if lim else "—"
        fc, pc = cpu_per_gb(f), cpu_per_gb(p) if peer else None
        cpu_cells = " | ".join("—" if v is None else f"{v:.2f}" for v in (fc, pc))
        cpu_ratio = f"{fc / pc:.2f}×" if fc is not None and pc else "—"
        steal = lambda r: r.get("steal_seconds") if r and "failed" not in r else None
        steal_cell = " / ".join("—" if v is None else f"{v:.2f}" for v in (steal(f), steal(p) if peer else None))
        lines.append(f"| {name} | {figure_name} | {fmt(fv)} | {lim_cell} | {ratio_lim} | {peer_cell} | {ratio_peer} | {lat} "
                     f"| {cpu_cells} | {cpu_ratio} | {steal_cell} |")
    return "\n".join(lines) + "\n"


def plots(scenarios, results, out_dir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is not installed: no plots (perf/run installs it into .cache/perf-venv)")
        return
    for sc in scenarios:
        runs = {k: results.get((sc["name"], k)) for k in ("ferrite", "tansu")}
        runs = {k: v for k, v in runs.items() if v and "failed" not in v}
        if not runs:
            continue
        fig, ax = plt.subplots(figsize=(7, 3.5))
        for kind, r in runs.items():
            t = [x["t"] for x in r.get("timeline", [])]
            y = [x["mb_per_sec"] for x in r.get("timeline", [])]
            ax.plot(t, y, label=kind, marker=".")
        ax.set_xlabel("seconds")
        ax.set_ylabel("MB/s")
        ax.set_title(f"{sc['name']}: throughput")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out_dir / f"{sc['name']}-throughput.png", dpi=90)
        plt.close(fig)
        fig, ax = plt.subplots(figsize=(7, 3.5))
        drew = False
        for kind, r in runs.items():
            for key, label in (("latency_ms", "ack"), ("e2e_latency_ms", "e2e")):
                curve = r.get(key, {}).get("curve")
                if not curve:
                    continue
                xs = [1 / max(1 - p / 100, 1e-6) for p, _ in curve]
                ax.plot(xs, [v for _, v in curve], label=f"{kind} {label}", marker=".")
                drew = True
        if drew:
            ax.set_xscale("log")
            ax.set_yscale("log")
            ticks = [2, 10, 100, 1000, 10000, 100000]
            ax.set_xticks(ticks)
            ax.set_xticklabels(["p50", "p90", "p99", "p99.9", "p99.99", "p99.999"])
            ax.set_ylabel("ms")
            ax.set_title(f"{sc['name']}: latency percentiles")
            ax.legend()
            fig.tight_layout()
            fig.savefig(out_dir / f"{sc['name']}-latency.png", dpi=90)
        plt.close(fig)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenarios", help="comma-separated names (default: all)")
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "perf/results/latest"))
    a = ap.parse_args()
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    for f in out_dir.glob("*"):
        f.unlink()
    scenarios = [json.loads(p.read_text()) for p in sorted((ROOT / "perf/scenarios").glob("*.json"))]
    # Scenarios that take their rate from another run go after it.
    scenarios.sort(key=lambda s: "rate_from" in s)
    if a.scenarios:
        wanted = a.scenarios.split(",")
        scenarios = [s for s in scenarios if s["name"] in wanted]
    peer = TANSU.exists() and not a.no_peer
    if not peer:
        log(f"peer broker absent ({TANSU} not built, or --no-peer): Ferrite only")
    log("measuring this machine's limits")
    limits = json.loads(subprocess.run([str(ROOT / "perf/limits.sh"), str(DATA)], capture_output=True,
                                       text=True, check=True).stdout)
    (out_dir / "limits.json").write_text(json.dumps(limits, indent=2))
    log(json.dumps(limits))
    results = {}
    for sc in scenarios:
        for kind in (["ferrite", "tansu"] if peer else ["ferrite"]):
            log(f"{sc['name']} on {kind}")
            results[(sc["name"], kind)] = run_scenario(sc, kind, out_dir, results)
    md = table(scenarios, results, limits, peer)
    (out_dir / "results.md").write_text(md)
    plots(scenarios, results, out_dir)
    summary = {f"{n}/{k}": v for (n, k), v in results.items()}
    (out_dir / "summary.json").write_text(json.dumps({"limits": limits, "runs": summary}, indent=2))
    print()
    print(md)


if __name__ == "__main__":
    sys.exit(main())
