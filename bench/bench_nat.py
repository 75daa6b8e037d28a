#!/usr/bin/env python3
"""Behind a router, what it costs: time to join (node start to a public
node listing it as a live peer), match latency and a job's end-to-end
time through a relay, each next to the same on direct links, in the same
run, on the network namespaces of tests/integration/netns.py (a
masquerading router in nftables; needs root).

  direct:  requester and provider in pub, every link dialled directly
  held:    requester in pub, provider in a home (node.reachable=no): the
           requester reaches it over the connection the provider opened
  relay:   requester in one home, provider in another, both
           node.reachable=no: every direct message goes through b
           (node.relay=on)

Jobs are vector_add of --items floats, --jobs per path (the first of each
also pays the hardware challenge; the median and the spread are shown).
Figures only: nothing passes or fails.

    sudo bench/bench_nat.py [--jobs 5] [--items 65536]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import natnet  # noqa: E402
import netns  # noqa: E402
import nstest  # noqa: E402


def join_time(holder, node, start):
    """Start node (start()), then seconds until holder lists it live."""
    t0 = time.monotonic()
    start()

    def listed():
        return any(p["id"] == node.id for p in holder.peers()), "not yet"
    nstest.wait_until(listed, 30, f"{holder.name} to list {node.name}",
                      interval=0.02)
    return time.monotonic() - t0


def fmt(xs):
    if not xs:
        return "-"
    return (f"{statistics.median(xs):8.1f} (min {min(xs):.1f}, "
            f"max {max(xs):.1f})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=5)
    ap.add_argument("--items", type=int, default=65536)
    args = ap.parse_args()

    def run(net):
        topo = natnet.setup(net, homes=2)
        P = natnet.PUB_PORT
        b, p, h, rp, rh = natnet.make_nodes(net, topo, [
            ("b", topo.pub, P), ("p", topo.pub, P + 1),
            ("h", topo.homes[0], P), ("rp", topo.pub, P + 2),
            ("rh", topo.homes[1], P)])
        b.start(extra=natnet.pub_args(P, "--set", "node.slots=0", "--set",
                                      "node.relay=on"))
        stake = ["--set", "node.stake=100000"]
        tj_direct = join_time(b, p, lambda: p.start(
            bootstrap=[b], wait=False, extra=natnet.pub_args(
                P + 1, "--set", "node.region=pub", *stake)))
        tj_nat = join_time(b, h, lambda: h.start(
            bootstrap=[b], wait=False,
            extra=["--set", "node.reachable=no", "--set", "node.region=home",
                   *stake]))
        print(f"time to join (start -> listed live by b): direct "
              f"{tj_direct * 1000:.0f} ms, behind the router "
              f"{tj_nat * 1000:.0f} ms", flush=True)
        nstest.wait_until(lambda: (h.status()["contact"].startswith(
            "relay:"), "no relay yet"), 10, "h to name its relay")

        paths = {
            "direct": (topo.pub, rp, ["--region", "pub", "--listen",
                                      f"tcp://0.0.0.0:{P + 2}",
                                      "--advertise",
                                      f"tcp://{netns.PUB_IP}:{P + 2}"]),
            "held": (topo.pub, rp, ["--region", "home", "--listen",
                                    f"tcp://0.0.0.0:{P + 2}", "--advertise",
                                    f"tcp://{netns.PUB_IP}:{P + 2}"]),
            "relay": (topo.homes[1], rh, ["--region", "home",
                                          "--reachable", "no"]),
        }
        res = {k: {"match": [], "total": [], "wall": []} for k in paths}
        # interleaved, so that drift in the machine's load hits all three
        for i in range(args.jobs):
            for name, (ns, req, flags) in paths.items():
                receipt, took, _ = natnet.submit(net, ns, req, b.addr,
                                                 *flags, n=args.items,
                                                 tag=f"{name}{i}")
                want = p.id if name == "direct" else h.id
                nstest.check(receipt["provider"] == want,
                             f"{name}: provider {receipt['provider'][:10]}")
                t = receipt["timings_ms"]
                res[name]["match"].append(t["match"])
                res[name]["total"].append(t["total"])
                res[name]["wall"].append(took * 1000)
        relayed = b.status()["messages"]
        print(f"{args.jobs} jobs per path, vector_add of {args.items} "
              f"floats ({args.items * 12 // 1024} KiB moved); ms, median "
              f"(min, max):")
        print(f"{'path':8s} {'match latency':28s} {'end-to-end (receipt)':28s}"
              f" {'submit wall clock':28s}")
        for name in paths:
            r = res[name]
            print(f"{name:8s} {fmt(r['match']):28s} {fmt(r['total']):28s} "
                  f"{fmt(r['wall']):28s}")
        print(f"b relayed {relayed['relayed']} messages, "
              f"{relayed['relayed_bytes']} bytes "
              f"(refused {relayed['relay_refused']})")

    nstest.main(run, "bench_nat")


if __name__ == "__main__":
    main()
