#!/usr/bin/env python3
"""Market benchmark on local testnets (testnet/run.sh): figures only,
nothing here passes or fails on time.

1. Match latency on a 16-node testnet: `timings_ms.match` of the submit
   receipt (first announcement to the provider's ACCEPT in the ledger,
   which includes the bid window) over 50 sequential small jobs, p50/p99,
   with the bid window reported separately and the part over it
   (goal: window + < 50 ms). The rest of the receipt's total is shown too
   (total - match - run - verify: the light peer's join before the auction
   and the output fetch).
2. End to end: an SGEMM of about a second of compute, `nightshift submit`
   (light peer, and `--node`) next to `nightshift run` of the same job
   (goals: <= 1.1x + 100 ms for the light peer, <= 1.2x through --node),
   as process wall times, and without the join and output fetch; each
   rep runs the three one after the other, and the --node ratio is also
   given as the median of each rep's own pair.
3. Throughput with 8 providers: settled jobs per minute with R requesters
   submitting back to back at once (each has its own funded datadir,
   run.sh -r R), and the spread of the settled jobs over the providers
   (max / mean; goal: no provider more than twice its fair share).
4. Small jobs: a 1,024-float vector add through `submit --node` (bid window
   20 ms) and through the light peer, next to `nightshift run` of the same
   job (goals: run + 50 ms through --node, run + 300 ms for the light
   peer), and the provider's run time (receipt timings_ms.run) next to
   run's.

The load average is printed with each set of figures: on a shared or small
machine it explains much.

    bench/bench_market.py [--nodes 16] [--jobs 50] [--bid-window-ms 300]
                          [--sgemm-n auto|N[,N...]] [--reps 3]
                          [--sgemm-builtin sgemm|sgemm_gpu]
                          [--tp-nodes 8] [--tp-requesters 1,4]
                          [--tp-seconds 60] [--small-reps 10]
                          [--only match,e2e,tp,small]
"""
import argparse
import array
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def binary():
    b = os.environ.get("NIGHTSHIFT_BIN") or os.path.join(ROOT, "build",
                                                         "nightshift")
    if not os.access(b, os.X_OK):
        sys.exit(f"bench_market: no nightshift binary at {b} (build it or "
                 f"set NIGHTSHIFT_BIN)")
    return b


BIN = binary()


def loadavg():
    a, b, c = os.getloadavg()
    return f"load average {a:.2f} {b:.2f} {c:.2f} ({os.cpu_count()} CPUs)"


def pct(vals, q):
    s = sorted(vals)
    if not s:
        return float("nan")
    k = min(len(s) - 1, int(round(q * (len(s) - 1))))
    return s[k]


