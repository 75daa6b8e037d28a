#!/usr/bin/env python3
"""Sybil flood benchmark: N real node processes on loopback while one
hostile link (tests/tools/flood.c, --sybil) sends heartbeats signed by
fresh keys, each advertising a dead endpoint, to one of them at 1x, 10x
and 100x the honest heartbeat rate of the whole network (N nodes x one
heartbeat per interval).

Prints, per flood rate and next to the same figure without a flood:
honest heartbeat propagation p50/p99 (origin send to first receipt, over
every node, live peers' heartbeats only), the time a ledger entry takes to
reach every node (median of --entries transfers, polled every 50 ms through
`ledger --json`, so it includes the ledger's commit timer), how many peers
the nodes list (honest ones, and fake ones, which must stay 0), and what
the target counted (keys refused by their budget, messages rate-limited).
Match latency is not measured here. Figures only: nothing passes or fails.

    bench/bench_flood.py [--nodes 16] [--window 8] [--interval-ms 500]
                         [--rates 1,10,100] [--entries 3]
"""
import argparse
import os
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import ledgerutil  # noqa: E402
import nstest  # noqa: E402


def pct(sorted_vals, q):
    if not sorted_vals:
        return float("nan")
    k = min(len(sorted_vals) - 1, int(round(q * (len(sorted_vals) - 1))))
    return sorted_vals[k]


def latency_samples(datadir):
    """Heartbeat receipt latencies (us) since the last call (bench_ctl)."""
    import json
    out = subprocess.run([os.path.join(os.path.dirname(nstest.BIN), "bench",
                                       "bench_ctl"), datadir, "latency"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def entry_propagation(nodes, k, trials):
    """Median seconds from a TRANSFER's append on nodes[k % N] to its
    presence in every node's ledger."""
    times = []
    for t in range(trials):
        src = nodes[(k + t) % len(nodes)]
        dst = nodes[(k + t + 1) % len(nodes)]
        entry = ledgerutil.append(src, "transfer", 1, to=dst)
        t0 = time.monotonic()
        pending = list(nodes)
        while pending and time.monotonic() - t0 < 30:
            pending = [n for n in pending if not any(
                e["id"] == entry for e in ledgerutil.ledger(
                    n.datadir, limit=20, author=src.id)["list"])]
            if pending:
                time.sleep(0.05)
        times.append(time.monotonic() - t0 if not pending else float("inf"))
    return statistics.median(times)


def measure(net, nodes, target, network_id, rate, window_s, trials, k):
    honest = {n.id for n in nodes}
    for n in nodes:
        latency_samples(n.datadir)  # clear the rings
    st0 = target.status()
    flood = None
    if rate > 0:
        keys = int(rate * window_s)
        flood = subprocess.Popen(
            [nstest.FLOOD_BIN, target.addr, "--sybil", str(keys),
             "--interval-ms", "60000", "--rate", str(int(rate)),
             "--network", network_id, "--timeout-ms", "60000"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    time.sleep(min(1.0, window_s / 4))
    prop = entry_propagation(nodes, k, trials)
    lacking = fake = 0
    for n in nodes:
        ids = n.peer_ids()
        lacking += len(honest - {n.id} - ids)
        fake += len(ids - honest)
    left = window_s - (time.monotonic() - t0)
    if left > 0:
        time.sleep(left)
    samples = []
    for n in nodes:
        samples += latency_samples(n.datadir)
    samples.sort()
    if flood:
        flood.communicate(timeout=120)
    st1 = target.status()
    refused = (st1["messages"]["new_keys_limited"]
               - st0["messages"]["new_keys_limited"])
    limited = st1["dropped"]["rate_limited"] - st0["dropped"]["rate_limited"]
    return {"p50": pct(samples, .5) / 1000, "p99": pct(samples, .99) / 1000,
            "n": len(samples), "entry": prop, "lacking": lacking,
            "fake": fake, "refused": refused, "limited": limited}


def main():
    os.environ.setdefault("NS_DEVBENCH", "0")
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--window", type=float, default=8.0,
                    help="seconds measured per rate (default 8)")
    ap.add_argument("--interval-ms", type=int, default=500,
                    help="heartbeat interval (default 500)")
    ap.add_argument("--rates", default="1,10,100",
                    help="flood rates, multiples of the honest rate")
    ap.add_argument("--entries", type=int, default=3,
                    help="transfers timed per rate (median printed)")
    args = ap.parse_args()
    honest_rate = args.nodes * 1000.0 / args.interval_ms
    print(f"sybil flood benchmark on {os.cpu_count()} cores: "
          f"{args.nodes} nodes, heartbeat every {args.interval_ms} ms "
          f"(honest rate {honest_rate:.0f} heartbeats/s), binary {nstest.BIN}")
    with nstest.Net("bench-flood", heartbeat_ms=args.interval_ms) as net:
        nodes = net.make_nodes(args.nodes)
        net.start_all(nodes)
        net.wait_mesh(nodes, timeout=120)
        ledgerutil.wait_converged(nodes, 60)
        target = nodes[len(nodes) // 2]
        network_id = target.status()["network_id"]
        time.sleep(args.interval_ms / 1000)
        base = measure(net, nodes, target, network_id, 0, args.window,
                       args.entries, 0)
        fmt = ("{label:>20}  hb p50 {p50:7.2f} ms  p99 {p99:7.2f} ms "
               "({n:5d})  entry {entry:5.2f} s  peers lacking {lacking:3d} "
               "fake {fake:3d}  target: keys refused {refused:6d}, "
               "rate-limited {limited:6d}")
        print(fmt.format(label="no flood", **base))
        for i, mult in enumerate(float(x) for x in args.rates.split(",")):
            r = measure(net, nodes, target, network_id, mult * honest_rate,
                        args.window, args.entries, i + 1)
            print(fmt.format(label=f"{mult:g}x flood "
                                   f"({mult * honest_rate:.0f}/s)", **r))
            print(f"{'':>20}  vs no flood: hb p50 {r['p50'] - base['p50']:+.2f}"
                  f" ms, p99 {r['p99'] - base['p99']:+.2f} ms, entry "
                  f"{r['entry'] - base['entry']:+.2f} s")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
