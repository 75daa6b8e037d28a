#!/usr/bin/env python3
"""Issue 24's benchmark: what the sandbox costs, in one run next to the
build before it (a requester that ran the pre-flight in its own process).
Figures only: nothing here passes or fails on time.

1. The pre-flight (timing and sampled units) of SGEMM N and of a 1,024-
   float vector add, in-process next to a warm sandboxed worker
   (build/bench/bench_sandbox, medians).
2. End to end, each binary in turn on the same machine: bench_market.py's
   SGEMM N and small-job tables (`submit --node` and the light peer against
   `nightshift run`), for --base BIN (the build before; skipped without
   it) and for this build. The goal: the worker costs at most 5 % over the
   base's figures.
3. The closing rule (docs/PROTOCOL.md, "Closing"): the time from a job's
   deadline to its provider's collateral unlocked on every node, for a
   requester killed after the accept, after the RESULT, and after the
   RESULT and then banned for a fork (tests/integration/
   test_close_gone.py's scenarios on a 3-node testnet with a 3 s window:
   the figure is the window plus the margin, the tick and gossip).

    bench/bench_sandbox.py [--base BIN] [--sgemm-n 2048] [--reps 3]
                           [--small-reps 10]
"""
import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", help="the nightshift binary to compare with")
    ap.add_argument("--sgemm-n", default="2048")
    ap.add_argument("--reps", default="3")
    ap.add_argument("--small-reps", default="10")
    ap.add_argument("--no-close", action="store_true",
                    help="skip part 3 (about a minute)")
    args = ap.parse_args()
    here = os.path.join(ROOT, "build", "nightshift")
    tool = os.path.join(ROOT, "build", "bench", "bench_sandbox")
    for path in (here, tool):
        if not os.access(path, os.X_OK):
            sys.exit(f"bench_sandbox: no {path} (build with ./setup.sh)")
    print("== 1. the pre-flight, in-process and in the sandbox", flush=True)
    subprocess.run([tool, args.sgemm_n, "7"], check=False)
    runs = [("base " + args.base, args.base)] if args.base else []
    runs.append(("this build", here))
    for name, binary in runs:
        print(f"\n== 2. end to end: {name}", flush=True)
        env = {**os.environ, "NIGHTSHIFT_BIN": binary}
        # a base build in a checkout of its own (DIR/build/nightshift)
        # runs with that checkout's bench and testnet scripts: this one's
        # pass flags an older binary does not know
        tree = os.path.dirname(os.path.dirname(os.path.abspath(binary)))
        if binary == here or not os.path.isfile(
                os.path.join(tree, "bench", "bench_market.py")):
            tree = ROOT
        subprocess.run([sys.executable,
                        os.path.join(tree, "bench", "bench_market.py"),
                        "--only", "e2e,small", "--sgemm-n", args.sgemm_n,
                        "--reps", args.reps, "--small-reps",
                        args.small_reps], env=env, check=False)
    if not args.no_close:
        print("\n== 3. the closing rule: deadline to unlocked collateral",
              flush=True)
        env = {**os.environ, "NIGHTSHIFT_BIN": here,
               "NS_FORGE_BIN": os.path.join(ROOT, "build", "tests",
                                            "integration", "ns_forge")}
        r = subprocess.run([sys.executable, os.path.join(
            ROOT, "tests", "integration", "test_close_gone.py")],
            env=env, capture_output=True, text=True, check=False)
        for line in r.stdout.splitlines():
            if "deadline to unlocked" in line or line.startswith(("PASS",
                                                                  "FAIL")):
                print("  " + line.split("] ", 1)[-1], flush=True)


if __name__ == "__main__":
    main()
