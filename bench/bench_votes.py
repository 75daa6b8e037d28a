#!/usr/bin/env python3
"""Per-job cost of confirmation: bytes and messages received per node per
job on real loopback testnets (testnet/run.sh; every node stakes, so S = N)
of 8 and 32 nodes, with the 32-node figure over the 8-node one (issue 27's
goal: within 1.3x; 2.7x at a1d2331, where every staked node votes).

Each size: the testnet forms, an idle window measures what the nodes
receive with no job (heartbeats, sync), then small jobs (a 1,024-float
vector add through `submit --node`, one after the other, spread over the
nodes) run for a window. Per node per job = (received during the jobs -
the idle rate x the window) / jobs settled, the mean over nodes; the VOTE
messages a node received (type 21 in status's by_type, duplicates
included) and the vote ids it counted (`votes.received`) are shown too.
With --before BIN the same is measured for that binary first (main's
build, say), in the same run, so that both sets of figures share the
machine's load. Figures only: nothing here passes or fails.

    bench/bench_votes.py [--sizes 8,32] [--jobs 10] [--idle 10]
                         [--before /path/to/old/nightshift]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def status(binary, datadir):
    r = subprocess.run([binary, "status", "--datadir", datadir, "--json"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"status on {datadir}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def counters(binary, dirs):
    """rx messages, rx bytes, vote ids counted and VOTE messages received
    (type 21, duplicates included), per node."""
    out = []
    for d in dirs:
        s = status(binary, d)
        by_type = s["messages"].get("by_type", {})
        out.append((s["messages"]["rx"], s["messages"]["rx_bytes"],
                    s.get("votes", {}).get("received", 0),
                    by_type.get("21", [0])[0],
                    s.get("votes", {}).get("confirmed", 0)))
    return out


def delta(after, before):
    return [tuple(a - b for a, b in zip(x, y)) for x, y in zip(after, before)]


def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def bench(binary, n, jobs, idle_s, work):
    tdir = os.path.join(work, f"tn{n}")
    env = {**os.environ, "NIGHTSHIFT_BIN": binary, "NS_DEVBENCH": "0"}
    t0 = time.monotonic()
    r = subprocess.run([os.path.join(ROOT, "testnet", "run.sh"), "-n",
                        str(n), "-d", tdir, "-i", "1000", "-t", "180"],
                       capture_output=True, text=True, env=env,
                       stdin=subprocess.DEVNULL)
    try:
        if r.returncode != 0:
            raise RuntimeError(f"run.sh -n {n}: {r.stdout}\n{r.stderr}")
        dirs = [os.path.join(tdir, f"node{i}") for i in range(n)]
        print(f"  {n} nodes up in {time.monotonic() - t0:.0f} s", flush=True)
        # stake entries confirmed and first-contact bursts over
        time.sleep(5)
        a, b = os.path.join(work, "va.bin"), os.path.join(work, "vb.bin")
        with open(a, "wb") as f:
            f.write(os.urandom(4096))
        with open(b, "wb") as f:
            f.write(os.urandom(4096))
        flags = ["--builtin", "vector_add", "--global", "1024", "--arg",
                 f"in:{a}", "--arg", f"in:{b}", "--arg",
                 f"out:4096:{os.path.join(work, 'vsum.bin')}", "--arg",
                 "u32:1024", "--max-price", "100", "--bid-window-ms", "200",
                 "--json"]
        # one warm-up job: its first-time costs (challenges) not measured
        subprocess.run([binary, "submit", "--node", dirs[0], *flags],
                       capture_output=True, text=True, env=env)
        time.sleep(2)
        c0 = counters(binary, dirs)
        ti = time.monotonic()
        time.sleep(idle_s)
        c1 = counters(binary, dirs)
        idle_dt = time.monotonic() - ti
        idle = delta(c1, c0)
        settled = 0
        tj = time.monotonic()
        for k in range(jobs):
            node = dirs[(k * 7 + 1) % n]
            s = subprocess.run([binary, "submit", "--node", node, *flags],
                               capture_output=True, text=True, env=env)
            try:
                settled += json.loads(s.stdout).get("status") == "settled"
            except json.JSONDecodeError:
                pass
        time.sleep(3)  # the last job's votes and settlement spread
        c2 = counters(binary, dirs)
        busy_dt = time.monotonic() - tj
        # the committee each node sits with (builds that have one)
        com = [status(binary, d).get("votes", {}) for d in dirs]
        if "committee" in com[0]:
            print(f"         committee: {min(c['committee'] for c in com)}"
                  f"-{max(c['committee'] for c in com)} members of "
                  f"{max(c['staked_accounts'] for c in com)} staked, drawn "
                  f"on {sum(bool(c['drawn']) for c in com)}/{n} nodes, "
                  f"voting: {sum(c['our_stake'] > 0 for c in com)} nodes",
                  flush=True)
        busy = delta(c2, c1)
        per = [tuple((bv - iv * busy_dt / idle_dt) / max(settled, 1)
                     for bv, iv in zip(bx, ix))
               for bx, ix in zip(busy, idle)]
        fig = {"n": n, "settled": settled, "jobs": jobs,
               "msgs": mean([p[0] for p in per]),
               "bytes": mean([p[1] for p in per]),
               "vote_ids": mean([p[2] for p in per]),
               "vote_msgs": mean([p[3] for p in per]),
               # confirmations per job: the same on every node when every
               # node draws the same committee (no idle correction)
               "confirmed": [c / max(settled, 1) for c in
                             (b[4] for b in busy)],
               "idle_msgs_s": mean([i[0] / idle_dt for i in idle]),
               "idle_bytes_s": mean([i[1] / idle_dt for i in idle]),
               "load": os.getloadavg()[0]}
        print(f"  N={n:3d}  {settled}/{jobs} settled   per node per job: "
              f"{fig['msgs']:8.0f} msgs  {fig['bytes'] / 1024:8.1f} KiB  "
              f"(VOTE {fig['vote_msgs']:5.0f} msgs, {fig['vote_ids']:4.0f} "
              f"ids counted)   (idle "
              f"{fig['idle_msgs_s']:.0f} msg/s, "
              f"{fig['idle_bytes_s'] / 1024:.1f} KiB/s; load "
              f"{fig['load']:.1f})", flush=True)
        print(f"         entries confirmed per job per node: min "
              f"{min(fig['confirmed']):.1f}, mean "
              f"{mean(fig['confirmed']):.1f}, max "
              f"{max(fig['confirmed']):.1f}", flush=True)
        return fig
    finally:
        if os.path.exists(os.path.join(tdir, "pids")):
            subprocess.run([os.path.join(ROOT, "testnet", "stop.sh"), "-d",
                            tdir], capture_output=True)


def series(label, binary, sizes, args):
    print(f"\n== {label}: {binary} ==", flush=True)
    out = {}
    for n in sizes:
        work = tempfile.mkdtemp(prefix=f"ns-votes{n}-")
        try:
            out[n] = bench(binary, n, args.jobs, args.idle, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    lo, hi = min(sizes), max(sizes)
    if lo != hi and out[lo]["msgs"] > 0 and out[lo]["bytes"] > 0:
        vr = (out[hi]["vote_msgs"] / out[lo]["vote_msgs"]
              if out[lo]["vote_msgs"] > 0 else float("nan"))
        print(f"  ratio N={hi}/N={lo}: messages "
              f"{out[hi]['msgs'] / out[lo]['msgs']:.2f}x, bytes "
              f"{out[hi]['bytes'] / out[lo]['bytes']:.2f}x (goal <= 1.3x); "
              f"VOTE messages {vr:.2f}x", flush=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="8,32")
    ap.add_argument("--jobs", type=int, default=10)
    ap.add_argument("--idle", type=float, default=10.0,
                    help="seconds of the idle window (default 10)")
    ap.add_argument("--before", help="a reference binary, measured first")
    ap.add_argument("--bin", default=os.environ.get(
        "NIGHTSHIFT_BIN", os.path.join(ROOT, "build", "nightshift")))
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    print(f"votes benchmark on {os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    if args.before:
        series("before", args.before, sizes, args)
    series("after", args.bin, sizes, args)


if __name__ == "__main__":
    main()
