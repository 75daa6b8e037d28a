"""A pipeline as one job (docs/JOBS.md "Pipelines"): five steps of one
kernel file, awarded once, run by one provider, every step checked.

The steps: a dense layer with ReLU into an intermediate h, a dense layer
into y (an output that later steps read), the class of each row (argmax)
into an intermediate, then a reduction in two steps: per-group counts of
the rows of one class, and their total.

Four providers: three honest and dear, one lazy (--fault lazy=0.5) and
cheap, so it wins the first round and fakes half of every buffer it
writes. The requester (a light peer) must catch it in one of the steps,
slash it with a fraud proof that every node checks (a proof for a step
that reads an earlier step's buffer names every buffer by hash: the nodes
fetch them from the requester and re-run the unit on them), and the job
must then settle on an honest provider with outputs byte for byte those
of `nightshift run --job` of the same file and a count equal to the one
computed here from them. Checked on every node: the lazy provider slashed
once, the same ledger. No intermediate file is left in /tmp.
"""
import json
import os
import struct

import nstest
from ledgerutil import balance, ledger
from nstest import check, check_eq, cli, log

KERNELS = """
/* y[r][j] = act(b[j] + sum_k x[r][k] w[k][j]), r = global 0, j = global 1 */
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

kernel void argmax(global const float *y, global uint *cls, uint dout)
{
    size_t r = get_global_id(0);
    uint best = 0;
    for (uint j = 1; j < dout; j++)
        if (y[r * dout + j] > y[r * dout + best])
            best = j;
    cls[r] = best;
}

kernel void count(global const uint *cls, global uint *part, local uint *t,
                  uint c)
{
    uint l = get_local_id(0), n = get_local_size(0);
    t[l] = cls[get_global_id(0)] == c;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = n / 2; s > 0; s >>= 1) {
        if (l < s)
            t[l] += t[l + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0)
        part[get_group_id(0)] = t[0];
}

kernel void total(global const uint *part, global uint *out, uint n)
{
    uint acc = 0;
    for (uint i = 0; i < n; i++)
        acc += part[i];
    out[0] = acc;
}
"""

ROWS, DIN, DH, DOUT, GROUP = 256, 16, 32, 10, 64
CLASS = 3  # the class counted (18 of the 256 rows with these weights)
HONEST_PRICE = 10_000_000


