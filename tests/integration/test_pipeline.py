"""Pipelines: a job file of several steps over named buffers, through a
testnet, each step a job of its own (docs/JOBS.md).

A lazy provider (it fakes 20% of its output words and bids below the
honest ones), two honest providers and a requester:

  1. a reduction: per-group partial sums into an intermediate buffer, then
     a final step that adds the partials; cut into 2 shards (the final
     step has one row, so it runs whole): the total equals the one
     computed here, and the lazy provider, which wins work, is slashed
     while the pipeline completes elsewhere;
  2. a two-layer perceptron (dense + ReLU into an intermediate, then
     dense), through a running node (`submit --node`), as one job: the
     outputs are byte for byte those of `nightshift run --job` of the
     same file, and no intermediate file is left behind;
  3. the same with the submitting command interrupted once the job is
     handed over: the node settles it and writes y.
"""
import json
import os
import signal
import struct
import subprocess

import nstest
from nstest import check, check_eq, log

KERNELS = """
kernel void partial(global const uint *x, global uint *p, local uint *tmp)
{
    uint l = get_local_id(0), g = get_group_id(0), n = get_local_size(0);
    tmp[l] = x[get_global_id(0)];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = n / 2; s > 0; s >>= 1) {
        if (l < s)
            tmp[l] += tmp[l + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0)
        p[g] = tmp[0];
}

kernel void total(global const uint *p, global uint *out, uint n)
{
    uint acc = 0;
    for (uint i = 0; i < n; i++)
        acc += p[i];
    out[0] = acc;
}

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
"""

N = 8192          # reduction input, uints
ROWS, DIN, DH, DOUT = 256, 16, 32, 10


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


def read(path):
    with open(path, "rb") as f:
        return f.read()


def floats(n, seed):
    x, out = seed, []
    for _ in range(n):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        out.append((x / 0x7FFFFFFF) * 2 - 1)
    return struct.pack(f"<{n}f", *out)


def receipts(r):
    check(r.returncode == 0, f"submit failed ({r.returncode}): "
          f"{r.stderr.strip()[-1500:]} {r.stdout.strip()[-1500:]}")
    docs = json.loads(r.stdout)
    check(isinstance(docs, list), "a pipeline's --json is an array")
    for d in docs:
        check_eq(d["status"], "settled", "a step's status")
    return docs


