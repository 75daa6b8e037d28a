#!/usr/bin/env python3
"""Gossip benchmark: N real node processes on loopback, for N = 8, 16, 32.

Prints, per N: heartbeat propagation latency from origin to every node
(p50, p99, max over every first receipt), messages and bytes per second per
node, CPU % and RSS per node while idle (no jobs, heartbeats only).

With --load R, every node stakes and R ledger TRANSFERs a second are
appended during the window, each from a random node to another (each one
an ENTRY gossiped to every node and a VOTE from every staked node, also
gossiped: the steady load of issue 27). Then it also prints, for the
gossiped types ENTRY (16) and VOTE (21) and for all gossiped types, the
copies of each message a node receives (received / first receipts) and
the duplicates per message per node (copies - 1), the IHAVE/IWANT and
pull traffic where the binary reports it, and the seen-cache size.
--old-bin runs the same sizes with a reference binary in the same run,
each size with both binaries one after the other.
Figures only: nothing here passes or fails on time.

    bench/bench_network.py [--sizes 8,16,32] [--window 20] [--interval-ms 5000]
                           [--load 2] [--old-bin /tmp/old/build/nightshift]
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLK_TCK = os.sysconf("SC_CLK_TCK")


def run(binary, *args):
    return subprocess.run([binary, *args], check=True, capture_output=True,
                          text=True).stdout


def query(binary, datadir, what):
    out = subprocess.run([binary, what, "--datadir", datadir, "--json"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{what} on {datadir}: {out.stderr.strip()}")
    return json.loads(out.stdout)


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def latency_samples(binary, datadir):
    """Heartbeat receipt latencies (us) since the last call; the node's
    `latency` control query has no CLI subcommand, bench_ctl asks it."""
    ctl = os.path.join(os.path.dirname(binary), "bench", "bench_ctl")
    if not os.path.exists(ctl):  # a reference build without benches
        ctl = os.path.join(ROOT, "build", "bench", "bench_ctl")
    out = subprocess.run([ctl, datadir, "latency"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def pct(sorted_vals, q):
    if not sorted_vals:
        return float("nan")
    k = min(len(sorted_vals) - 1, int(round(q * (len(sorted_vals) - 1))))
    return sorted_vals[k]


# gossiped envelope types (wire.h and the layers' headers)
GOSSIPED = ("2", "16", "21", "32", "34", "37")


def type_counts(m, types):
    """[received, of them duplicates] over `types` of a node's counters."""
    bt = m.get("by_type", {})
    rx = sum(bt.get(t, [0, 0, 0])[0] for t in types)
    dup = sum(bt.get(t, [0, 0, 0])[1] for t in types)
    return rx, dup


def copies(before, after, types):
    """Mean over nodes of received / first receipts for `types`."""
    vals = []
    for b, a in zip(before, after):
        rx0, d0 = type_counts(b, types)
        rx1, d1 = type_counts(a, types)
        first = (rx1 - d1) - (rx0 - d0)
        if first > 0:
            vals.append((rx1 - rx0) / first)
    return sum(vals) / len(vals) if vals else float("nan"), vals


def load_thread(binary, dirs, ids, rate, stop, done):
    import random
    rng = random.Random(1)
    period = 1.0 / rate
    t_next = time.time()
    while not stop.is_set():
        i = rng.randrange(len(dirs))
        j = (i + 1 + rng.randrange(len(dirs) - 1)) % len(dirs)
        r = subprocess.run([binary, "transfer", "--datadir", dirs[i],
                            "--to", ids[j], "0.000001"],
                           capture_output=True, text=True)
        done.append(r.returncode == 0)
        t_next += period
        stop.wait(max(0.0, t_next - time.time()))


