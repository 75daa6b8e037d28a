#!/usr/bin/env python3
"""The kernel corpus (tests/kernels/*.cl) end to end: every kernel gives
the Python reference's output under `nightshift run`, then settles through
a testnet with `nightshift submit` without anyone losing credits.

    test_kernel_corpus.py            every row of KERNELS
    test_kernel_corpus.py NAME...    only those rows (by name)

The corpus covers what spot checks must re-run faithfully: barriers and
__local memory (arguments and arrays declared in the kernel), every index
query in 1, 2 and 3 dimensions, scattered writes, per-group outputs, a
tiled transpose, a 2D stencil, float kernels under a tolerance, integer
kernels compared exactly, and kernels without a local size (work-item
units). A requester re-runs k random units of the job on its own device;
an honest provider must never be slashed for any of them.

For each row of KERNELS:
  1. inputs are generated (seeded, stdlib only) and the expected outputs
     computed in Python;
  2. `nightshift run --json` must produce them (exactly, or within the
     row's tolerance for float kernels);
  3. on a testnet of 3 staked providers (testnet/run.sh -n 3 -r ROWS:
     one funded requester datadir per row) `nightshift submit --json`
     must settle (status settled, no provider slashed) and its output
     files must equal the expected outputs (3 submits at a time);
  4. once the ledgers agree, every node's ledger and every requester's
     must show 0 credits burned, no SLASH entry for any corpus job, and
     be conserved.
A line per kernel gives name, run result, submit status, rounds, slashed,
time. Every row runs even when another failed (each has its own
requester: providers refuse a requester whose jobs keep failing); the
test fails at the end, naming the rows that did not pass and why.

Adding a kernel: put FILE.cl in tests/kernels/ (a comment at its top says
what it exercises and its JOB-FLAGS) and add a Kernel(...) row below:
inputs maps a name to bytes (the file NAME.bin, passed as in:NAME), args
are the --arg values with in:NAME / out:BYTES:NAME for files, and expect
takes the inputs and returns the expected bytes of each out NAME.
"""
import json
import math
import os
import random
import struct
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import nstest
from nstest import check, cli, log

KERNEL_DIR = os.path.join(nstest.REPO, "tests", "kernels")
N_PROVIDERS = 3
MAX_PRICE = 100
SUBMIT_TIMEOUT_S = 60   # submit gives up (3 rounds of slashing fit)
LEDGER_WAIT_S = 30
PARALLEL_SUBMITS = 3  # submits at once, each from its own requester


# ---- data helpers -------------------------------------------------------------

def u32s(n, seed):
    r = random.Random(seed)
    return [r.getrandbits(32) for _ in range(n)]


def pack(fmt, vals):
    return struct.pack(f"<{len(vals)}{fmt}", *vals)


def unpack(fmt, data):
    size = struct.calcsize(fmt)
    return list(struct.unpack(f"<{len(data) // size}{fmt}", data))


def f32(v):
    """v rounded to the nearest float32."""
    return struct.unpack("<f", struct.pack("<f", v))[0]


def f32s(n, seed, lo, hi):
    r = random.Random(seed)
    return [f32(lo + (hi - lo) * r.random()) for _ in range(n)]


M32 = 0xffffffff


# ---- references ---------------------------------------------------------------
# Each takes the inputs (name -> bytes) and returns name -> expected bytes.

