"""Input locality: a job goes where its inputs already are.

A provider keeps the outputs it computed in its blob store (by hash), an
announcement names the job's inputs by hash, and a bid says which of them
its bidder holds with a proof of possession; near-equal bids go to the
free bidder holding the most input bytes (docs/PROTOCOL.md, "Market").

Three equal providers and a requester run a three-step pipeline whose
later steps read what the earlier ones wrote (y = 2x + 1, z = y * y,
w = y + z, 4 MiB each), as one job:

  1. one provider runs every step, receiving only x from the requester
     (the intermediates never travel to it), and the other two providers
     receive nothing;
  2. w equals what `nightshift run --job` writes for the same file;
  3. the same job again goes to that provider, which holds x and takes it
     from its own store (inputs_cached): no input byte is sent.
"""
import json
import os
import struct

import nstest
from nstest import check, check_eq, log

KERNELS = """
kernel void affine(global const float *x, global float *y, float a, float b)
{
    size_t i = get_global_id(0);
    y[i] = a * x[i] + b;
}

kernel void square(global const float *y, global float *z)
{
    size_t i = get_global_id(0);
    z[i] = y[i] * y[i];
}

kernel void add(global const float *y, global const float *z,
                global float *w)
{
    size_t i = get_global_id(0);
    w[i] = y[i] + z[i];
}
"""

N = 1 << 20  # floats per buffer: 4 MiB


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


def read(path):
    with open(path, "rb") as f:
        return f.read()


def job(out):
    return {
        "source": "k.cl",
        "buffers": {"x": {"file": "x.bin"},
                    "y": {"bytes": 4 * N},
                    "z": {"bytes": 4 * N},
                    "w": {"bytes": 4 * N, "out": out}},
        "steps": [
            {"entry": "affine", "global": [N],
             "args": ["x", "y", {"f32": 2.0}, {"f32": 1.0}]},
            {"entry": "square", "global": [N], "args": ["y", "z"]},
            {"entry": "add", "global": [N], "args": ["y", "z", "w"]}],
        "tolerance": "abs:1e-3", "work": 4 * N}


def provider_stats(nodes):
    return {n.name: n.status()["provider"] for n in nodes}


def test(net):
    provs = [net.node(f"p{i}").init() for i in range(3)]
    req = net.node("req").init()
    g = net.genesis([*provs, req])
    for n in (*provs, req):
        nstest.cli_ok("init", "--datadir", n.datadir, "--genesis", g)
    stake = ("--set", "node.stake=100000")
    provs[0].start(extra=stake)
    for p in provs[1:]:
        p.start(bootstrap=[provs[0]], extra=stake)
    net.wait_mesh(provs)
    d = net.dir
    write(os.path.join(d, "k.cl"), KERNELS.encode())
    x = struct.pack(f"<{N}f", *((i % 1000) / 250.0 - 2.0 for i in range(N)))
    write(os.path.join(d, "x.bin"), x)
    for name, out in (("p.json", "w.bin"), ("local.json", "w_local.bin")):
        with open(os.path.join(d, name), "w") as f:
            json.dump(job(out), f)
    nstest.cli_ok("run", "--job", os.path.join(d, "local.json"), timeout=120)

    def submit():
        r = nstest.cli("submit", "--datadir", req.datadir, "--bootstrap",
                       provs[0].addr, "--job", os.path.join(d, "p.json"),
                       "--max-price", "20", "--deadline-s", "60", "--json",
                       timeout=240)
        check(r.returncode == 0, f"submit failed ({r.returncode}): "
              f"{r.stderr.strip()[-1500:]}")
        doc = json.loads(r.stdout)
        check(isinstance(doc, dict), "a pipeline is one job: one receipt")
        check_eq(doc["status"], "settled", "the pipeline's status")
        return doc

    # 1-2: one provider runs the three steps, receiving only x
    before = provider_stats(provs)
    doc = submit()
    winner = next(p for p in provs if doc["provider"].startswith(p.id[:10]))
    after = provider_stats(provs)
    got = {n: after[n]["input_bytes"] - before[n]["input_bytes"]
           for n in after}
    log(f"input bytes received per provider: {got}")
    check_eq(got[winner.name], 4 * N,
             "input bytes the winner received (x only)")
    for p in provs:
        if p is not winner:
            check_eq(got[p.name], 0, f"input bytes received by {p.name}")
    check(read(os.path.join(d, "w.bin")) ==
          read(os.path.join(d, "w_local.bin")),
          "the pipeline's output differs from `run --job`")
    log("1-2: one provider ran the steps on x alone; w equals run --job")

    # 3: the same job again goes to the provider holding x, which takes it
    # from its own store
    os.unlink(os.path.join(d, "w.bin"))
    before = after
    doc = submit()
    check(doc["provider"].startswith(winner.id[:10]),
          f"the second run left the provider holding x: {doc['provider']}")
    after = provider_stats(provs)
    got = {n: after[n]["input_bytes"] - before[n]["input_bytes"]
           for n in after}
    cached = (after[winner.name]["inputs_cached"] -
              before[winner.name]["inputs_cached"])
    log(f"second run: input bytes {got}; inputs from the store {cached}")
    check_eq(sum(got.values()), 0, "input bytes sent the second time")
    check(cached >= 1, f"inputs_cached went up by {cached}, 1 expected")
    check(read(os.path.join(d, "w.bin")) ==
          read(os.path.join(d, "w_local.bin")),
          "the second run's output differs from `run --job`")
    log("3: the repeated job ran where x already was")


nstest.main(test, "pipeline_locality")
