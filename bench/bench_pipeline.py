#!/usr/bin/env python3
"""Pipeline benchmark on a local testnet (testnet/run.sh): figures only,
nothing here passes or fails on time.

A two-layer perceptron as a job file of two steps (a dense layer with ReLU
into an intermediate h, then a dense layer into y) over R rows of 64
inputs, 128 hidden units and 10 outputs, with the same weights for every
run, each submitted through a running node (`submit --node`) in three
forms, alternating, next to `nightshift run --job` of the same file in the
same run (after a warm-up round of each form, not counted):

  - one job: the pipeline as one award, both steps on one provider and
    each step checked (the default);
  - steps apart (`submit --steps-apart`): each step a job of its own, its
    own auction and round trip, h sent back to the requester and then to
    the next step's provider (unless that one holds it);
  - the fused form: one kernel doing both layers (no intermediate at all),
    the lower bound of what a pipeline can cost.

Printed: medians of the wall time of each form and its ratio to `run
--job`, the receipt's match, run and verify times, and the verification's
share of the run time. All outputs must equal run's (checked).

    bench/bench_pipeline.py [--rows 100000] [--reps 3] [--nodes 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_market import BIN, Testnet, loadavg, write_floats  # noqa: E402

DIN, DH, DOUT = 64, 128, 10

KERNELS = """
#pragma OPENCL FP_CONTRACT OFF
kernel void dense(global const float *x, global const float *w,
                  global const float *b, global float *y, uint din,
                  uint dout, uint relu)
{
    size_t r = get_global_id(0), j = get_global_id(1);
    float acc = b[j];
    for (uint k = 0; k < din; k++)
        acc += x[r * din + k] * w[k * dout + j];
    y[r * dout + j] = relu && acc < 0.0f ? 0.0f : acc;
}

