#!/usr/bin/env python3
"""Head sync benchmark: HEADS bytes per second per node on a loopback
testnet while the ledger moves a little, for one or two binaries in the
same run (issue 27, "head sync incremental").

N real nodes on loopback share a genesis that funds AUTHORS extra
accounts; node 0's datadir gets one entry from each (`bench_ledger
--build`, so AUTHORS heads exist), the others catch up from it. Once every
node shows the same heads digest, each node in turn appends a `stake 1`
every --every seconds for --window seconds (a few accounts change, the
rest do not), and the figures are taken over the window that follows
--warmup seconds of the same (a node's first exchange with a peer is a
full listing: a one-off, left out):

  HEADS/s      HEADS messages received per node per second (by_type 18)
  HEADS B/s    HEADS body bytes received per node per second: counted by
               the node (status ledger.heads.bytes_in) when it counts
               them, else estimated from the messages: a full listing of
               the heads (36 bytes a head) every ceil(heads / 2048)
               messages (its pages): the binaries before the rule do not
               count them
  items/s      heads received per node per second (when counted)
  rx B/s       every byte received per node per second (messages.rx_bytes)

    bench/bench_heads.py [--nodes 4] [--authors 2000] [--window 20]
                         [--every 0.5] [--warmup 15] [--bin build/nightshift]
                         [--ref /path/to/older/nightshift]
Figures only: nothing here passes or fails.
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


def run(binary, *args):
    return subprocess.run([binary, *map(str, args)], check=True,
                          capture_output=True, text=True).stdout


def status(binary, datadir):
    r = subprocess.run([binary, "status", "--datadir", datadir, "--json"],
                       capture_output=True, text=True)
    return json.loads(r.stdout) if r.returncode == 0 else None


def bench(binary, args, work, other=None):
    """other: with --mixed, the binary of the even nodes (node 0, the
    source, among them), binary that of the odd ones."""
    n = args.nodes
    dirs = [os.path.join(work, f"node{i}") for i in range(n)]
    for d in dirs:
        run(binary, "init", "--datadir", d, "--listen", "tcp://127.0.0.1:0")
    ids = [run(binary, "id", "--datadir", d).split()[0] for d in dirs]
    keys = os.path.join(work, "keys")
    allocs = []
    for i in ids:
        allocs += ["--alloc", f"{i}={10 ** 12}"]
    # A genesis holds at most 4096 allocations: beyond, node 0 funds the
    # authors (a grant each, taken in by their entry).
    funded = args.authors + n <= 4096
    if funded:
        for a in run(args.bench_ledger, "--keys", keys,
                     args.authors).split():
            allocs += ["--alloc", f"{a}=1000000"]
    genesis = os.path.join(work, "genesis.ini")
    run(binary, "genesis", "--out", genesis, "--name", "bench-heads",
        *allocs)
    for d in dirs:
        run(binary, "init", "--datadir", d, "--genesis", genesis)
    run(args.bench_ledger, "--build", dirs[0], args.authors, 1,
        *(["--keys", keys, "--no-claims"] if funded else []))

    procs = []

    def start(d, *extra):
        log = open(os.path.join(d, "node.log"), "w")
        i = dirs.index(d)
        exe = other if other and i % 2 == 0 else binary
        p = subprocess.Popen([exe, "node", "--datadir", d, "--log-level",
                              "warn", "--set",
                              f"node.heartbeat_interval_ms={args.hb_ms}",
                              *extra], stdout=log, stderr=log,
                             stdin=subprocess.DEVNULL)
        procs.append(p)
        return p

    try:
        start(dirs[0])
        addr_file = os.path.join(dirs[0], "node.addr")
        deadline = time.monotonic() + 30
        while not os.path.exists(addr_file) and time.monotonic() < deadline:
            time.sleep(0.05)
        addr = open(addr_file).read().strip()
        for d in dirs[1:]:
            start(d, "--bootstrap", addr)
        # Converged: every node has every head.
        deadline = time.monotonic() + 120
        while True:
            sts = [status(binary, d) for d in dirs]
            if all(sts) and all(s["peers"] == n - 1 for s in sts) and \
                    len({s["ledger"]["digest"] for s in sts}) == 1 and \
                    sts[0]["ledger"]["entries"] >= args.authors:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the testnet did not converge: " + str(
                    [s and (s["peers"], s["ledger"]["entries"]) for s in sts]))
            time.sleep(0.5)
        time.sleep(2 * args.hb_ms / 1000)

        def move(seconds):
            t0 = time.monotonic()
            k = 0
            while time.monotonic() - t0 < seconds:
                run(binary, "stake", "--datadir", dirs[k % n], 1)
                k += 1
                time.sleep(max(0.0, t0 + k * args.every - time.monotonic()))
            return k

        # Warm-up: the first exchange with each peer is a full listing
        # (no cursor yet); it is a one-off, left out of the window.
        move(args.warmup)
        before = [status(binary, d) for d in dirs]
        t0 = time.monotonic()
        k = move(args.window)
        after = [status(binary, d) for d in dirs]
        dt = time.monotonic() - t0
        heads = after[0]["ledger"]["entries"]  # every author has seq >= 1
        accounts = after[0]["ledger"]["accounts"]

        rows = []
        for b, a in zip(before, after):
            bt, at = b["messages"]["by_type"], a["messages"]["by_type"]
            msgs = (at.get("18", [0])[0] - bt.get("18", [0])[0]) / dt
            rx = (a["messages"]["rx_bytes"] - b["messages"]["rx_bytes"]) / dt
            hb, ha = b["ledger"].get("heads"), a["ledger"].get("heads")
            if ha:
                nbytes = (ha["bytes_in"] - hb["bytes_in"]) / dt
                items = (ha["items_in"] - hb["items_in"]) / dt
                counted = True
                kinds = tuple(ha[x] - hb[x] for x in
                              ("incremental", "full", "divergent"))
            else:
                # a listing is pages of 2048 heads (node 0's seq is past
                # 127 when it funded the authors: 2 bytes more)
                heads = args.authors + n
                pages = -(-heads // 2048)
                nbytes = msgs / pages * (36 * heads + 7 * pages)
                items = None
                counted = False
                kinds = None
            rows.append((msgs, nbytes, items, rx, counted, kinds))
        return {"appends": k, "seconds": dt, "accounts": accounts,
                "entries": heads, "rows": rows}
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--authors", type=int, default=2000)
    ap.add_argument("--window", type=float, default=20.0)
    ap.add_argument("--every", type=float, default=0.5)
    ap.add_argument("--warmup", type=float, default=15.0,
                    help="seconds of the same appends before the window")
    ap.add_argument("--hb-ms", type=int, default=1000)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "nightshift"))
    ap.add_argument("--ref", default=None,
                    help="an older binary to measure in the same run")
    ap.add_argument("--mixed", action="store_true",
                    help="one more run: the even nodes (the source among "
                         "them) on --ref, the odd ones on --bin")
    ap.add_argument("--bench-ledger",
                    default=os.path.join(ROOT, "build", "bench",
                                         "bench_ledger"))
    args = ap.parse_args()
    bins = [("this", args.bin, None)] + \
        ([("ref", args.ref, None)] if args.ref else []) + \
        ([("mixed", args.bin, args.ref)] if args.ref and args.mixed else [])
    print(f"head sync on {args.nodes} loopback nodes, {args.authors} authors "
          f"+ the nodes, one `stake 1` every {args.every} s round the nodes, "
          f"{args.window:.0f} s window, heartbeat {args.hb_ms} ms")
    print(f"{'binary':<6} {'node':>4} {'HEADS/s':>8} {'HEADS B/s':>10} "
          f"{'items/s':>8} {'rx B/s':>9}  exchanges asked (incremental, "
          f"full, of them for divergence)")
    for name, binary, other in bins:
        work = tempfile.mkdtemp(prefix="ns-bench-heads-")
        try:
            r = bench(binary, args, work, other)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        for i, (msgs, nbytes, items, rx, counted, kinds) in \
                enumerate(r["rows"]):
            print(f"{name:<6} {i:>4} {msgs:8.2f} {nbytes:10.0f}"
                  f"{'' if counted else '*'} "
                  f"{'-' if items is None else f'{items:8.1f}':>8} "
                  f"{rx:9.0f}  {'' if kinds is None else kinds}")
        rows = r["rows"]
        mean = [sum(x[j] for x in rows) / len(rows) for j in (0, 1, 3)]
        print(f"{name:<6} mean {mean[0]:8.2f} {mean[1]:10.0f} {'':>8} "
              f"{mean[2]:9.0f}   ({r['appends']} appends in "
              f"{r['seconds']:.1f} s; {r['entries']} entries, "
              f"{r['accounts']} accounts)")
        sys.stdout.flush()
    print("* estimated: a full listing's size per ceil(heads / 2048) HEADS "
          "messages (that binary does not count HEADS bytes)")


if __name__ == "__main__":
    main()
