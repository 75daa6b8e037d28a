#!/usr/bin/env python3
"""The cost of node.http: a scrape's time (/metrics and /status.json,
p50/p99 over --scrapes requests on one keep-alive-less connection each,
as Prometheus makes them) and the node's CPU (utime + stime from
/proc/PID/stat) over --seconds with no scrape and with a scrape of
/metrics every second, on --nodes real nodes on loopback (the scraped node
lists the others as peers). Figures only: nothing passes or fails.

    bench/bench_metrics.py [--nodes 4] [--seconds 30] [--scrapes 500]
"""
import argparse
import os
import statistics
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import nstest  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def scrape(url):
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=10) as r:
        body = r.read()
    return time.perf_counter() - t0, len(body)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--scrapes", type=int, default=500)
    args = ap.parse_args()

    def run(net):
        nodes = net.make_nodes(args.nodes)
        nodes[0].start(extra=["--set", "node.http=127.0.0.1:0"])
        for n in nodes[1:]:
            n.start(bootstrap=[nodes[0]], wait=False)
        for n in nodes[1:]:
            n.wait_started()
        net.wait_mesh(nodes)
        base = "http://" + nodes[0].status()["http"]
        for path in ("/metrics", "/status.json"):
            times, size = [], 0
            for _ in range(args.scrapes):
                t, size = scrape(base + path)
                times.append(t * 1000)
            print(f"GET {path:13s} {size:6d} bytes: p50 "
                  f"{pct(times, 50):.3f} ms, p99 {pct(times, 99):.3f} ms "
                  f"({args.scrapes} requests, {args.nodes - 1} peers)")
        pid = nodes[0].pid
        for label, every in (("no scrape", None), ("a scrape every 1 s", 1)):
            c0, t0 = cpu_s(pid), time.monotonic()
            while time.monotonic() - t0 < args.seconds:
                if every:
                    scrape(base + "/metrics")
                time.sleep(every or 0.5)
            used = cpu_s(pid) - c0
            wall = time.monotonic() - t0
            print(f"node CPU, {label:18s}: {used / wall * 100:.3f}% of a "
                  f"core ({used:.2f} s over {wall:.0f} s)")

    nstest.main(run, "bench_metrics")


if __name__ == "__main__":
    main()
