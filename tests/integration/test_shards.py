"""Shards: one job over many providers (`submit --shards N`).

A testnet of a lazy provider (it fakes 20% of its output words, and bids
far below the others), two honest ones and a requester:

  1. a 2-D kernel whose rows are its second dimension, cut into 3 shards:
     the outputs equal the reference computed here; the lazy provider,
     which wins a shard, is slashed and its shard is done by another
     provider, while the receipt names a provider and price per shard;
  2. the built-in vector_add as a job file with "shards": 3, handed to a
     running node (`submit --node`): the outputs equal `nightshift run`;
  3. a provider killed while it runs its shard (a slow provider, kill -9):
     that shard moves to another provider, the others keep theirs, and the
     outputs are still right;
  4. bad inputs, each exit 2 with one line before any credit moves: more
     shards than rows, a shard count above the cap, outputs that are not a
     multiple of the rows, and a kernel whose units write outside their
     rows' slices.
"""
import json
import os
import struct
import subprocess
import time

import nstest
from nstest import check, check_eq, log

# out[row][col] = in[row][col] * 3 + row, row = get_global_id(1): the rows
# are the second dimension, so the shards must be cut along it.
ROWS_KERNEL = """
kernel void rows(global const uint *in, global uint *out, uint cols)
{
    size_t col = get_global_id(0), row = get_global_id(1);
    out[row * cols + col] = in[row * cols + col] * 3u + (uint)row;
}
"""

# Units write across the whole buffer (a transpose of a 1-D index):
# no dimension keeps each row's output in its own slice.
SCATTER_KERNEL = """
kernel void scatter(global uint *out, uint n)
{
    uint i = get_global_id(0);
    out[(i % 4u) * (n / 4u) + i / 4u] = i;
}
"""

COLS, ROWS = 16, 96


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


def read(path):
    with open(path, "rb") as f:
        return f.read()


def submit(args, timeout=180):
    r = nstest.cli("submit", *args, timeout=timeout)
    log(f"submit exit {r.returncode}")
    return r


def receipt(r):
    check(r.returncode == 0,
          f"submit failed ({r.returncode}): {r.stderr.strip()[-1500:]} "
          f"{r.stdout.strip()[-1500:]}")
    doc = json.loads(r.stdout)
    check_eq(doc["status"], "settled", "status")
    return doc


