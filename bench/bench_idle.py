#!/usr/bin/env python3
"""Idle cost of nodes: CPU and wakeups per second of idle nodes on this
machine, for one node and for a larger testnet (default 64), each printed
next to the figure for one node measured in the same run. Figures only;
nothing passes or fails on time.

A node is idle when no job runs: it should wake for its heartbeats and its
claims, not for fast timers (goal: < 0.5 % CPU per node, and 64 nodes on
one 2-core box).

Per node: CPU % = (utime + stime) over the window / window, from
/proc/PID/stat; wakeups/s = voluntary context switches over the window
(each sleep that ends is one), of the event loop's thread and of all the
process's threads (libzmq's I/O threads included), from
/proc/PID/task/TID/status. Messages/s per node (received, of them
duplicates, and sent), live peers and peers dropped as silent (missed
heartbeats: should be 0 on an idle network), from `nightshift status --json`
read just before and after the window (each node over its own span).

    bench/bench_idle.py [--sizes 1,64] [--window 30] [--settle 10]
                        [--heartbeat-ms 1000] [--base OTHER_BINARY]
                        [--port FIRST_PORT]

With --base, each size runs with that binary too, just before this one,
and this one's figures are printed next to the base's of the same run.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("NIGHTSHIFT_BIN") or os.path.join(ROOT, "build",
                                                       "nightshift")
TICK = os.sysconf("SC_CLK_TCK")


def _vol(path):
    with open(path) as f:
        return next(int(line.split()[1]) for line in f
                    if line.startswith("voluntary_ctxt_switches"))


def sample(pid):
    """(cpu seconds, voluntary context switches of the main thread, of all
    its threads) of pid, or None. The main thread runs the event loop;
    the others are libzmq's I/O threads, woken by traffic on the sockets.
    A thread that ended is not counted."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / TICK
        main = _vol(f"/proc/{pid}/task/{pid}/status")
        every = 0
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                every += _vol(f"/proc/{pid}/task/{tid}/status")
            except (OSError, StopIteration):
                pass
        return cpu, main, every
    except (OSError, StopIteration, IndexError, ValueError):
        return None


# envelope types (include/nightshift/wire.h and the layers' headers)
TYPES = {1: "hello", 2: "heartbeat", 3: "peers", 4: "pull", 5: "relay",
         12: "genesis_req", 13: "genesis", 16: "entry", 17: "heads_req",
         18: "heads", 19: "get", 20: "entries", 21: "vote", 22: "vote_req",
         32: "job", 33: "bid", 34: "awarded", 35: "fetch", 36: "chunk",
         37: "failed", 38: "chal", 39: "chal_done", 63: "other"}


def messages(binary, datadir):
    """(monotonic time, rx, duplicates, tx, live peers, peers expired,
    {type: [rx, duplicates, tx]}) of the node on datadir, or None. The
    last is empty for a binary without messages.by_type."""
    try:
        r = subprocess.run([binary, "status", "--datadir", datadir, "--json"],
                           capture_output=True, text=True, timeout=10)
        doc = json.loads(r.stdout)
        m = doc["messages"]
        by_type = {int(k): v for k, v in m.get("by_type", {}).items()}
        return (time.monotonic(), m["rx"], m["duplicates"], m["tx"],
                doc["peers"], m["peers_expired"], by_type)
    except (OSError, ValueError, KeyError, subprocess.SubprocessError):
        return None