def floats(n, seed):
    x, out = seed, []
    for _ in range(n):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        out.append((x / 0x7FFFFFFF) * 2 - 1)
    return struct.pack(f"<{n}f", *out)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def job(y_out, n_out):
    return {
        "source": "k.cl",
        "buffers": {"x": {"file": "x.bin"}, "w1": {"file": "w1.bin"},
                    "b1": {"file": "b1.bin"}, "w2": {"file": "w2.bin"},
                    "b2": {"file": "b2.bin"},
                    "h": {"bytes": 4 * ROWS * DH},
                    "y": {"bytes": 4 * ROWS * DOUT, "out": y_out},
                    "cls": {"bytes": 4 * ROWS},
                    "part": {"bytes": 4 * (ROWS // GROUP)},
                    "count": {"bytes": 4, "out": n_out}},
        "steps": [
            {"entry": "dense", "global": [ROWS, DH],
             "args": ["x", "w1", "b1", "h", {"u32": DIN}, {"u32": DH},
                      {"u32": 1}]},
            {"entry": "dense", "global": [ROWS, DOUT],
             "args": ["h", "w2", "b2", "y", {"u32": DH}, {"u32": DOUT},
                      {"u32": 0}]},
            {"entry": "argmax", "global": [ROWS],
             "args": ["y", "cls", {"u32": DOUT}]},
            {"entry": "count", "global": [ROWS], "local": [GROUP],
             "args": ["cls", "part", {"local": 4 * GROUP}, {"u32": CLASS}]},
            {"entry": "total", "global": [1],
             "args": ["part", "count", {"u32": ROWS // GROUP}]}],
        "tolerance": "abs:1e-4", "work": 2 * ROWS * DH * (DIN + DOUT)}


def test(net):
    nodes = [net.node(f"node{i}").init() for i in range(4)]
    req = net.node("req").init()
    g = net.genesis(nodes + [req])
    for n in nodes + [req]:
        nstest.cli_ok("init", "--datadir", n.datadir, "--genesis", g)
    common = ["--set", "node.stake=100000"]
    nodes[0].start(extra=common + ["--set", f"node.price={HONEST_PRICE}"])
    for n in nodes[1:3]:
        n.start(bootstrap=[nodes[0]], wait=False,
                extra=common + ["--set", f"node.price={HONEST_PRICE}"])
    nodes[3].start(bootstrap=[nodes[0]], wait=False,
                   extra=common + ["--fault", "lazy=0.5"])
    for n in nodes[1:]:
        n.wait_started()
    net.wait_mesh(nodes)

    d = net.dir
    for name, data in (("k.cl", KERNELS.encode()),
                       ("x.bin", floats(ROWS * DIN, 1)),
                       ("w1.bin", floats(DIN * DH, 2)),
                       ("b1.bin", floats(DH, 3)),
                       ("w2.bin", floats(DH * DOUT, 4)),
                       ("b2.bin", floats(DOUT, 5))):
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
    for name, y, cnt in (("net.json", "y.bin", "count.bin"),
                        ("local.json", "y_local.bin", "count_local.bin")):
        with open(os.path.join(d, name), "w") as f:
            json.dump(job(y, cnt), f)
    nstest.cli_ok("run", "--job", os.path.join(d, "local.json"), timeout=120)

    # the intermediates' temporary directory goes under a TMPDIR of the
    # test's own (other tests may make theirs in /tmp meanwhile)
    tmp = os.path.join(d, "tmp")
    os.makedirs(tmp)
    env = dict(os.environ, TMPDIR=tmp)
    r = cli("submit", "--datadir", req.datadir, "--bootstrap", nodes[0].addr,
            "--job", os.path.join(d, "net.json"), "--max-price", 1000,
            "--collateral", 400, "--bid-window-ms", 400, "--json",
            timeout=180, env=env)
    check(r.returncode == 0, f"submit failed ({r.returncode}): "
          f"{r.stderr.strip()[-1500:]} {r.stdout.strip()[-800:]}")
    doc = json.loads(r.stdout)
    log(f"receipt: {doc}")
    check(isinstance(doc, dict), "a pipeline is one job: one receipt")
    check_eq(doc["status"], "settled", "the pipeline's status")
    check_eq(doc["slashed"], 1, "slashes in the receipt")
    check(doc["provider"] != nodes[3].id, "the lazy provider was paid")
    # k = 64 units of every step, fewer where a step has fewer
    check_eq(doc["checks"], 64 + 64 + 64 + ROWS // GROUP + 1,
             "units checked over the five steps")
    check("nightshift-pipeline" not in r.stderr, "progress names a tmpdir")

    y = read(os.path.join(d, "y.bin"))
    check(y == read(os.path.join(d, "y_local.bin")),
          "y differs from `run --job`'s")
    ys = struct.unpack(f"<{ROWS * DOUT}f", y)
    want = sum(1 for r_ in range(ROWS)
               if max(range(DOUT), key=lambda j: (ys[r_ * DOUT + j], -j)) == CLASS)
    got = struct.unpack("<I", read(os.path.join(d, "count.bin")))[0]
    check_eq(got, want, f"rows of class {CLASS} (the reduction's total)")
    check(0 < want < ROWS, f"{want} rows of class {CLASS}: a weak test")
    check(read(os.path.join(d, "count_local.bin")) ==
          read(os.path.join(d, "count.bin")), "count differs from `run --job`'s")
    check(not os.listdir(tmp),
          f"intermediates were left in TMPDIR: {os.listdir(tmp)}")
    log(f"outputs equal run --job; {got} of {ROWS} rows of class {CLASS}")

    # every node re-checks the fraud proof and applies the SLASH
    def slashed_everywhere():
        seen = [balance(n.datadir, nodes[3].id)["jobs_slashed"]
                for n in nodes]
        return (all(s == 1 for s in seen), f"slashed counts {seen}")
    nstest.wait_until(slashed_everywhere, 60, "every node to apply the SLASH",
                      interval=0.5)

    def same_ledgers():
        sums = [ledger(n.datadir, 1) for n in nodes]
        keys = {(s["entries"], s["burned"]) for s in sums}
        return (len(keys) == 1, f"(entries, burned) per node "
                                f"{[(s['entries'], s['burned']) for s in sums]}")
    nstest.wait_until(same_ledgers, 60, "the ledgers to agree", interval=0.5)
    check_eq(ledger(nodes[0].datadir, 1)["burned"], 400,
             "burned credits (the lazy provider's collateral)")
    for n in nodes:
        check("slash_checked_without_rerun" not in n.log_text(),
              f"{n.name} applied a SLASH without re-running it")
    fetched = [n.name for n in nodes if "event=blob_fetched" in n.log_text()]
    log(f"nodes that fetched the proof's buffers by hash: {fetched}")
    check(len(fetched) >= 2,
          f"only {fetched} fetched the claimed buffers by hash")


nstest.main(test, "pipeline_award")