def bench(binary, n, window_s, interval_ms, workdir, load=0.0):
    dirs = [os.path.join(workdir, f"node{i}") for i in range(n)]
    for d in dirs:
        run(binary, "init", "--datadir", d, "--listen", "tcp://127.0.0.1:0")
    ids = [run(binary, "id", "--datadir", d).split()[0] for d in dirs]
    genesis = os.path.join(workdir, "genesis.ini")
    allocs = []
    for i in ids:
        allocs += ["--alloc", f"{i}=1000"]
    run(binary, "genesis", "--out", genesis, "--name", f"bench{n}", *allocs)
    for d in dirs:
        run(binary, "init", "--datadir", d, "--genesis", genesis)

    procs = []
    common = ["--set", f"node.heartbeat_interval_ms={interval_ms}",
              "--log-level", "warn"]

    def start(d, boot):
        log = open(os.path.join(d, "node.log"), "w")
        args = [binary, "node", "--datadir", d, *common]
        if boot:
            args += ["--bootstrap", boot]
        return subprocess.Popen(args, stdout=log, stderr=log)

    try:
        procs.append(start(dirs[0], None))
        addr_file = os.path.join(dirs[0], "node.addr")
        deadline = time.time() + 30
        while not os.path.exists(addr_file) and time.time() < deadline:
            time.sleep(0.05)
        boot = open(addr_file).read().strip()
        for d in dirs[1:]:
            procs.append(start(d, boot))
        t_start = time.time()
        deadline = t_start + 60 + 3 * interval_ms / 1000
        while True:
            counts = []
            for d in dirs:
                try:
                    counts.append(query(binary, d, "status")["peers"])
                except RuntimeError:
                    counts.append(-1)  # not listening yet
            if all(c == n - 1 for c in counts):
                break
            if time.time() > deadline:
                raise RuntimeError(f"network of {n} did not form: {counts}")
            time.sleep(0.5)
        formed_s = time.time() - t_start
        if load > 0:
            for d in dirs:
                run(binary, "stake", "--datadir", d, "100")
            time.sleep(5)  # the stakes reach every ledger
        time.sleep(interval_ms / 1000)  # let first-contact bursts pass
        for d in dirs:
            latency_samples(binary, d)  # clear the rings
        before = [query(binary, d, "status")["messages"] for d in dirs]
        ticks0 = [cpu_ticks(p.pid) for p in procs]
        t0 = time.time()
        import threading
        stop, done = threading.Event(), []
        loader = None
        if load > 0:
            loader = threading.Thread(target=load_thread, args=(
                binary, dirs, ids, load, stop, done))
            loader.start()
        time.sleep(window_s)
        stop.set()
        if loader:
            loader.join()
        elapsed = time.time() - t0
        ticks1 = [cpu_ticks(p.pid) for p in procs]
        after = [query(binary, d, "status")["messages"] for d in dirs]
        samples = []
        for d in dirs:
            samples += latency_samples(binary, d)
        rss = [rss_kib(p.pid) for p in procs]
        samples.sort()
        msgs = [((a["rx"] + a["tx"]) - (b["rx"] + b["tx"])) / elapsed
                for a, b in zip(after, before)]
        nbytes = [((a["rx_bytes"] + a["tx_bytes"]) -
                   (b["rx_bytes"] + b["tx_bytes"])) / elapsed
                  for a, b in zip(after, before)]
        cpu = [100.0 * (t1 - t0_) / CLK_TCK / elapsed
               for t0_, t1 in zip(ticks0, ticks1)]
        avg = lambda xs: sum(xs) / len(xs)
        print(f"N={n:3d}  formed in {formed_s:5.1f} s, window {elapsed:.0f} s,"
              f" heartbeat every {interval_ms} ms")
        print(f"   propagation  p50 {pct(samples, .5) / 1000:7.2f} ms   "
              f"p99 {pct(samples, .99) / 1000:7.2f} ms   "
              f"max {samples[-1] / 1000 if samples else float('nan'):7.2f} ms"
              f"   ({len(samples)} receipts, goal p99 < 5 ms at N=32)")
        print(f"   per node     {avg(msgs):7.1f} msg/s   "
              f"{avg(nbytes) / 1024:7.1f} KiB/s (rx+tx, mean)")
        print(f"   idle CPU     mean {avg(cpu):5.2f} %   max {max(cpu):5.2f} %"
              f"   (goal < 0.5 %)")
        print(f"   RSS          mean {avg(rss) / 1024:5.1f} MiB   "
              f"max {max(rss) / 1024:5.1f} MiB   (goal < 20 MB)")
        if load > 0:
            print(f"   load         {sum(done)} transfers ok of {len(done)}"
                  f" ({len(done) / elapsed:.2f}/s)")
        for label, types in (("ENTRY+VOTE", ("16", "21")),
                             ("all gossip", GOSSIPED)):
            c, vals = copies(before, after, types)
            if vals:
                print(f"   {label:11s}  {c:5.2f} copies per message per node"
                      f" ({c - 1:5.2f} duplicates; max node "
                      f"{max(vals):5.2f})")
        rx_b = [(a["rx_bytes"] - b["rx_bytes"]) / elapsed
                for a, b in zip(after, before)]
        print(f"   received     {avg(rx_b) / 1024:7.1f} KiB/s per node (mean),"
              f" max {max(rx_b) / 1024:7.1f}")
        def delta(key):
            if key not in after[0]:
                return None
            return sum(a[key] - b[key] for a, b in zip(after, before)) / (
                n * elapsed)
        lazy = [(k, delta(k)) for k in ("ihave_sent", "iwant_sent",
                                        "iwant_served", "pull_served")]
        if all(v is not None for _, v in lazy):
            print("   lazy/pull    " + "   ".join(
                f"{k} {v:6.2f}/s" for k, v in lazy) + " (per node)")
        if "seen_cap" in after[0]:
            print(f"   seen cache   {max(a['seen_cache'] for a in after)} ids"
                  f" (cap {max(a['seen_cap'] for a in after)}), evicted "
                  f"{sum(a['seen_evicted'] for a in after)}")
        sys.stdout.flush()
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


def main():
    # 32 nodes benchmarking their device at once would only measure the
    # contention; the figures here are about gossip.
    os.environ.setdefault("NS_DEVBENCH", "0")
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="8,16,32")
    ap.add_argument("--window", type=float, default=20.0,
                    help="seconds measured per size (default 20)")
    ap.add_argument("--interval-ms", type=int, default=5000,
                    help="heartbeat interval (default 5000, the testnet's)")
    ap.add_argument("--load", type=float, default=0.0,
                    help="ledger transfers per second during the window "
                    "(default 0: idle)")
    ap.add_argument("--old-bin", default=None,
                    help="reference binary, run on the same sizes")
    ap.add_argument("--bin", default=os.environ.get(
        "NIGHTSHIFT_BIN", os.path.join(ROOT, "build", "nightshift")))
    args = ap.parse_args()
    print(f"gossip benchmark on {os.cpu_count()} cores: "
          f"{os.uname().nodename}, binary {args.bin}")
    bins = [args.bin] + ([args.old_bin] if args.old_bin else [])
    for n in [int(x) for x in args.sizes.split(",")]:
        for b in bins:
            if len(bins) > 1:
                print(f"--- {b}")
            work = tempfile.mkdtemp(prefix=f"ns-bench{n}-")
            try:
                bench(b, n, args.window, args.interval_ms, work, args.load)
            finally:
                shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