def measure(work, n, args, binary):
    d = os.path.join(work, f"tn{n}")
    env = {**os.environ, "NIGHTSHIFT_BIN": binary}
    t0 = time.monotonic()
    r = subprocess.run([os.path.join(ROOT, "testnet", "run.sh"), "-n",
                        str(n), "-d", d, "-i", str(args.heartbeat_ms), "-t",
                        "300"] + (["-p", str(args.port)] if args.port else []),
                       capture_output=True, text=True, env=env,
                       stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        subprocess.run([os.path.join(ROOT, "testnet", "stop.sh"), "-d", d],
                       capture_output=True)
        sys.exit(f"run.sh -n {n} failed:\n{r.stdout}\n{r.stderr}")
    try:
        with open(os.path.join(d, "pids")) as f:
            rows = [line.split() for line in f if line.strip()]
        pids = [int(r[0]) for r in rows]
        dirs = {int(r[0]): r[1] for r in rows}
        up = time.monotonic() - t0
        time.sleep(args.settle)
        m0 = {p: messages(binary, dirs[p]) for p in pids}
        before = {p: sample(p) for p in pids}
        time.sleep(args.window)
        after = {p: sample(p) for p in pids}
        m1 = {p: messages(binary, dirs[p]) for p in pids}
        rx, dup, tx, peers, expired = [], [], [], [], []
        by_type = {}  # type: [rx/s, dup/s, tx/s] summed over nodes
        for p in pids:
            if m0[p] and m1[p] and m1[p][0] > m0[p][0]:
                span = m1[p][0] - m0[p][0]
                for t, v1 in m1[p][6].items():
                    v0 = m0[p][6].get(t, [0, 0, 0])
                    acc = by_type.setdefault(t, [0.0, 0.0, 0.0])
                    for k in range(3):
                        acc[k] += (v1[k] - v0[k]) / span
                rx.append((m1[p][1] - m0[p][1]) / span)
                dup.append((m1[p][2] - m0[p][2]) / span)
                tx.append((m1[p][3] - m0[p][3]) / span)
                peers.append(m1[p][4])
                expired.append(m1[p][5] - m0[p][5])
        cpu, wake, wake_all = [], [], []
        for p in pids:
            if before[p] and after[p]:
                cpu.append((after[p][0] - before[p][0]) / args.window * 100)
                wake.append((after[p][1] - before[p][1]) / args.window)
                wake_all.append((after[p][2] - before[p][2]) / args.window)
        la = os.getloadavg()
    finally:
        subprocess.run([os.path.join(ROOT, "testnet", "stop.sh"), "-d", d],
                       capture_output=True)
    return {"n": n, "up_s": up, "cpu": cpu, "wake": wake,
            "wake_all": wake_all, "load": la, "rx": rx, "dup": dup, "tx": tx,
            "peers": peers, "expired": expired,
            "by_type": {t: [v / len(rx) for v in acc]
                        for t, acc in by_type.items()} if rx else {}}


def summary(m):
    """Means of a measure(): CPU %, wakeups/s (loop, all), rx/s, dup/s."""
    def mean(k):
        return statistics.mean(m[k]) if m[k] else float("nan")
    return (mean("cpu"), mean("wake"), mean("wake_all"), mean("rx"),
            mean("dup"))


def report(label, m):
    cpu, wake, wall, _, _ = summary(m)
    print(f"  {label}{m['n']:3} node(s) up in {m['up_s']:.1f} s: CPU per node "
          f"mean {cpu:.3f} % (max {max(m['cpu']):.3f} %), total "
          f"{sum(m['cpu']):.2f} % of one core; wakeups/s per node "
          f"{wake:.1f} (event loop), {wall:.1f} (all threads); "
          f"load {m['load'][0]:.2f}", flush=True)
    if m["rx"]:
        print(f"      messages/s per node: received "
              f"{statistics.mean(m['rx']):.1f} (duplicates "
              f"{statistics.mean(m['dup']):.1f}), sent "
              f"{statistics.mean(m['tx']):.1f}; live peers "
              f"{statistics.mean(m['peers']):.1f}, peers expired in the "
              f"window {sum(m['expired'])} (all nodes)", flush=True)
    if m.get("by_type"):
        parts = [f"{TYPES.get(t, str(t))} {v[0]:.1f}/{v[1]:.1f}/{v[2]:.1f}"
                 for t, v in sorted(m["by_type"].items(),
                                    key=lambda kv: -kv[1][0] - kv[1][2])
                 if v[0] >= 0.05 or v[2] >= 0.05]
        print("      by type, per node, received/duplicates/sent per s: "
              + (", ".join(parts) or "none"), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1,64")
    ap.add_argument("--window", type=float, default=30)
    ap.add_argument("--settle", type=float, default=10)
    ap.add_argument("--heartbeat-ms", type=int, default=1000)
    ap.add_argument("--port", type=int, default=0,
                    help="first port of each testnet (default: run.sh picks)")
    ap.add_argument("--base", help="another nightshift binary, measured "
                    "before this one at each size (e.g. main's build)")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    if 1 not in sizes:
        sizes.insert(0, 1)  # the reference
    work = tempfile.mkdtemp(prefix="bench-idle-")
    print(f"bench_idle: {BIN}; heartbeat {args.heartbeat_ms} ms; window "
          f"{args.window:.0f} s after {args.settle:.0f} s; "
          f"{os.cpu_count()} CPUs", flush=True)
    if args.base:
        print(f"  base: {args.base}", flush=True)
    ref = None
    try:
        for n in sizes:
            b = None
            if args.base:
                b = measure(work, n, args, args.base)
                report("base ", b)
            m = measure(work, n, args, BIN)
            report("this " if args.base else "", m)
            cpu, wake, wall, rx, dup = summary(m)
            if n == 1:
                ref = (cpu, wake, wall)
            if b and n != 1:
                bs = summary(b)
                print(f"      vs base in this run: CPU {bs[0]:.3f} % -> "
                      f"{cpu:.3f} %, received/s {bs[3]:.1f} -> {rx:.1f}, "
                      f"duplicates/s {bs[4]:.1f} -> {dup:.1f}, wakeups/s "
                      f"(all threads) {bs[2]:.1f} -> {wall:.1f}", flush=True)
            if ref and n != 1:
                print(f"      vs one node in this run: CPU {ref[0]:.3f} %, "
                      f"wakeups/s {ref[1]:.1f} (event loop), {ref[2]:.1f} "
                      f"(all threads); goal < 0.5 % per node", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