class Testnet:
    """testnet/run.sh in a temp dir; stop.sh on exit, whatever happens."""

    def __init__(self, workdir, n, requesters=1):
        self.dir = os.path.join(workdir, f"tn{n}x{requesters}")
        self.n = n
        self.requesters = requesters
        env = {**os.environ, "NIGHTSHIFT_BIN": BIN}
        t0 = time.monotonic()
        r = subprocess.run([os.path.join(ROOT, "testnet", "run.sh"),
                            "-n", str(n), "-d", self.dir, "-i", "1000",
                            "-t", "120", "-r", str(requesters)],
                           capture_output=True, text=True, env=env,
                           stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            self.stop()
            raise RuntimeError(f"run.sh -n {n} failed:\n{r.stdout}\n"
                               f"{r.stderr}")
        with open(os.path.join(self.dir, "bootstrap")) as f:
            self.bootstrap = f.read().strip()
        print(f"  testnet of {n} nodes, {requesters} requester(s) up in "
              f"{time.monotonic() - t0:.1f}s", flush=True)

    def requester(self, i):
        return os.path.join(self.dir, "requester" + (str(i) if i else ""))

    def stop(self):
        if os.path.exists(os.path.join(self.dir, "pids")):
            subprocess.run([os.path.join(ROOT, "testnet", "stop.sh"), "-d",
                            self.dir], capture_output=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


def write_floats(path, n, seed):
    rng = random.Random(seed)
    a = array.array("f", (rng.uniform(-1, 1) for _ in range(n)))
    with open(path, "wb") as f:
        a.tofile(f)


SGEMM = "sgemm"  # --sgemm-builtin: sgemm_gpu on GPUs (the same bytes)


def sgemm_flags(n, a, b, out):
    return ["--builtin", SGEMM, "--global", f"{n // 64},{n}",
            "--local", "1,64", "--arg", f"in:{a}", "--arg", f"in:{b}",
            "--arg", f"out:{n * n * 4}:{out}", "--arg", f"u32:{n}",
            "--arg", f"u32:{n}", "--arg", f"u32:{n}"]


def submit(tn, req, flags, *extra, node=None):
    """submit as requester req's light peer, or through the node running
    on datadir `node` when given."""
    how = (["--node", node] if node else
           ["--datadir", tn.requester(req), "--bootstrap", tn.bootstrap])
    t0 = time.monotonic()
    r = subprocess.run([BIN, "submit", *how, *flags, "--max-price",
                        "100", "--json", *extra], capture_output=True,
                       text=True, stdin=subprocess.DEVNULL)
    wall = (time.monotonic() - t0) * 1000
    try:
        doc = json.loads(r.stdout)
    except json.JSONDecodeError:
        doc = {"status": "failed", "error": (r.stderr.strip() or
                                             f"exit {r.returncode}")}
    doc["wall_ms"] = wall
    doc["rc"] = r.returncode
    return doc


def local_run(flags):
    t0 = time.monotonic()
    r = subprocess.run([BIN, "run", *flags, "--json"], capture_output=True,
                       text=True, stdin=subprocess.DEVNULL)
    wall = (time.monotonic() - t0) * 1000
    if r.returncode != 0:
        raise RuntimeError(f"nightshift run failed: {r.stderr.strip()}")
    doc = json.loads(r.stdout)
    doc["wall_ms"] = wall
    return doc


def medians(docs, keys=("match", "run", "verify", "total")):
    """The median of each receipt timing over docs."""
    return {k: statistics.median(d["timings_ms"][k] for d in docs)
            for k in keys}


def join_ms(doc):
    """total - match - run - verify: the light peer's join before the
    auction plus the output fetch (not separate in the receipt)."""
    t = doc.get("timings_ms", {})
    return t.get("total", 0) - t.get("match", 0) - t.get("run", 0) - \
        t.get("verify", 0)


# ---- 1. match latency ------------------------------------------------------------

def bench_match(work, args):
    print(f"\n== match latency: {args.nodes} nodes, {args.jobs} jobs, bid "
          f"window {args.bid_window_ms} ms ==", flush=True)
    a, b = os.path.join(work, "a256.bin"), os.path.join(work, "b256.bin")
    write_floats(a, 65536, 1)
    write_floats(b, 65536, 2)
    out = os.path.join(work, "c256.bin")
    flags = sgemm_flags(256, a, b, out)
    with Testnet(work, args.nodes) as tn:
        docs, failed = [], []
        for i in range(args.jobs):
            d = submit(tn, 0, flags, "--bid-window-ms",
                       str(args.bid_window_ms))
            (docs if d.get("status") == "settled" and d.get("rounds") == 1
             else failed).append(d)
            if (i + 1) % 10 == 0:
                print(f"  {i + 1}/{args.jobs} jobs", flush=True)
        la = loadavg()
    if failed:
        print(f"  {len(failed)} job(s) failed or needed more than one round "
              f"(left out): {failed[0].get('error') or failed[0]}")
    if not docs:
        print("  no job settled: no figures")
        return
    match = [d["timings_ms"]["match"] for d in docs]
    over = [m - args.bid_window_ms for m in match]
    joins = [join_ms(d) for d in docs]
    totals = [d["timings_ms"]["total"] for d in docs]
    print(f"  jobs settled in one round: {len(docs)}")
    print(f"  bid window           {args.bid_window_ms} ms")
    print(f"  match (incl. window) p50 {pct(match, .5):.0f} ms   p99 "
          f"{pct(match, .99):.0f} ms   max {max(match):.0f} ms")
    print(f"  match - window       p50 {pct(over, .5):.0f} ms   p99 "
          f"{pct(over, .99):.0f} ms   (goal: < 50 ms)")
    print(f"  join + output fetch  p50 {pct(joins, .5):.0f} ms   p99 "
          f"{pct(joins, .99):.0f} ms")
    print(f"  submit total         p50 {pct(totals, .5):.0f} ms   p99 "
          f"{pct(totals, .99):.0f} ms")
    print(f"  {la}", flush=True)


# ---- 2. end to end -----------------------------------------------------------------

def bench_e2e(work, args):
    print("\n== end to end: SGEMM of about a second of compute ==",
          flush=True)
    # Size: the first N (multiple of 64) whose local kernel time is >= 0.7 s.
    if args.sgemm_n != "auto":
        for n in args.sgemm_n.split(","):
            bench_e2e_n(work, args, int(n))
        return
    chosen = None
    for n in [512, 1024, 1536, 2048, 3072, 4096]:
        a = os.path.join(work, f"a{n}.bin")
        b = os.path.join(work, f"b{n}.bin")
        write_floats(a, n * n, 3)
        write_floats(b, n * n, 4)
        d = local_run(sgemm_flags(n, a, b, os.path.join(work, f"cal{n}.bin")))
        kernel = d["timings_ms"]["run"]
        print(f"  sgemm {n}: kernel {kernel:.0f} ms locally", flush=True)
        chosen = n
        if kernel >= 700:
            break
    bench_e2e_n(work, args, chosen)


def bench_e2e_n(work, args, n):
    a = os.path.join(work, f"a{n}.bin")
    b = os.path.join(work, f"b{n}.bin")
    if not os.path.exists(a):
        write_floats(a, n * n, 3)
        write_floats(b, n * n, 4)
    local_out = os.path.join(work, f"local{n}.bin")
    net_out = os.path.join(work, f"net{n}.bin")
    runs, subs, via_node = [], [], []
    with Testnet(work, 4) as tn:
        # each rep: the reference, then the light peer, then the same
        # through a running node (no join per job), one after the other,
        # so that the machine's other load weighs on all three alike
        node0 = os.path.join(tn.dir, "node0")
        for _ in range(args.reps):
            runs.append(local_run(sgemm_flags(n, a, b, local_out)))
            subs.append(submit(tn, 0, sgemm_flags(n, a, b, net_out)))
            via_node.append(submit(tn, 0, sgemm_flags(n, a, b, net_out),
                                   node=node0))
        la = loadavg()
    ok = [s for s in subs if s.get("status") == "settled"]
    if not ok:
        print(f"  no submit settled: {subs[0].get('error')}")
        return
    with open(local_out, "rb") as f1, open(net_out, "rb") as f2:
        same = f1.read() == f2.read()
    run_wall = statistics.median(r["wall_ms"] for r in runs)
    run_kernel = statistics.median(r["timings_ms"]["run"] for r in runs)
    sub_wall = statistics.median(s["wall_ms"] for s in ok)
    sub_total = statistics.median(s["timings_ms"]["total"] for s in ok)
    no_join = statistics.median(s["timings_ms"]["total"] - join_ms(s)
                                for s in ok)
    t = medians(ok)
    goal = 1.1 * run_wall + 100
    print(f"  sgemm {n}x{n}, median of {len(ok)} submit(s) and "
          f"{len(runs)} local run(s); outputs {'equal' if same else 'DIFFER'}")
    print(f"  nightshift run       wall {run_wall:.0f} ms (kernel "
          f"{run_kernel:.0f} ms)")
    print(f"  nightshift submit    wall {sub_wall:.0f} ms (receipt total "
          f"{sub_total:.0f}: match {t['match']:.0f}, run {t['run']:.0f}, "
          f"verify {t['verify']:.0f}, join + output fetch "
          f"{sub_total - no_join:.0f})")
    print(f"  ratio submit/run     {sub_wall / run_wall:.2f}x wall; "
          f"{no_join / run_wall:.2f}x without join + fetch "
          f"({no_join:.0f} ms); goal <= 1.1x + 100 ms = {goal:.0f} ms")
    ok_n = [s for s in via_node if s.get("status") == "settled"]
    if ok_n:
        w = statistics.median(s["wall_ms"] for s in ok_n)
        tn_ = medians(ok_n)
        pair = statistics.median(s["wall_ms"] / r["wall_ms"]
                                 for s, r in zip(via_node, runs)
                                 if s.get("status") == "settled")
        print(f"  submit --node        wall {w:.0f} ms (receipt total "
              f"{tn_['total']:.0f}: match {tn_['match']:.0f}, run "
              f"{tn_['run']:.0f}, verify {tn_['verify']:.0f}); ratio "
              f"{w / run_wall:.2f}x run's wall, {pair:.2f}x the median of "
              f"each rep's pair (goal <= 1.2x)")
    else:
        print(f"  submit --node        no job settled: "
              f"{via_node[0].get('error')}")
    print(f"  {la}", flush=True)


# ---- 3. throughput -------------------------------------------------------------------

def bench_tp(work, args):
    conc = [int(c) for c in args.tp_requesters.split(",")]
    a, b = os.path.join(work, "a256.bin"), os.path.join(work, "b256.bin")
    if not os.path.exists(a):
        write_floats(a, 65536, 1)
        write_floats(b, 65536, 2)
    for r in conc:
        print(f"\n== throughput: {args.tp_nodes} providers, {r} "
              f"requester(s) at once, {args.tp_seconds} s ==", flush=True)
        with Testnet(work, args.tp_nodes, requesters=r) as tn:
            results = []
            lock = threading.Lock()
            stop_at = time.monotonic() + args.tp_seconds

            def loop(k):
                out = os.path.join(work, f"tp{r}_{k}.bin")
                while time.monotonic() < stop_at:
                    d = submit(tn, k, sgemm_flags(256, a, b, out))
                    d["done_at"] = time.monotonic()
                    with lock:
                        results.append(d)

            t0 = time.monotonic()
            threads = [threading.Thread(target=loop, args=(k,))
                       for k in range(r)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            elapsed = time.monotonic() - t0
            la = loadavg()
            providers = {}
            for i in range(tn.n):
                st = subprocess.run([BIN, "status", "--datadir",
                                     os.path.join(tn.dir, f"node{i}"),
                                     "--json"], capture_output=True,
                                    text=True)
                if st.returncode == 0:
                    providers[i] = json.loads(st.stdout)["provider"]["results"]
        ok = [d for d in results if d.get("status") == "settled"]
        bad = [d for d in results if d.get("status") != "settled"]
        print(f"  settled {len(ok)} job(s), failed {len(bad)}, in "
              f"{elapsed:.1f} s (the last ones ran past the "
              f"{args.tp_seconds} s mark)")
        print(f"  jobs per minute      {len(ok) / elapsed * 60:.1f}")
        if ok:
            tot = [d["timings_ms"]["total"] for d in ok]
            print(f"  submit total         p50 {pct(tot, .5):.0f} ms   p99 "
                  f"{pct(tot, .99):.0f} ms   (join + fetch p50 "
                  f"{pct([join_ms(d) for d in ok], .5):.0f} ms)")
        counts = sorted(providers.values(), reverse=True)
        print(f"  results per provider {counts}")
        if counts and sum(counts):
            mean = sum(counts) / len(counts)
            print(f"  spread               max/mean {counts[0] / mean:.2f} "
                  f"(max {counts[0]}, mean {mean:.1f} over {len(counts)} "
                  f"providers; goal <= 2.00)")
        if bad:
            kinds = {}
            for d in bad:
                e = (d.get("error") or "?").split(":")[0].split(" (")[0]
                kinds[e] = kinds.get(e, 0) + 1
            print(f"  failures by error    {kinds}")
            print(f"  first failure: {bad[0].get('error')}")
        print(f"  {la}", flush=True)


# ---- 4. small jobs ---------------------------------------------------------------------

def bench_small(work, args):
    print("\n== small jobs: 1,024-float vector add ==", flush=True)
    n = 1024
    a, b = os.path.join(work, "va.bin"), os.path.join(work, "vb.bin")
    write_floats(a, n, 5)
    write_floats(b, n, 6)
    out = os.path.join(work, "vsum.bin")
    flags = ["--builtin", "vector_add", "--global", str(n), "--arg",
             f"in:{a}", "--arg", f"in:{b}", "--arg", f"out:{4 * n}:{out}",
             "--arg", f"u32:{n}"]
    with Testnet(work, 4) as tn:
        node0 = os.path.join(tn.dir, "node0")
        # warm-up: a requester's first job with each provider pays that
        # provider's hardware challenge (once a day), not measured here;
        # jobs spread over the providers, so a few jobs each way
        for _ in range(3 * tn.n):
            for node in (node0, None):
                submit(tn, 0, flags, "--bid-window-ms", "20", node=node)
        runs, via_node, light = [], [], []
        for _ in range(args.small_reps):
            runs.append(local_run(flags))
            via_node.append(submit(tn, 0, flags, "--bid-window-ms", "20",
                                   node=node0))
            light.append(submit(tn, 0, flags, "--bid-window-ms", "20"))
        la = loadavg()
    ok_n = [d for d in via_node if d.get("status") == "settled"]
    ok_l = [d for d in light if d.get("status") == "settled"]
    run_wall = statistics.median(r["wall_ms"] for r in runs)
    run_kernel = statistics.median(r["timings_ms"]["run"] for r in runs)
    print(f"  nightshift run          wall {run_wall:.0f} ms (median of "
          f"{len(runs)}; kernel {run_kernel:.2f} ms)")
    for name, ok, allow in (("submit --node", ok_n, 50),
                            ("submit (light peer)", ok_l, 300)):
        if not ok:
            print(f"  {name:22}  no job settled: "
                  f"{(via_node if allow == 50 else light)[0].get('error')}")
            continue
        w = statistics.median(d["wall_ms"] for d in ok)
        parts = medians(ok)
        prov = parts["run"]
        print(f"  {name:22}  wall {w:.0f} ms (median of {len(ok)}): run + "
              f"{w - run_wall:.0f} ms; goal run + {allow} ms; provider run "
              f"{prov:.0f} ms; receipt median match {parts['match']:.0f}, "
              f"verify {parts['verify']:.0f}, total {parts['total']:.0f} ms")
    print(f"  {la}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--jobs", type=int, default=50)
    ap.add_argument("--bid-window-ms", type=int, default=300)
    ap.add_argument("--sgemm-n", default="auto",
                    help="auto, N or N1,N2,...: the end-to-end sizes")
    ap.add_argument("--sgemm-builtin", default="sgemm",
                    help="sgemm (tuned for CPUs) or sgemm_gpu")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tp-nodes", type=int, default=8)
    ap.add_argument("--tp-requesters", default="1,4,16")
    ap.add_argument("--small-reps", type=int, default=10)
    ap.add_argument("--tp-seconds", type=int, default=60)
    ap.add_argument("--only", default="match,e2e,tp,small")
    args = ap.parse_args()
    global SGEMM
    SGEMM = args.sgemm_builtin
    parts = set(args.only.split(","))
    work = tempfile.mkdtemp(prefix="bench-market-")
    print(f"bench_market: {BIN}; work in {work}; {loadavg()}", flush=True)
    try:
        if "match" in parts:
            bench_match(work, args)
        if "e2e" in parts:
            bench_e2e(work, args)
        if "tp" in parts:
            bench_tp(work, args)
        if "small" in parts:
            bench_small(work, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
