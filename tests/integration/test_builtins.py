"""The built-ins a data scientist expects (docs/JOBS.md): batched SGEMM,
softmax and top-k over rows, reductions (sum, max) and a prefix sum, the
last three as pipelines of job-file steps.

Each job is a job file. `nightshift run --job` must give what Python
computes here (exactly for top-k and max, within float rounding for the
others); then every job settles through a testnet of 3 providers with
nobody slashed, and its output files equal `run`'s byte for byte (the
providers and the requester share PoCL, so the bytes are the same). Also:
`run --builtin NAME --help` prints each one's arguments.
"""
import json
import math
import os
import random
import struct

import nstest
from nstest import check, check_eq, log


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def floats(n, seed, lo=-1.0, hi=1.0):
    r = random.Random(seed)
    return [f32(lo + (hi - lo) * r.random()) for _ in range(n)]


def pack(vals, fmt="f"):
    return struct.pack(f"<{len(vals)}{fmt}", *vals)


def unpack(data, fmt="f"):
    return list(struct.unpack(f"<{len(data) // 4}{fmt}", data))


def close(a, b, rel, what):
    check_eq(len(a), len(b), f"{what}: length")
    for i, (x, y) in enumerate(zip(a, b)):
        if abs(x - y) > rel * max(1.0, abs(y)):
            raise nstest.TestFailure(f"{what}[{i}] = {x}, want {y}")


ROWS, COLS, K = 96, 40, 5
N = 5000           # reduction and prefix-sum input
L = 64             # their work-group size
G = (N + L - 1) // L
B, M = 3, 64       # batched SGEMM: 3 products of 64 x 64


