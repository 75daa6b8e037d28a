#!/usr/bin/env python3
"""Ledger catch-up benchmark: how long a fresh node takes to pull a big
ledger from a peer, with the real binary over loopback.

A source datadir gets AUTHORS x PER_AUTHOR entries from `bench_ledger
--build` (authors funded by the genesis, transfers whose credits are never
taken in; with --claims, the source's key funds the authors and every
credit is taken in, so entries name entries of other chains); a node runs
on it; a fresh node bootstraps to it, and the time is taken until the
fresh node's `status` shows the source's entry count and heads digest. Then, as a second figure,
durable appends through the CLI (`nightshift stake`, one process and one
control-socket round trip each) on the source node. Figures only.

The issue's figure (100k entries with cross-author credits):
    bench/bench_catchup.py --claims --authors 100 --per-author 1000

    bench/bench_catchup.py [--authors 100] [--per-author 1000] [--claims]
                           [--appends 200] [--bin build/nightshift]
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLK_TCK = os.sysconf("SC_CLK_TCK")


def run(binary, *args):
    return subprocess.run([binary, *map(str, args)], check=True,
                          capture_output=True, text=True).stdout


def status(binary, datadir):
    r = subprocess.run([binary, "status", "--datadir", datadir, "--json"],
                       capture_output=True, text=True)
    return json.loads(r.stdout) if r.returncode == 0 else None


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def wait_status(binary, datadir, proc, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"node on {datadir} exited {proc.returncode};"
                               f" see {datadir}/node.log")
        st = status(binary, datadir)
        if st:
            return st
        time.sleep(0.05)
    raise RuntimeError(f"node on {datadir} did not answer in {timeout}s")


def bench(args, work):
    binary = args.bin
    src, fresh = (os.path.join(work, n) for n in ("source", "fresh"))
    for d in (src, fresh):
        run(binary, "init", "--datadir", d, "--listen", "tcp://127.0.0.1:0")
    ids = [run(binary, "id", "--datadir", d).split()[0] for d in (src, fresh)]
    genesis = os.path.join(work, "genesis.ini")
    allocs = ["--alloc", f"{ids[0]}={10 ** 12}", "--alloc", f"{ids[1]}=1000"]
    build = [args.bench_ledger, "--build", src, args.authors,
             args.per_author]
    if not args.claims:
        # Authors funded by the genesis, credits never taken in: no entry
        # names an entry of another chain.
        keys = os.path.join(work, "keys")
        for a in run(args.bench_ledger, "--keys", keys,
                     args.authors).split():
            allocs += ["--alloc", f"{a}=1000000"]
        build += ["--keys", keys, "--no-claims"]
    run(binary, "genesis", "--out", genesis, "--name", "bench-catchup",
        *allocs)
    for d in (src, fresh):
        run(binary, "init", "--datadir", d, "--genesis", genesis)

    out = run(*build)
    print(f"source ledger: {out.strip()}")
    m = re.search(r"\(([0-9]+) entries/s\)", out)
    build_rate = float(m.group(1)) if m else None
    procs = []

    def start(d, *extra):
        log = open(os.path.join(d, "node.log"), "w")
        p = subprocess.Popen([binary, "node", "--datadir", d, "--log-level",
                              "warn", "--set",
                              f"node.heartbeat_interval_ms={args.hb_ms}",
                              *extra], stdout=log, stderr=log,
                             stdin=subprocess.DEVNULL)
        procs.append(p)
        return p

    try:
        ps = start(src)
        st = wait_status(binary, src, ps)
        want = (st["ledger"]["entries"], st["ledger"]["digest"])
        with open(os.path.join(src, "node.addr")) as f:
            addr = f.read().strip()

        t0 = time.monotonic()
        pf = start(fresh, "--bootstrap", addr)
        wait_status(binary, fresh, pf)
        t_up = time.monotonic() - t0
        samples, last = [], None
        deadline = t0 + args.timeout
        while True:
            st = status(binary, fresh)
            now = time.monotonic() - t0
            if st:
                lg = st["ledger"]
                last = lg
                if not samples or now - samples[-1][0] >= 1.0:
                    samples.append((now, lg["entries"]))
                if (lg["entries"], lg["digest"]) == want:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"no catch-up within {args.timeout}s: "
                    f"{last and last['entries']}/{want[0]} entries; "
                    f"progress {samples[-5:]}; fresh node's ledger status: "
                    f"{json.dumps(last)}")
            time.sleep(0.2)  # each poll is a process: keep them rare
        took = time.monotonic() - t0
        cpu_fresh, cpu_src = cpu_s(pf.pid), cpu_s(ps.pid)
        print(f"catch-up of {want[0]} entries by a fresh node over loopback "
              f"(heartbeat {args.hb_ms} ms):")
        print(f"   until identical   {took:7.1f} s from its start "
              f"({took - t_up:.1f} s after it first answered status)")
        rate = want[0] / (took - t_up)
        print(f"   rate              {rate:7.0f} entries/s after start-up"
              + (f"; same run's local ingest (the build): {build_rate:.0f}"
                 f" entries/s, {100 * rate / build_rate:.0f} % of it"
                 if build_rate else ""))
        print(f"   CPU               fresh node {cpu_fresh:.1f} s, source "
              f"{cpu_src:.1f} s (whole lives, source build excluded)")
        print(f"   fresh node        ranges_in {last['ranges_in']}, "
              f"gossip_in {last['gossip_in']}, buffered {last['buffered']}")
        print("   progress          " + ", ".join(
            f"{t:.0f}s:{n}" for t, n in samples[:: max(1, len(samples) // 8)]))

        # Durable appends through the CLI on the source node.
        t1 = time.monotonic()
        for i in range(args.appends):
            run(binary, "unstake" if i % 2 else "stake", "--datadir", src, 1)
        dt = time.monotonic() - t1
        print(f"appends through the CLI (a process and a control-socket "
              f"round trip each, durable on reply):")
        print(f"   {args.appends / dt:7.0f} appends/s  "
              f"({1000 * dt / args.appends:.2f} ms each, {args.appends} "
              f"appends)")
        sys.stdout.flush()
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--authors", type=int, default=100)
    ap.add_argument("--per-author", type=int, default=1000)
    ap.add_argument("--appends", type=int, default=200)
    ap.add_argument("--claims", action="store_true",
                    help="a ledger where the source's key funds the "
                         "authors and every credit is taken in by refs "
                         "(entries name entries of other chains); default: "
                         "authors funded by the genesis, no refs")
    ap.add_argument("--hb-ms", type=int, default=1000,
                    help="heartbeat interval of both nodes (default 1000)")
    ap.add_argument("--timeout", type=float, default=240,
                    help="give up on the catch-up after this many seconds")
    ap.add_argument("--bin", default=os.environ.get(
        "NIGHTSHIFT_BIN", os.path.join(ROOT, "build", "nightshift")))
    ap.add_argument("--keep", action="store_true",
                    help="keep the work directory (logs, datadirs)")
    ap.add_argument("--bench-ledger", default=None,
                    help="bench_ledger binary (default: next to --bin, "
                         "bench/bench_ledger)")
    args = ap.parse_args()
    args.bench_ledger = args.bench_ledger or os.path.join(
        os.path.dirname(args.bin), "bench", "bench_ledger")
    print(f"ledger catch-up benchmark on {os.cpu_count()} cores: "
          f"{os.uname().nodename}, binary {args.bin}")
    work = tempfile.mkdtemp(prefix="ns-bench-catchup-")
    try:
        bench(args, work)
    finally:
        if args.keep:
            print(f"(kept {work})")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
