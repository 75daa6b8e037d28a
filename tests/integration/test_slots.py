"""Slots are real: a provider with node.slots=2 runs two jobs at once, each
in its own sandboxed worker.

One provider (slots 2) and two requesters (light peers). Each requester
submits a kernel whose work-item 1 never ends, with a deadline of a few
seconds: both jobs are accepted and are in the provider's workers at the
same time (status: provider.running == 2), both end at their deadline,
and the slots are free again.
"""
import os
import subprocess
import time

import nstest
from nstest import check, check_eq, log

SPIN = """
kernel void spin(global volatile uint *out, uint forever)
{
    uint i = get_global_id(0);
    out[i] = i;
    if (i == 1)
        while (forever)
            out[i] = out[i] + 1u;
}
"""


def test(net):
    a = net.node("a").init()
    reqs = [net.node(f"r{i}").init() for i in range(2)]
    g = net.genesis([a, *reqs])
    for n in (a, *reqs):
        nstest.cli_ok("init", "--datadir", n.datadir, "--genesis", g)
    a.start(extra=("--set", "node.slots=2", "--set", "node.stake=100000"))
    spin = os.path.join(net.dir, "spin.cl")
    with open(spin, "w") as f:
        f.write(SPIN)
    nstest.wait_until(lambda: a.status()["provider"]["workers"] == 2, 10,
                      "the provider to have two workers")

    procs = []
    for i, r in enumerate(reqs):
        p = subprocess.Popen(
            [nstest.BIN, "submit", "--datadir", r.datadir, "--bootstrap",
             a.addr, "--kernel", spin, "--entry", "spin", "--global", "64",
             "--arg", f"out:256:{os.path.join(net.dir, f'o{i}.bin')}",
             "--arg", "u32:1", "--max-price", "10", "--deadline-s", "12",
             "--timeout-s", "14"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            stdin=subprocess.DEVNULL)
        net.at_exit(p.kill)
        procs.append(p)
    seen = []

    def both_running():
        prov = a.status()["provider"]
        seen.append(prov["running"])
        return prov["running"] == 2, f"running {prov['running']}"
    try:
        nstest.wait_until(both_running, 20, "both jobs to run at once",
                          interval=0.2)
    except nstest.TestFailure:
        for i, p in enumerate(procs):  # what each requester went through
            p.kill()
            log(f"r{i} said: {p.communicate()[1][-2500:]}")
        raise
    log(f"both jobs in the provider's workers at once (samples {seen})")
    for p in procs:
        p.wait(timeout=60)
        check_eq(p.returncode, 1, "exit status of an endless job")
    nstest.wait_until(lambda: a.status()["provider"]["running"] == 0, 10,
                      "the workers to be free")


nstest.main(test, "slots")