def jobs(d):
    """name -> (job file dict, outputs to compare, check(outputs))."""
    x = floats(ROWS * COLS, 1, -4, 4)
    v = floats(N, 2, 0, 1)
    a = floats(B * M * M, 3)
    b = floats(B * M * M, 4)
    files = {"x.bin": pack(x), "v.bin": pack(v), "a.bin": pack(a),
             "b.bin": pack(b)}
    for name, data in files.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)

    def softmax_ref(o):
        y = unpack(o["sm.bin"])
        want = []
        for r in range(ROWS):
            row = x[r * COLS:(r + 1) * COLS]
            m = max(row)
            e = [math.exp(t - m) for t in row]
            want += [t / sum(e) for t in e]
        close(y, want, 1e-5, "softmax")

    def topk_ref(o):
        val, idx = unpack(o["tv.bin"]), unpack(o["ti.bin"], "I")
        for r in range(ROWS):
            row = x[r * COLS:(r + 1) * COLS]
            order = sorted(range(COLS), key=lambda j: (-row[j], j))[:K]
            check_eq(idx[r * K:(r + 1) * K], order, f"topk row {r} indices")
            check_eq(val[r * K:(r + 1) * K], [row[j] for j in order],
                     f"topk row {r} values")

    def sum_ref(o):
        close(unpack(o["sum.bin"]), [sum(v)], 1e-5, "sum")

    def max_ref(o):
        check_eq(unpack(o["max.bin"]), [max(v)], "max")

    def cumsum_ref(o):
        want, acc = [], 0.0
        for t in v:
            acc += t
            want.append(acc)
        close(unpack(o["cumsum.bin"])[:N], want, 1e-4, "prefix sum")
        close(unpack(o["total.bin"])[-1:], [acc], 1e-4, "total")

    def bgemm_ref(o):
        c = unpack(o["c.bin"])
        for m in range(B):
            for i in range(0, M, 7):
                for j in range(0, M, 5):
                    want = sum(a[m * M * M + i * M + k] *
                               b[m * M * M + k * M + j] for k in range(M))
                    got = c[m * M * M + i * M + j]
                    if abs(got - want) > 1e-4 * max(1.0, abs(want)):
                        raise nstest.TestFailure(
                            f"sgemm_batched C[{m}][{i}][{j}] = {got}, "
                            f"want {want}")

    def reduce(entry, out, neutral_ok=True):
        return {
            "builtin": entry,
            "buffers": {"v": {"file": "v.bin"}, "p": {"bytes": 4 * G},
                        "r": {"bytes": 4, "out": out}},
            "steps": [
                {"global": [G * L], "local": [L],
                 "args": ["v", "p", {"u32": N}, {"local": 4 * L}]},
                {"global": [128], "local": [128],
                 "args": ["p", "r", {"u32": G}, {"local": 4 * 128}]}]}
    return {
        "softmax": ({"builtin": "softmax",
                     "buffers": {"x": {"file": "x.bin"},
                                 "y": {"bytes": 4 * ROWS * COLS,
                                       "out": "sm.bin"}},
                     "steps": [{"global": [ROWS],
                                "args": ["x", "y", {"u32": COLS},
                                         {"u32": ROWS}]}],
                     "tolerance": "abs:1e-6"},
                    ["sm.bin"], softmax_ref),
        "topk": ({"builtin": "topk",
                  "buffers": {"x": {"file": "x.bin"},
                              "v": {"bytes": 4 * ROWS * K, "out": "tv.bin"},
                              "i": {"bytes": 4 * ROWS * K, "out": "ti.bin"}},
                  "steps": [{"global": [ROWS],
                             "args": ["x", "v", "i", {"u32": COLS},
                                      {"u32": K}, {"u32": ROWS}]}]},
                 ["tv.bin", "ti.bin"], topk_ref),
        "reduce_sum": (reduce("reduce_sum", "sum.bin"), ["sum.bin"], sum_ref),
        "reduce_max": (reduce("reduce_max", "max.bin"), ["max.bin"], max_ref),
        "prefix_sum": ({
            "builtin": "prefix_sum",
            "buffers": {"v": {"file": "v.bin"},
                        "y": {"bytes": 4 * G * L}, "s": {"bytes": 4 * 128},
                        "o": {"bytes": 4 * 128},
                        "t": {"bytes": 4, "out": "total.bin"},
                        "z": {"bytes": 4 * G * L, "out": "cumsum.bin"}},
            "steps": [
                {"global": [G * L], "local": [L],
                 "args": ["v", "y", "s", {"u32": N}, {"local": 4 * L}]},
                {"global": [128], "local": [128],
                 "args": ["s", "o", "t", {"u32": G}, {"local": 4 * 128}]},
                {"entry": "prefix_sum_add", "global": [G * L], "local": [L],
                 "args": ["y", "o", "z", {"u32": N}]}]},
            ["cumsum.bin", "total.bin"], cumsum_ref),
        "sgemm_batched": ({
            "builtin": "sgemm",
            "buffers": {"a": {"file": "a.bin"}, "b": {"file": "b.bin"},
                        "c": {"bytes": 4 * B * M * M, "out": "c.bin"}},
            "steps": [{"entry": "sgemm_batched", "global": [M // 64, M, B],
                       "local": [1, 16, 1],
                       "args": ["a", "b", "c", {"u32": M}, {"u32": M},
                                {"u32": M}]}],
            "tolerance": "abs:1e-4"},
            ["c.bin"], bgemm_ref),
    }


def outputs(d, names):
    res = {}
    for n in names:
        with open(os.path.join(d, n), "rb") as f:
            res[n] = f.read()
    return res


def test(net):
    for name in ("softmax", "topk", "reduce_sum", "reduce_max",
                 "prefix_sum", "sgemm"):
        out = nstest.cli_ok("run", "--builtin", name, "--help")
        check("Item" in out or "item" in out,
              f"run --builtin {name} --help says what a unit owns")
    d = net.dir
    table = jobs(d)
    local = {}
    for name, (job, outs, ref) in table.items():
        path = os.path.join(d, f"{name}.json")
        with open(path, "w") as f:
            json.dump(job, f)
        nstest.cli_ok("run", "--job", path, timeout=120)
        local[name] = outputs(d, outs)
        ref(local[name])
        log(f"run --job {name}: matches the reference")

    provs = [net.node(f"p{i}").init() for i in range(3)]
    req = net.node("req").init()
    g = net.genesis([*provs, req])
    for n in (*provs, req):
        nstest.cli_ok("init", "--datadir", n.datadir, "--genesis", g)
    provs[0].start(extra=("--set", "node.stake=100000"))
    for p in provs[1:]:
        p.start(bootstrap=[provs[0]], extra=("--set", "node.stake=100000"))
    net.wait_mesh(provs)
    for name, (job, outs, ref) in table.items():
        for o in outs:
            os.unlink(os.path.join(d, o))
        r = nstest.cli("submit", "--datadir", req.datadir, "--bootstrap",
                       provs[0].addr, "--job", os.path.join(d, f"{name}.json"),
                       "--max-price", "10", "--json", timeout=240)
        check(r.returncode == 0, f"submit {name} failed: "
              f"{r.stderr.strip()[-800:]}")
        docs = json.loads(r.stdout)
        docs = docs if isinstance(docs, list) else [docs]
        for doc in docs:
            check_eq(doc["status"], "settled", f"{name}: a step's status")
            check_eq(doc["slashed"], 0, f"{name}: an honest provider slashed")
        check(outputs(d, outs) == local[name],
              f"{name}: the network's outputs differ from run's")
        log(f"submit {name}: {len(docs)} step(s) settled, outputs equal run's")


nstest.main(test, "builtins")
