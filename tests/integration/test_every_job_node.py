"""Every built-in, and plain user kernels, through a running node and
through the light peer.

The jobs of bench/cross_device.py (each built-in on seeded inputs, jobs
without inputs, with two outputs, with a 32-byte input, with __local
arguments, and four small user kernels) are submitted with
`submit --node` to a 3-node testnet, one after another, then each
through the light peer (`submit --datadir --bootstrap`). Each must settle
in one round with no provider slashed, and its outputs must equal
`nightshift run`'s of the same job byte for byte.
"""
import importlib.util
import json
import os
import shutil

import nstest
from nstest import check, check_eq, cli, log

spec = importlib.util.spec_from_file_location(
    "cross_device", os.path.join(nstest.REPO, "bench", "cross_device.py"))
xdev = importlib.util.module_from_spec(spec)
spec.loader.exec_module(xdev)


def test(net):
    tn, boot = nstest.testnet(net, 3)
    node0 = os.path.join(tn, "node0")
    work = os.path.join(net.dir, "jobs")
    os.makedirs(work)
    jobs = xdev.jobs(work)
    # the reference: every job run locally, its outputs kept aside
    ref = os.path.join(net.dir, "ref")
    os.makedirs(ref)
    for name, (flags, outs) in jobs.items():
        nstest.cli_ok("run", *flags, timeout=120)
        for o in outs:
            shutil.move(os.path.join(work, o), os.path.join(ref, o))
    light = ["--datadir", os.path.join(tn, "requester"), "--bootstrap", boot]
    for how, (name, (flags, outs)) in \
            [(["--node", node0], j) for j in jobs.items()] + \
            [(light, j) for j in jobs.items()]:
        for o in outs:
            if os.path.exists(os.path.join(work, o)):
                os.unlink(os.path.join(work, o))
        r = cli("submit", *how, *flags, "--max-price", 10,
                "--bid-window-ms", 50, "--json", timeout=120)
        check(r.returncode == 0, f"submit {how[0]} {name}: exit "
              f"{r.returncode}: {r.stderr.strip()[-600:]}")
        if r.returncode != 0:
            continue
        doc = json.loads(r.stdout)
        check_eq(doc["status"], "settled", f"{name}: status")
        check_eq(doc["slashed"], 0, f"{name}: an honest provider slashed")
        check_eq(doc["rounds"], 1, f"{name}: rounds")
        for o in outs:
            with open(os.path.join(work, o), "rb") as f, \
                    open(os.path.join(ref, o), "rb") as g:
                check(f.read() == g.read(),
                      f"{name}: {o} through {how[0]} differs from run's")
        log(f"submit {how[0]} {name}: settled, {len(outs)} output(s) equal "
            f"run's")


nstest.main(test, "every_job_node")