kernel void fused(global const float *x, global const float *w1,
                  global const float *b1, global const float *w2,
                  global const float *b2, global float *y, uint din,
                  uint dh, uint dout)
{
    size_t r = get_global_id(0), o = get_global_id(1);
    float acc2 = b2[o];
    for (uint j = 0; j < dh; j++) {
        float acc = b1[j];
        for (uint k = 0; k < din; k++)
            acc += x[r * din + k] * w1[k * dh + j];
        acc2 += (acc < 0.0f ? 0.0f : acc) * w2[j * dout + o];
    }
    y[r * dout + o] = acc2;
}
"""


def job_two_steps(rows, out):
    return {
        "source": "k.cl",
        "buffers": {"x": {"file": "x.bin"}, "w1": {"file": "w1.bin"},
                    "b1": {"file": "b1.bin"}, "w2": {"file": "w2.bin"},
                    "b2": {"file": "b2.bin"},
                    "h": {"bytes": 4 * rows * DH},
                    "y": {"bytes": 4 * rows * DOUT, "out": out}},
        "steps": [
            {"entry": "dense", "global": [rows, DH],
             "args": ["x", "w1", "b1", "h", {"u32": DIN}, {"u32": DH},
                      {"u32": 1}]},
            {"entry": "dense", "global": [rows, DOUT],
             "args": ["h", "w2", "b2", "y", {"u32": DH}, {"u32": DOUT},
                      {"u32": 0}]}],
        "tolerance": "abs:1e-3", "work": 2 * rows * DH * (DIN + DOUT)}


def job_fused(rows, out):
    return {
        "source": "k.cl",
        "buffers": {"x": {"file": "x.bin"}, "w1": {"file": "w1.bin"},
                    "b1": {"file": "b1.bin"}, "w2": {"file": "w2.bin"},
                    "b2": {"file": "b2.bin"},
                    "y": {"bytes": 4 * rows * DOUT, "out": out}},
        "steps": [
            {"entry": "fused", "global": [rows, DOUT],
             "args": ["x", "w1", "b1", "w2", "b2", "y", {"u32": DIN},
                      {"u32": DH}, {"u32": DOUT}]}],
        "tolerance": "abs:1e-3", "work": 2 * rows * DH * (DIN + DOUT)}


def submit(node, path, *extra):
    t0 = time.monotonic()
    r = subprocess.run([BIN, "submit", "--node", node, "--job", path,
                        "--max-price", "100", "--deadline-s", "600",
                        "--json", *extra], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    wall = (time.monotonic() - t0) * 1000
    try:
        doc = json.loads(r.stdout)
    except json.JSONDecodeError:
        return {"status": "failed", "error": r.stderr.strip()[-400:],
                "wall_ms": wall}
    docs = doc if isinstance(doc, list) else [doc]
    ok = all(d.get("status") == "settled" for d in docs)
    t = {k: sum(d["timings_ms"][k] for d in docs)
         for k in ("match", "run", "verify", "total")}
    return {"status": "settled" if ok else "failed", "wall_ms": wall,
            "timings_ms": t, "checks": sum(d.get("checks", 0) for d in docs),
            "jobs": len(docs), "error": r.stderr.strip()[-400:]}


def run_local(path):
    t0 = time.monotonic()
    r = subprocess.run([BIN, "run", "--job", path, "--json"],
                       capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise RuntimeError(f"run --job failed: {r.stderr.strip()}")
    return (time.monotonic() - t0) * 1000


def read(path):
    with open(path, "rb") as f:
        return f.read()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=100000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--nodes", type=int, default=3)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="bench_pipeline-")
    rows = args.rows
    with open(os.path.join(work, "k.cl"), "w") as f:
        f.write(KERNELS)
    for name, n, seed in (("x", rows * DIN, 1), ("w1", DIN * DH, 2),
                          ("b1", DH, 3), ("w2", DH * DOUT, 4),
                          ("b2", DOUT, 5)):
        write_floats(os.path.join(work, f"{name}.bin"), n, seed)
    forms = {"two": job_two_steps, "fused": job_fused}
    for form, make in forms.items():
        for tag in ("local", "net"):
            with open(os.path.join(work, f"{form}_{tag}.json"), "w") as f:
                json.dump(make(rows, f"y_{form}_{tag}.bin"), f)
    print(f"== pipeline: 2-layer perceptron {DIN}-{DH}-{DOUT}, {rows} rows "
          f"(h {4 * rows * DH / 2**20:.1f} MiB, y "
          f"{4 * rows * DOUT / 2**20:.1f} MiB), {args.nodes} providers",
          flush=True)
    res = {"run two": [], "run fused": [], "one job": [], "steps apart": [],
           "fused": []}
    with Testnet(work, args.nodes) as tn:
        node = os.path.join(tn.dir, "node0")
        # warm-up, not counted: the providers' hardware challenges and the
        # programs' first builds (on every node) happen here
        two = os.path.join(work, "two_net.json")
        for extra in ((), ("--steps-apart",)):
            submit(node, two, *extra)
        submit(node, os.path.join(work, "fused_net.json"))
        for rep in range(args.reps):
            res["run two"].append(run_local(os.path.join(work,
                                                         "two_local.json")))
            res["run fused"].append(run_local(os.path.join(
                work, "fused_local.json")))
            two = os.path.join(work, "two_net.json")
            res["one job"].append(submit(node, two))
            res["steps apart"].append(submit(node, two, "--steps-apart"))
            res["fused"].append(submit(node, os.path.join(work,
                                                          "fused_net.json")))
        la = loadavg()
    same = (read(os.path.join(work, "y_two_net.bin")) ==
            read(os.path.join(work, "y_two_local.bin")))
    same_f = (read(os.path.join(work, "y_fused_net.bin")) ==
              read(os.path.join(work, "y_fused_local.bin")))
    run_two = statistics.median(res["run two"])
    run_fused = statistics.median(res["run fused"])
    print(f"  nightshift run --job: two steps {run_two:.0f} ms, fused "
          f"{run_fused:.0f} ms (process wall, medians of {args.reps})")
    for form, ref in (("one job", run_two), ("steps apart", run_two),
                      ("fused", run_fused)):
        ok = [d for d in res[form] if d["status"] == "settled"]
        if not ok:
            print(f"  {form:12s} no job settled: {res[form][0]['error']}")
            continue
        w = statistics.median(d["wall_ms"] for d in ok)
        t = {k: statistics.median(d["timings_ms"][k] for d in ok)
             for k in ("match", "run", "verify", "total")}
        print(f"  {form:12s} wall {w:6.0f} ms = {w / ref:5.2f}x run's; "
              f"{ok[0]['jobs']} job(s), match {t['match']:.0f}, provider run "
              f"{t['run']:.0f}, verify {t['verify']:.0f} ms "
              f"({t['verify'] / max(1, t['run']):.1%} of the run; "
              f"{ok[0]['checks']} units checked)")
    print(f"  outputs equal run --job's: two steps {same}, fused {same_f}")
    print(f"  {la}", flush=True)
    subprocess.run(["rm", "-rf", work])
    return 0 if same and same_f else 1


if __name__ == "__main__":
    sys.exit(main())