def ref_reverse(ins, L):
    a = unpack("I", ins["a"])
    out = [a[(i // L) * L + (L - 1 - i % L)] for i in range(len(a))]
    return {"out": pack("I", out)}


def ref_group_scan(ins, L):
    a = unpack("I", ins["a"])
    out, acc = [], 0
    for i, v in enumerate(a):
        acc = v if i % L == 0 else (acc + v) & M32
        out.append(acc)
    return {"out": pack("I", out)}


def ref_index_queries(glob, loc):
    """What index_queries.cl writes for NDRange glob with local size loc,
    no global offset."""
    dims = len(glob)
    g = list(glob) + [1] * (3 - dims)
    l = list(loc) + [1] * (3 - dims)
    out = []
    for z in range(g[2]):
        for y in range(g[1]):
            for x in range(g[0]):
                gid = (x, y, z)
                rec = list(gid)
                rec += [gid[d] % l[d] for d in range(3)]
                rec += [gid[d] // l[d] for d in range(3)]
                rec += [g[d] // l[d] for d in range(3)]
                rec += g
                rec += l
                rec += [0, 0, 0]
                rec += [dims, (z * g[1] + y) * g[0] + x, 0x4e534958]
                out += rec
    return {"out": pack("I", out)}


def perm(n, seed):
    p = list(range(n))
    random.Random(seed).shuffle(p)
    return p


def ref_scatter(ins, salt):
    a, p = unpack("I", ins["a"]), unpack("I", ins["perm"])
    out = [0] * len(a)
    for i, v in enumerate(a):
        out[p[i]] = (v * 2654435761 + i * 40503 + salt) & M32
    return {"out": pack("I", out)}


def ref_group_sum(ins, L):
    a = unpack("I", ins["a"])
    return {"out": pack("Q", [sum(a[g:g + L]) for g in range(0, len(a), L)])}


def ref_histogram(ins, L):
    a = unpack("I", ins["a"])
    out = []
    for g in range(0, len(a), L):
        h = [0] * 16
        for v in a[g:g + L]:
            h[v >> 28] += 1
        out += h
    return {"out": pack("I", out)}


def ref_transpose(ins, W, H):
    a = unpack("I", ins["a"])
    return {"out": pack("I", [a[r * W + c] for c in range(W)
                              for r in range(H)])}


def ref_stencil(ins, W, H, c):
    a = unpack("i", ins["a"])
    out = []
    for y in range(H):
        for x in range(W):
            v = c * a[y * W + x]
            for nx, ny in ((x, y - 1), (x, y + 1), (x - 1, y), (x + 1, y)):
                if 0 <= nx < W and 0 <= ny < H:
                    v -= a[ny * W + nx]
            v &= M32
            out.append(v - (1 << 32) if v >= 1 << 31 else v)
    return {"out": pack("i", out)}


def ref_tile_sum(ins, W, H, LX, LY):
    a = unpack("I", ins["a"])
    out = []
    for gy in range(H // LY):
        for gx in range(W // LX):
            out.append(sum(a[(gy * LY + y) * W + gx * LX + x]
                           for y in range(LY) for x in range(LX)) & M32)
    return {"out": pack("I", out)}


def ref_expsin(ins, scale, terms):
    out = []
    for x in unpack("f", ins["a"]):
        v = f32(x * scale)
        s = 0.0
        for k in range(terms):
            s += math.exp(f32(-v * k) * 0.0625) * (1.5 + math.sin(f32(v + k)))
        out.append(f32(s))
    return {"out": pack("f", out)}


def ref_group_dot(ins, L):
    a, b = unpack("f", ins["a"]), unpack("f", ins["b"])
    prods = [f32(x * y) for x, y in zip(a, b)]
    return {"out": pack("f", [f32(math.fsum(prods[g:g + L]))
                              for g in range(0, len(prods), L)])}


def fmix(h):
    h ^= h >> 16
    h = (h * 0x85ebca6b) & M32
    h ^= h >> 13
    h = (h * 0xc2b2ae35) & M32
    h ^= h >> 16
    return h


def ref_hash(ins, seed):
    h32, h8 = [], []
    for i, v in enumerate(unpack("I", ins["a"])):
        h = fmix(v ^ (seed & M32))
        for _ in range(4):
            h = fmix((h + (seed >> 32) + i * 0x9e3779b9) & M32)
        h32.append(h)
        h8.append((h >> 24) ^ (i & 0xff))
    return {"h32": pack("I", h32), "h8": bytes(h8)}


# ---- the corpus -----------------------------------------------------------------

class Kernel:
    """One job of the corpus: a kernel file and the JOB-FLAGS it runs
    with (its file's top comment names the same flags)."""

    def __init__(self, name, file, entry, global_, args, expect, local=None,
                 inputs=None, tolerance="exact", checks=None):
        self.name = name
        self.file = file
        self.entry = entry
        self.global_ = global_
        self.local = local
        self.args = args
        self.inputs = inputs or (lambda: {})
        self.expect = expect
        self.tolerance = tolerance
        self.checks = checks

    def flags(self, files_dir):
        """JOB-FLAGS, with in:NAME / out:BYTES:NAME made into files of
        files_dir."""
        f = ["--kernel", os.path.join(KERNEL_DIR, self.file),
             "--entry", self.entry,
             "--global", ",".join(map(str, self.global_))]
        if self.local:
            # Units are work-groups whenever a local size is given;
            # --item-kind group says so on builds where it is not implied.
            f += ["--local", ",".join(map(str, self.local)),
                  "--item-kind", "group"]
        for a in self.args:
            kind, _, rest = a.partition(":")
            if kind == "in":
                a = f"in:{os.path.join(files_dir, rest + '.bin')}"
            elif kind == "out":
                size, _, name = rest.partition(":")
                a = f"out:{size}:{os.path.join(files_dir, name + '.bin')}"
            f += ["--arg", a]
        f += ["--tolerance", self.tolerance]
        if self.checks:
            f += ["--checks", str(self.checks)]
        return f

    def outputs(self):
        """[(name, bytes)] of the out arguments, in order."""
        res = []
        for a in self.args:
            if a.startswith("out:"):
                size, _, name = a[4:].partition(":")
                res.append((name, int(size)))
        return res


HASH_SEED = 0x0123456789abcdef

KERNELS = [
    Kernel("reverse_local", "reverse_local.cl", "reverse_groups", (960,),
           local=(64,),
           inputs=lambda: {"a": pack("I", u32s(960, 1))},
           args=["in:a", "out:3840:out", "local:256"],
           expect=lambda ins: ref_reverse(ins, 64)),
    Kernel("group_scan", "group_scan.cl", "group_scan", (640,), local=(128,),
           inputs=lambda: {"a": pack("I", u32s(640, 2))},
           args=["in:a", "out:2560:out"],
           expect=lambda ins: ref_group_scan(ins, 128)),
    Kernel("index_1d", "index_queries.cl", "index_queries", (96,),
           local=(32,), args=["out:9216:out"],
           expect=lambda ins: ref_index_queries((96,), (32,))),
    Kernel("index_2d", "index_queries.cl", "index_queries", (12, 10),
           local=(4, 5), args=["out:11520:out"],
           expect=lambda ins: ref_index_queries((12, 10), (4, 5))),
    Kernel("index_3d", "index_queries.cl", "index_queries", (8, 6, 4),
           local=(2, 3, 2), args=["out:18432:out"],
           expect=lambda ins: ref_index_queries((8, 6, 4), (2, 3, 2))),
    Kernel("scatter", "scatter.cl", "scatter", (1000,), local=(40,),
           inputs=lambda: {"a": pack("I", u32s(1000, 3)),
                           "perm": pack("I", perm(1000, 4))},
           args=["in:a", "in:perm", "out:4000:out", "u32:12345"],
           expect=lambda ins: ref_scatter(ins, 12345)),
    Kernel("scatter_items", "scatter.cl", "scatter", (1000,),
           inputs=lambda: {"a": pack("I", u32s(1000, 5)),
                           "perm": pack("I", perm(1000, 6))},
           args=["in:a", "in:perm", "out:4000:out", "u32:777"],
           expect=lambda ins: ref_scatter(ins, 777)),
    Kernel("group_sum", "group_sum.cl", "group_sum", (2048,), local=(128,),
           inputs=lambda: {"a": pack("I", u32s(2048, 7))},
           args=["in:a", "out:128:out", "local:1024"],
           expect=lambda ins: ref_group_sum(ins, 128)),
    Kernel("histogram_local", "histogram_local.cl", "histogram", (1536,),
           local=(96,),
           inputs=lambda: {"a": pack("I", u32s(1536, 8))},
           args=["in:a", "out:1024:out"],
           expect=lambda ins: ref_histogram(ins, 96)),
    Kernel("transpose_tiled", "transpose_tiled.cl", "transpose", (48, 24),
           local=(8, 8),
           inputs=lambda: {"a": pack("I", u32s(48 * 24, 9))},
           args=["in:a", "out:4608:out", "u32:48", "u32:24"],
           expect=lambda ins: ref_transpose(ins, 48, 24)),
    Kernel("stencil2d_int", "stencil2d_int.cl", "stencil5", (50, 20),
           local=(10, 4),
           inputs=lambda: {"a": pack("i", [v - (1 << 31)
                                           for v in u32s(1000, 10)])},
           args=["in:a", "out:4000:out", "i32:-3"],
           expect=lambda ins: ref_stencil(ins, 50, 20, -3)),
    Kernel("tile_sum_2d", "tile_sum_2d.cl", "tile_sum", (32, 24),
           local=(8, 4),
           inputs=lambda: {"a": pack("I", u32s(32 * 24, 11))},
           args=["in:a", "out:96:out"],
           expect=lambda ins: ref_tile_sum(ins, 32, 24, 8, 4)),
    Kernel("expsin_f32", "expsin_f32.cl", "expsin", (700,),
           inputs=lambda: {"a": pack("f", f32s(700, 12, 0.0, 1.0))},
           args=["in:a", "out:2800:out", "f32:2.5", "u32:16"],
           tolerance="rel:1e-5",
           expect=lambda ins: ref_expsin(ins, f32(2.5), 16)),
    Kernel("group_dot_f32", "group_dot_f32.cl", "group_dot", (1024,),
           local=(64,),
           inputs=lambda: {"a": pack("f", f32s(1024, 13, 0.5, 1.5)),
                           "b": pack("f", f32s(1024, 14, 0.5, 1.5))},
           args=["in:a", "in:b", "out:64:out", "local:256"],
           tolerance="ulp:16",
           expect=lambda ins: ref_group_dot(ins, 64)),
    Kernel("hash_u32", "hash_u32.cl", "hash", (1536,),
           inputs=lambda: {"a": pack("I", u32s(1536, 15))},
           args=["in:a", "out:6144:h32", "out:1536:h8", f"u64:{HASH_SEED}"],
           checks=32,
           expect=lambda ins: ref_hash(ins, HASH_SEED)),
]


# ---- comparing ------------------------------------------------------------------

def _ordinal(bits):
    mag = bits & 0x7fffffff
    return -mag if bits & 0x80000000 else mag


def first_mismatch(tolerance, want, got):
    """None when got matches want under tolerance (exec/verify.c's rules:
    float32 values for ulp/abs/rel, a trailing partial word exactly), else
    a line saying where and how they differ."""
    if len(got) != len(want):
        return f"{len(got)} bytes, expected {len(want)}"
    if tolerance == "exact":
        if got == want:
            return None
        i = next(i for i in range(len(want)) if got[i] != want[i])
        w = i - i % 4
        return (f"byte {i} differs (word {w // 4}: got "
                f"{got[w:w + 4].hex()}, expected {want[w:w + 4].hex()})")
    kind, _, tol = tolerance.partition(":")
    tol = float(tol)
    whole = len(want) - len(want) % 4
    wb, gb = unpack("I", want[:whole]), unpack("I", got[:whole])
    wf, gf = unpack("f", want[:whole]), unpack("f", got[:whole])
    for i, (a, b) in enumerate(zip(wf, gf)):
        if math.isnan(a) or math.isnan(b):
            ok = math.isnan(a) and math.isnan(b)
        elif math.isinf(a) or math.isinf(b):
            ok = a == b
        elif kind == "ulp":
            ok = abs(_ordinal(wb[i]) - _ordinal(gb[i])) <= tol
        elif kind == "abs":
            ok = abs(a - b) <= tol
        else:
            ok = abs(a - b) <= tol * max(abs(a), abs(b))
        if not ok:
            return (f"float {i}: got {b!r}, expected {a!r} (outside "
                    f"{tolerance})")
    if got[whole:] != want[whole:]:
        return "trailing bytes differ"
    return None


def compare_outputs(k, files_dir, expected):
    """None, or why the out files in files_dir differ from expected."""
    for name, size in k.outputs():
        path = os.path.join(files_dir, name + ".bin")
        if not os.path.exists(path):
            return f"{name}.bin was not written"
        with open(path, "rb") as f:
            got = f.read()
        why = first_mismatch(k.tolerance, expected[name], got)
        if why:
            return f"{name}.bin: {why}"
    return None


# ---- the test -------------------------------------------------------------------

def prepare(net, k):
    """Write the row's inputs; return (dir, expected outputs)."""
    d = os.path.join(net.dir, "jobs", k.name)
    os.makedirs(d, exist_ok=True)
    ins = k.inputs()
    for name, data in ins.items():
        with open(os.path.join(d, name + ".bin"), "wb") as f:
            f.write(data)
    expected = k.expect(ins)
    for name, size in k.outputs():
        check(len(expected[name]) == size,
              f"{k.name}: the reference gives {len(expected[name])} bytes "
              f"for {name}, the flags say {size}")
    with open(os.path.join(KERNEL_DIR, k.file)) as f:
        src = f.read()
    for needle in (f"--entry {k.entry}",
                   f"--global {','.join(map(str, k.global_))}"):
        check(needle in src, f"{k.name}: {k.file}'s JOB-FLAGS comment does "
                             f"not say {needle!r}; keep it in step with "
                             f"the row")
    return d, expected


def local_run(net, k, d, expected, env):
    """`nightshift run` in a fresh copy of the inputs; None or why not."""
    rd = os.path.join(d, "run")
    os.makedirs(rd, exist_ok=True)
    for name in os.listdir(d):
        if name.endswith(".bin"):
            os.link(os.path.join(d, name), os.path.join(rd, name))
    r = cli("run", *k.flags(rd), "--json", "--timeout-ms", 60000,
            timeout=120, env=env)
    if r.returncode != 0:
        try:
            why = json.loads(r.stdout).get("error")
        except json.JSONDecodeError:
            why = None
        return f"exit {r.returncode}: {why or r.stderr.strip()[-300:]}"
    return compare_outputs(k, rd, expected)


def ledger_doc(datadir):
    r = cli("ledger", "--datadir", datadir, "--json", "--limit", 1000000,
            timeout=30)
    check(r.returncode == 0, f"ledger --json in {datadir}: exit "
                             f"{r.returncode}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def wait_ledgers(tn):
    """Every node's ledger has the same digest (the jobs' entries have
    reached them all)."""
    def same():
        ds = []
        for i in range(N_PROVIDERS):
            r = cli("status", "--datadir", os.path.join(tn, f"node{i}"),
                    "--json")
            if r.returncode != 0:
                return (False, r.stderr.strip())
            ds.append(json.loads(r.stdout)["ledger"]["digest"])
        return (len(set(ds)) == 1, f"digests {[d[:8] for d in ds]}")
    nstest.wait_until(same, LEDGER_WAIT_S, "the nodes' ledgers to agree",
                      interval=0.3)


def requester_dir(tn, i):
    """testnet/run.sh -r R names its requesters requester, requester1..."""
    return os.path.join(tn, "requester" if i == 0 else f"requester{i}")


def submit(tn, i, k, d, env):
    """`nightshift submit --json` of row k from requester i; returns
    (receipt or None, why-not or None, seconds, output dir). Its stderr
    is kept in d/submit.log (--json prints no progress lines)."""
    sd = os.path.join(d, "submit")
    os.makedirs(sd, exist_ok=True)
    for name in os.listdir(d):
        if name.endswith(".bin"):
            os.link(os.path.join(d, name), os.path.join(sd, name))
    with open(os.path.join(tn, "bootstrap")) as f:
        boot = f.read().strip()
    t0 = time.monotonic()
    r = cli("submit", "--datadir", requester_dir(tn, i), "--bootstrap", boot,
            *k.flags(sd), "--max-price", MAX_PRICE, "--deadline-s", 30,
            "--timeout-s", SUBMIT_TIMEOUT_S, "--json",
            timeout=SUBMIT_TIMEOUT_S + 30, env=env)
    took = time.monotonic() - t0
    with open(os.path.join(d, "submit.log"), "w") as f:
        f.write(r.stderr)
    try:
        doc = json.loads(r.stdout)
    except json.JSONDecodeError:
        return None, (f"exit {r.returncode}, no JSON receipt: "
                      f"{r.stderr.strip()[-300:]}"), took, sd
    return doc, None, took, sd


def test(net, names):
    rows = [k for k in KERNELS if not names or k.name in names]
    check(rows, f"no kernel named {names}")
    env = {**os.environ, "NIGHTSHIFT_CACHE": os.path.join(net.dir, "cache")}
    failures = {}
    prepared = {}

    # 1. Every kernel under `nightshift run` against its reference.
    run_ok = {}
    for k in rows:
        d, expected = prepare(net, k)
        prepared[k.name] = (d, expected)
        t0 = time.monotonic()
        why = local_run(net, k, d, expected, env)
        run_ok[k.name] = not why
        log(f"run    {k.name:16} {'ok' if not why else 'FAIL'} "
            f"({time.monotonic() - t0:.1f}s){': ' + why if why else ''}")
        if why:
            failures.setdefault(k.name, []).append(f"nightshift run: {why}")

    # 2. Through a testnet of 3 staked providers, one funded requester per
    #    row: a requester with failed jobs is soon refused by providers
    #    (ns_requester_acceptable), which must not hide the next rows.
    tn = os.path.join(net.dir, "tn")
    base, port_lock = nstest.reserve_ports(N_PROVIDERS)
    net.at_exit(port_lock.close)
    net.at_exit(lambda: _stop_testnet(tn))
    env_tn = {**env, "NIGHTSHIFT_BIN": nstest.BIN}
    r = subprocess.run(
        [os.path.join(nstest.REPO, "testnet", "run.sh"), "-n",
         str(N_PROVIDERS), "-d", tn, "-p", str(base), "-i", "500", "-t",
         "60", "-r", str(len(rows))], capture_output=True, text=True,
        timeout=120, env=env_tn, stdin=subprocess.DEVNULL)
    check(r.returncode == 0, f"testnet/run.sh exited {r.returncode}:\n"
                             f"{r.stdout}\n{r.stderr}")
    wait_ledgers(tn)
    for i in range(N_PROVIDERS):
        doc = ledger_doc(os.path.join(tn, f"node{i}"))
        check(doc["burned"] == 0 and doc["conserved"],
              f"node{i} before any job: burned {doc['burned']}, conserved "
              f"{doc['conserved']}")

    results = {}

    def one(i, k):
        d, expected = prepared[k.name]
        doc, why, took, sd = submit(tn, i, k, d, env)
        problems = [why] if why else []
        if doc:
            if doc.get("slashed"):
                # the receipt's error is the last round's; the slashes
                # came from spot checks that found units not matching
                problems.append(f"{doc['slashed']} provider(s) slashed "
                                f"over {doc.get('rounds')} rounds (spot "
                                f"checks found units that did not match)")
            if doc.get("status") != "settled":
                problems.append(f"status {doc.get('status')}: "
                                f"{doc.get('error')}")
            if doc.get("status") == "settled":
                bad = compare_outputs(k, sd, expected)
                if bad:
                    problems.append(f"settled output: {bad}")
        results[k.name] = (doc, took, problems)
        log(f"submit {k.name:16} "
            f"{(doc or {}).get('status', 'no receipt'):9} rounds "
            f"{(doc or {}).get('rounds', '-')} slashed "
            f"{(doc or {}).get('slashed', '-')} ({took:.1f}s)"
            + ("" if not problems else f": {problems[0]}"))

    with ThreadPoolExecutor(max_workers=PARALLEL_SUBMITS) as pool:
        for f in [pool.submit(one, i, k) for i, k in enumerate(rows)]:
            f.result()

    # 3. Every node's ledger, once they agree: nothing burned, no SLASH
    #    of a corpus job, conservation. A requester's ledger (a copy as of
    #    its submit's end) must hold no SLASH of its own job and be
    #    conserved.
    try:
        wait_ledgers(tn)
    except nstest.TestFailure as e:
        failures.setdefault("(ledgers)", []).append(str(e))
    nodes = {f"node{i}": ledger_doc(os.path.join(tn, f"node{i}"))
             for i in range(N_PROVIDERS)}
    for name, doc in nodes.items():
        if doc["burned"] or not doc["conserved"]:
            failures.setdefault("(ledgers)", []).append(
                f"{name}: {doc['burned']} credits burned, conserved "
                f"{doc['conserved']}")
    for i, k in enumerate(rows):
        doc, took, problems = results[k.name]
        docs = dict(nodes)
        rq = requester_dir(tn, i)
        if os.path.isdir(os.path.join(rq, "ledger")):
            docs[os.path.basename(rq)] = ledger_doc(rq)
            if not docs[os.path.basename(rq)]["conserved"]:
                problems.append(f"{os.path.basename(rq)}'s ledger is not "
                                f"conserved")
        job = (doc or {}).get("job", "")
        if job:
            tag = f"job {job[:16]}"
            counts = {name: sum(1 for e in ld["list"] if e["type"] == "slash"
                                and e["summary"].startswith(tag))
                      for name, ld in docs.items()}
            if any(counts.values()):
                problems.append("SLASH entries for the job: " + ", ".join(
                    f"{n} {c}" for n, c in counts.items()))
        if problems:
            failures.setdefault(k.name, []).append(
                "submit: " + "; ".join(dict.fromkeys(problems)))

    print("\nkernel           run   submit     rounds slashed   time",
          flush=True)
    for k in rows:
        doc, took, problems = results[k.name]
        doc = doc or {}
        print(f"{k.name:16} {'ok' if run_ok[k.name] else 'FAIL':5} "
              f"{doc.get('status', 'none'):10} {doc.get('rounds', '-')!s:6} "
              f"{doc.get('slashed', '-')!s:7} {took:6.1f}s"
              f"{'  <- ' + problems[0] if problems else ''}", flush=True)
    check(not failures, f"{len(failures)} of {len(rows)} kernels failed:\n  "
          + "\n  ".join(f"{n}: " + "; ".join(w)
                        for n, w in failures.items()))


def _stop_testnet(tn):
    pids = os.path.join(tn, "pids")
    if not os.path.exists(pids):
        return
    env = {**os.environ, "NIGHTSHIFT_BIN": nstest.BIN}
    subprocess.run([os.path.join(nstest.REPO, "testnet", "stop.sh"),
                           "-d", tn], capture_output=True, timeout=30,
                          env=env, stdin=subprocess.DEVNULL)
    with open(pids) as f:
        for line in f:
            parts = line.split(None, 1)
            if len(parts) == 2 and nstest.pid_alive(int(parts[0])) and \
                    "node" in nstest.pid_cmdline(int(parts[0])):
                os.kill(int(parts[0]), 9)


if __name__ == "__main__":
    known = {k.name for k in KERNELS}
    names = sys.argv[1:]
    unknown = [n for n in names if n not in known]
    if unknown:
        print(f"usage: {sys.argv[0]} [NAME...]; unknown {unknown}; known: "
              f"{' '.join(sorted(known))}", file=sys.stderr)
        sys.exit(2)
    nstest.main(lambda net: test(net, names), "kernel_corpus")