def test(net):
    lazy = net.node("lazy").init()
    honest = [net.node(f"h{i}").init() for i in range(2)]
    slow = net.node("slow").init()
    req = net.node("req").init()
    g = net.genesis([lazy, *honest, slow, req])
    for n in (lazy, *honest, slow, req):
        nstest.cli_ok("init", "--datadir", n.datadir, "--genesis", g)
    stake = ("--set", "node.stake=100000")
    honest[0].start(extra=stake + ("--set", "node.price=1000000"))
    honest[1].start(bootstrap=[honest[0]],
                    extra=stake + ("--set", "node.price=1000000"))
    lazy.start(bootstrap=[honest[0]],
               extra=stake + ("--fault", "lazy=0.2"))
    net.wait_mesh([lazy, *honest])
    boot = honest[0].addr
    light = ("--datadir", req.datadir, "--bootstrap", boot, "--json")

    # 1. rows along the second dimension, a lazy provider among the holders
    src = write(os.path.join(net.dir, "rows.cl"), ROWS_KERNEL.encode())
    vals = [(i * 2654435761) & 0xFFFFFFFF for i in range(COLS * ROWS)]
    inp = write(os.path.join(net.dir, "in.bin"),
                struct.pack(f"<{len(vals)}I", *vals))
    out = os.path.join(net.dir, "out.bin")
    r = submit([*light, "--kernel", src, "--entry", "rows", "--global",
                f"{COLS},{ROWS}", "--arg", f"in:{inp}", "--arg",
                f"out:{4 * COLS * ROWS}:{out}", "--arg", f"u32:{COLS}",
                "--max-price", "30", "--shards", "3", "--deadline-s", "30"])
    doc = receipt(r)
    want = struct.pack(
        f"<{len(vals)}I",
        *[(v * 3 + i // COLS) & 0xFFFFFFFF for i, v in enumerate(vals)])
    check(read(out) == want, "sharded outputs differ from the reference")
    shards = doc["shards"]
    check_eq(len(shards), 3, "shards in the receipt")
    check_eq([s["rows"] for s in shards], [[0, 32], [32, 64], [64, 96]],
             "the rows of each shard (cut along global[1])")
    providers = {s["provider"] for s in shards}
    check(lazy.id not in providers, "the lazy provider was paid for a shard")
    slashed = sum(s["slashed"] for s in shards)
    check(slashed >= 1, f"the lazy provider was never slashed: {shards}")
    log(f"1: 3 shards settled by {len(providers)} providers; "
        f"{slashed} slash(es) of the lazy provider")

    # 2. a job file with "shards", through a running node
    n = 1 << 16
    a = write(os.path.join(net.dir, "a.bin"),
              struct.pack(f"<{n}f", *[i * 0.5 for i in range(n)]))
    b = write(os.path.join(net.dir, "b.bin"),
              struct.pack(f"<{n}f", *[1.0 / (i + 1) for i in range(n)]))
    jf = os.path.join(net.dir, "vadd.json")
    with open(jf, "w") as f:
        json.dump({"builtin": "vector_add",
                   "buffers": {"a": {"file": "a.bin"},
                               "b": {"file": "b.bin"},
                               "c": {"bytes": 4 * n, "out": "c.bin"}},
                   "steps": [{"global": [n],
                              "args": ["a", "b", "c", {"u32": n}]}],
                   "work": n, "shards": 3}, f)
    ref = os.path.join(net.dir, "c_ref.bin")
    nstest.cli_ok("run", "--builtin", "vector_add", "--global", n, "--arg",
                  f"in:{a}", "--arg", f"in:{b}", "--arg",
                  f"out:{4 * n}:{ref}", "--arg", f"u32:{n}", timeout=60)
    # the requester runs a node of its own for --node
    req.start(bootstrap=[honest[0]])
    r = submit(["--node", req.datadir, "--job", jf, "--max-price", "30",
                "--json", "--deadline-s", "20"])
    doc = receipt(r)
    check(read(os.path.join(net.dir, "c.bin")) == read(ref),
          "job file shards through --node differ from `run`")
    check(not [p for p in os.listdir(net.dir) if ".shard" in p],
          "the shards' own output files were left behind")
    log(f"2: job file, 3 shards through --node: outputs equal `run`")
    req.stop()

    # 3. a provider killed while it runs its shard
    slow.start(bootstrap=[honest[0]],
               extra=stake + ("--fault", "slow=1000"))
    lazy.stop()
    net.wait_mesh([slow, *honest])

    def same_ledger():
        ds = {n.status()["ledger"]["digest"] for n in (slow, *honest)}
        return len(ds) == 1, f"{len(ds)} digests"
    # a provider bids only on what its ledger can follow
    nstest.wait_until(same_ledger, 30, "the slow provider's ledger to catch "
                      "up", interval=0.2)
    out3 = os.path.join(net.dir, "out3.bin")
    p = subprocess.Popen(
        [nstest.BIN, "submit", *light, "--kernel", src, "--entry", "rows",
         "--global", f"{COLS},{ROWS}", "--arg", f"in:{inp}", "--arg",
         f"out:{4 * COLS * ROWS}:{out3}", "--arg", f"u32:{COLS}",
         "--max-price", "30", "--shards", "3", "--deadline-s", "15"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        stdin=subprocess.DEVNULL)
    net.at_exit(p.kill)
    def busy():
        prov = slow.status()["provider"]
        return prov["running"] + prov["jobs"]["hold"] > 0
    try:
        nstest.wait_until(busy, 60, "the slow provider to run a shard",
                          interval=0.05)
    except nstest.TestFailure:
        p.kill()
        out_, err_ = p.communicate()
        log(f"submit said: {out_[-3000:]} {err_[-2000:]}")
        raise
    slow.kill()
    log("3: killed the slow provider while it ran its shard")
    stdout, stderr = p.communicate(timeout=180)
    r = subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr)
    doc = receipt(r)
    check(read(out3) == want, "outputs differ after a provider was killed")
    shards = doc["shards"]
    check(slow.id not in {s["provider"] for s in shards},
          "the killed provider was paid")
    check(max(s["rounds"] for s in shards) >= 2,
          f"no shard needed a second round: {shards}")
    log(f"3: rounds per shard {[s['rounds'] for s in shards]}")

    # 4. bad inputs: exit 2, one line, no credit moved
    def balance():
        return nstest.cli_ok("balance", "--datadir", req.datadir,
                             req.id).strip()
    before = balance()
    cases = [
        (["--builtin", "vector_add", "--global", "4", "--arg", f"in:{a}",
          "--arg", f"in:{b}", "--arg", f"out:16:{out}", "--arg", "u32:4",
          "--shards", "5"], "more shards than rows"),
        (["--builtin", "vector_add", "--global", "4", "--arg", f"in:{a}",
          "--arg", f"in:{b}", "--arg", f"out:16:{out}", "--arg", "u32:4",
          "--shards", "65"], "1..64"),
        (["--kernel", src, "--entry", "rows", "--global", f"{COLS},{ROWS}",
          "--arg", f"in:{inp}", "--arg", f"out:{4 * COLS * ROWS + 2}:{out}",
          "--arg", f"u32:{COLS}", "--shards", "3"], "not a multiple"),
        (["--kernel", write(os.path.join(net.dir, "scatter.cl"),
                            SCATTER_KERNEL.encode()),
          "--entry", "scatter", "--global", "64", "--arg",
          f"out:256:{out}", "--arg", "u32:64", "--shards", "2"],
         "outside its row's slice"),
    ]
    for args, words in cases:
        r = nstest.cli("submit", "--datadir", req.datadir, "--bootstrap",
                       boot, *args, "--max-price", "1", timeout=60)
        lines = r.stderr.strip().splitlines()
        check_eq(r.returncode, 2, f"exit status ({words})")
        check(len(lines) == 1 and words in lines[0],
              f"error for '{words}': {r.stderr.strip()}")
        log(f"4: refused: {lines[0][:110]}")
    check_eq(balance(), before, "the requester's balance after refusals")


nstest.main(test, "shards")
