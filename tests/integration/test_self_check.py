"""A requester that tries to get honest providers slashed.

The requester skips its own pre-flight (`submit --fault no-preflight`, test
networks only) and posts a kernel that no check can pass: out[i] += in[i]
(it reads its output, so a unit re-run over the claimed outputs writes
other bytes than the whole launch did). Had a provider signed those
outputs, the requester's check would fail them and its fraud proof would
convince every node: an honest provider would lose its collateral for the
requester's kernel.

Each provider re-runs a few units of its own outputs before it commits to
them (ns_self_check) and gives such a job up instead. Checked: the job
fails with the providers' reason, no provider is slashed on any node, no
collateral is burned, every provider's stake is whole, and the providers
still run an honest job afterwards (its outputs equal `nightshift run`'s).
"""
import json
import os
import struct

import nstest
from ledgerutil import balance, ledger
from nstest import check, check_eq, cli, log

N = 4096
KERNEL = """
kernel void acc(global const uint *in, global uint *out)
{
    size_t i = get_global_id(0);
    out[i] += in[i];
}
"""


def test(net):
    provs = [net.node(f"p{i}").init() for i in range(3)]
    req = net.node("req").init()
    g = net.genesis(provs + [req])
    for n in provs + [req]:
        nstest.cli_ok("init", "--datadir", n.datadir, "--genesis", g)
    stake = ["--set", "node.stake=100000"]
    provs[0].start(extra=stake)
    for p in provs[1:]:
        p.start(bootstrap=[provs[0]], extra=stake)
    net.wait_mesh(provs)
    before = {p.name: balance(provs[0].datadir, p.id) for p in provs}

    d = net.dir
    with open(os.path.join(d, "acc.cl"), "w") as f:
        f.write(KERNEL)
    with open(os.path.join(d, "in.bin"), "wb") as f:
        f.write(struct.pack(f"<{N}I", *range(N)))
    r = cli("submit", "--datadir", req.datadir, "--bootstrap", provs[0].addr,
            "--kernel", os.path.join(d, "acc.cl"), "--entry", "acc",
            "--global", str(N), "--arg", f"in:{os.path.join(d, 'in.bin')}",
            "--arg", f"out:{4 * N}:{os.path.join(d, 'out.bin')}",
            "--max-price", 100, "--collateral", 40, "--deadline-s", 20,
            "--no-wait", "--fault", "no-preflight", "--json", timeout=120)
    log(f"submit: exit {r.returncode}: {r.stdout.strip()[-400:]} "
        f"{r.stderr.strip()[-600:]}")
    check(r.returncode != 0, "a job no check can pass settled")
    check("cannot be verified" in r.stderr + r.stdout,
          "the failure does not give the providers' reason")
    check(not os.path.exists(os.path.join(d, "out.bin")),
          "outputs were written for a job that failed")
    refused = [p.name for p in provs
               if "event=self_check_failed" in p.log_text()]
    log(f"providers that refused their own outputs: {refused}")
    check(len(refused) >= 1, "no provider ran its self-check")

    # nobody slashed, nothing burned, on any node; stakes whole
    for n in provs:
        for p in provs:
            b = balance(n.datadir, p.id)
            check_eq(b["jobs_slashed"], 0,
                     f"{p.name} slashed on {n.name}'s ledger")
        check_eq(ledger(n.datadir, 1)["burned"], 0,
                 f"credits burned on {n.name}'s ledger")
    def stakes_whole():
        now = {p.name: balance(provs[0].datadir, p.id) for p in provs}
        bad = {k: (before[k]["staked"], v["staked"], v.get("locked", 0))
               for k, v in now.items()
               if v["staked"] < before[k]["staked"]}
        return (not bad, f"stakes below their start: {bad}")
    nstest.wait_until(stakes_whole, 30, "every provider's stake whole",
                      interval=0.5)

    # the providers still work: an honest job settles, equal to run's
    a = os.path.join(d, "a.bin")
    with open(a, "wb") as f:
        f.write(struct.pack(f"<{N}f", *(float(i) for i in range(N))))
    flags = ["--builtin", "vector_add", "--global", str(N), "--arg",
             f"in:{a}", "--arg", f"in:{a}", "--arg",
             f"out:{4 * N}:{os.path.join(d, 'c.bin')}", "--arg", f"u32:{N}"]
    r = cli("submit", "--datadir", req.datadir, "--bootstrap", provs[0].addr,
            *flags, "--max-price", 100, "--json", timeout=120)
    check(r.returncode == 0, f"the honest job failed: {r.stderr[-600:]}")
    check_eq(json.loads(r.stdout)["status"], "settled", "honest job status")
    flags[-3] = f"out:{4 * N}:{os.path.join(d, 'c_local.bin')}"
    nstest.cli_ok("run", *flags)
    with open(os.path.join(d, "c.bin"), "rb") as f1, \
            open(os.path.join(d, "c_local.bin"), "rb") as f2:
        check(f1.read() == f2.read(), "the honest job's outputs differ")
    log("no provider slashed; an honest job settled afterwards")


nstest.main(test, "self_check")