def test(net):
    lazy = net.node("lazy").init()
    honest = [net.node(f"h{i}").init() for i in range(2)]
    req = net.node("req").init()
    g = net.genesis([lazy, *honest, req])
    for n in (lazy, *honest, req):
        nstest.cli_ok("init", "--datadir", n.datadir, "--genesis", g)
    stake = ("--set", "node.stake=100000")
    honest[0].start(extra=stake + ("--set", "node.price=1000000"))
    honest[1].start(bootstrap=[honest[0]],
                    extra=stake + ("--set", "node.price=1000000"))
    lazy.start(bootstrap=[honest[0]], extra=stake + ("--fault", "lazy=0.2"))
    net.wait_mesh([lazy, *honest])
    d = net.dir
    write(os.path.join(d, "k.cl"), KERNELS.encode())

    # 1. a reduction in two steps, sharded, a lazy provider in the market
    vals = [(i * 2654435761) & 0xFFFF for i in range(N)]
    write(os.path.join(d, "x.bin"), struct.pack(f"<{N}I", *vals))
    with open(os.path.join(d, "sum.json"), "w") as f:
        json.dump({
            "source": "k.cl",
            "buffers": {"x": {"file": "x.bin"},
                        "p": {"bytes": 4 * (N // 64)},
                        "s": {"bytes": 4, "out": "sum.bin"}},
            "steps": [
                {"entry": "partial", "global": [N], "local": [64],
                 "args": ["x", "p", {"local": 256}]},
                {"entry": "total", "global": [1],
                 "args": ["p", "s", {"u32": N // 64}]}],
            "shards": 2, "work": N}, f)
    r = nstest.cli("submit", "--datadir", req.datadir, "--bootstrap",
                   honest[0].addr, "--job", os.path.join(d, "sum.json"),
                   "--max-price", "20", "--deadline-s", "30", "--json",
                   timeout=240)
    docs = receipts(r)
    check_eq(len(docs), 2, "steps in the receipt")
    check_eq(len(docs[0]["shards"]), 2, "shards of step 1")
    check("shards" not in docs[1], "the one-row final step ran whole")
    got = struct.unpack("<I", read(os.path.join(d, "sum.bin")))[0]
    check_eq(got, sum(vals) & 0xFFFFFFFF, "the pipeline's total")
    slashed = sum(s["slashed"] for s in docs[0]["shards"]) + docs[1]["slashed"]
    # (the one-word final step may come out right from it: 80% of the time)
    paid = {s["provider"] for s in docs[0]["shards"]}
    check(lazy.id not in paid, "the lazy provider was paid for a shard")
    check(slashed >= 1, f"the lazy provider was never slashed: {docs}")
    log(f"1: reduction of {N} values = {got}; lazy slashed {slashed} time(s)")

    # 2. a two-layer perceptron through --node, against run --job
    write(os.path.join(d, "in.bin"), floats(ROWS * DIN, 1))
    write(os.path.join(d, "w1.bin"), floats(DIN * DH, 2))
    write(os.path.join(d, "b1.bin"), floats(DH, 3))
    write(os.path.join(d, "w2.bin"), floats(DH * DOUT, 4))
    write(os.path.join(d, "b2.bin"), floats(DOUT, 5))

    def mlp(out):
        return {
            "source": "k.cl",
            "buffers": {"x": {"file": "in.bin"}, "w1": {"file": "w1.bin"},
                        "b1": {"file": "b1.bin"}, "w2": {"file": "w2.bin"},
                        "b2": {"file": "b2.bin"},
                        "h": {"bytes": 4 * ROWS * DH},
                        "y": {"bytes": 4 * ROWS * DOUT, "out": out}},
            "steps": [
                {"entry": "dense", "global": [ROWS, DH],
                 "args": ["x", "w1", "b1", "h", {"u32": DIN}, {"u32": DH},
                          {"u32": 1}]},
                {"entry": "dense", "global": [ROWS, DOUT],
                 "args": ["h", "w2", "b2", "y", {"u32": DH}, {"u32": DOUT},
                          {"u32": 0}]}],
            "tolerance": "abs:1e-4", "work": 2 * ROWS * DH * (DIN + DOUT)}
    for name, out in (("mlp.json", "y.bin"), ("mlp_local.json", "y_local.bin")):
        with open(os.path.join(d, name), "w") as f:
            json.dump(mlp(out), f)
    nstest.cli_ok("run", "--job", os.path.join(d, "mlp_local.json"),
                  timeout=120)
    req.start(bootstrap=[honest[0]])
    # the intermediates' temporary directory goes under a TMPDIR of the
    # test's own (other tests may make theirs in /tmp meanwhile)
    tmp = os.path.join(d, "tmp")
    os.makedirs(tmp)
    env = dict(os.environ, TMPDIR=tmp)
    r = nstest.cli("submit", "--node", req.datadir, "--job",
                   os.path.join(d, "mlp.json"), "--max-price", "20",
                   "--deadline-s", "30", "--json", timeout=240, env=env)
    check(r.returncode == 0, f"submit failed ({r.returncode}): "
          f"{r.stderr.strip()[-1500:]} {r.stdout.strip()[-1500:]}")
    doc = json.loads(r.stdout)
    check(isinstance(doc, dict), "a pipeline is one job: one receipt")
    check_eq(doc["status"], "settled", "the pipeline's status")
    log(f"2: receipt {doc}")
    check(read(os.path.join(d, "y.bin")) ==
          read(os.path.join(d, "y_local.bin")),
          "the pipeline's outputs differ from `run --job`")
    check(not os.listdir(tmp),
          f"intermediates were left in TMPDIR: {os.listdir(tmp)}")
    log("2: two-layer perceptron through --node equals run --job")

    # 3. the same, the submitting command interrupted once the job is
    # handed over: the job goes on in the node, which keeps the
    # intermediates itself (a temporary file of its own, not the
    # command's directory, gone with the command), settles and writes y
    os.unlink(os.path.join(d, "y.bin"))
    p = subprocess.Popen([nstest.BIN, "submit", "--node", req.datadir,
                          "--job", os.path.join(d, "mlp.json"),
                          "--max-price", "20", "--deadline-s", "30"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
    for line in p.stderr:
        if "handed to the node" in line:
            break
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    check(p.returncode == 130, f"the interrupted submit exited "
          f"{p.returncode}: {err.strip()[-600:]}")

    def done():  # this job and the one of part 2, both over
        r = nstest.cli("jobs", "--datadir", req.datadir, "--json")
        jobs = json.loads(r.stdout) if r.returncode == 0 else []
        return (len(jobs) == 2 and all(j.get("finished") for j in jobs),
                f"jobs: {jobs}")
    nstest.wait_until(done, 60, "the node to finish the interrupted job",
                      interval=0.5)
    r = nstest.cli("jobs", "--datadir", req.datadir, "--json")
    phases = [j["phase"] for j in json.loads(r.stdout)]
    check(phases.count("failed") == 0,
          f"a job failed after its command was interrupted: {r.stdout}")
    check(read(os.path.join(d, "y.bin")) ==
          read(os.path.join(d, "y_local.bin")),
          "the interrupted pipeline's output differs from `run --job`")
    check(not os.listdir(tmp),
          f"intermediates were left in TMPDIR: {os.listdir(tmp)}")
    log("3: interrupted after the hand-over, the node settled it; y written")


nstest.main(test, "pipeline")
