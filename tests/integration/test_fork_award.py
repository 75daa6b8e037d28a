#!/usr/bin/env python3
"""A requester forks its chain at its AWARD (issue 13, item 3): no
provider is frozen, every ledger ends in one state.

Four equally staked providers and a requester, mallory, whose `submit
--fault fork-award` signs, just before its AWARD, a TRANSFER at the same
seq and sends it straight to two of the three providers that did not win
(node/requester.c): the winner and one more hold the AWARD first, the
other two the TRANSFER, so neither branch gets more than half of the
stake's votes.

Before, the winner accepted the AWARD at once. The two nodes that held
the TRANSFER first voided it on seeing the fork, kept the AWARD only as
the fork's proof, and the winner's ACCEPT, which names it, waited there
for ever: the winner's chain was stuck on half of the network, and the
ledgers never converged. Now a provider accepts an AWARD only once the
stake confirmed it (or gives the job up when its requester is banned
meanwhile), and a fork takes a job entry nobody built on back like a
TRANSFER. Checked:

  1. every node bans mallory and ends with the same ledger (entries,
     digest, nothing waiting in the out-of-order buffer);
  2. the winner's chain goes on everywhere: a transfer it makes
     afterwards is on every node;
  3. an honest job afterwards settles, its output equal to `nightshift
     run`'s.
"""
import os
import re
import struct

import nstest
from nstest import check, check_eq, log

import ledgerutil as lu

N = 1024
STAKE = ("--set", "node.stake=100000")


def write_floats(path, seed):
    with open(path, "wb") as f:
        f.write(struct.pack(f"<{N}f", *((i * seed % 97) / 8.0
                                        for i in range(N))))


def job_flags(d, out):
    a, b = os.path.join(d, "a.bin"), os.path.join(d, "b.bin")
    return ["--builtin", "vector_add", "--global", str(N), "--arg",
            f"in:{a}", "--arg", f"in:{b}", "--arg",
            f"out:{4 * N}:{os.path.join(d, out)}", "--arg", f"u32:{N}"]


def test(net):
    provs = [net.node(f"p{i}").init() for i in range(4)]
    mal, req = net.node("mallory").init(), net.node("req").init()
    g = net.genesis([*provs, mal, req])
    for n in (*provs, mal, req):
        nstest.cli_ok("init", "--datadir", n.datadir, "--genesis", g)
    provs[0].start(extra=STAKE)
    for p in provs[1:]:
        p.start(bootstrap=[provs[0]], extra=STAKE)
    net.wait_mesh(provs)
    lu.wait_converged(provs, 30, "the stakes to reach every node",
                      min_entries=len(provs))
    d = net.dir
    write_floats(os.path.join(d, "a.bin"), 3)
    write_floats(os.path.join(d, "b.bin"), 7)

    # mallory's job: forked at its award
    r = nstest.cli("submit", "--datadir", mal.datadir, "--bootstrap",
                   provs[0].addr, *job_flags(d, "mal.bin"), "--max-price", "5",
                   "--bid-window-ms", "400", "--deadline-s", "8",
                   "--timeout-s", "12", "--fault", "fork-award", timeout=90)
    log(f"mallory's submit exited {r.returncode}: "
        f"{r.stderr.strip()[-400:]}")
    won = re.search(r"awarded to (\S+)", r.stderr)
    check(won is not None, f"mallory never awarded its job: {r.stderr[-800:]}")
    winner = next((p for p in provs if p.id.startswith(won.group(1))), None)
    check(winner is not None, f"no provider is {won.group(1)}")
    log(f"the award went to {winner.name}")

    # 1. one state everywhere, mallory banned, nothing stuck in a buffer
    lu.wait_converged(provs, 40, "the ledgers to converge after the fork")
    for p in provs:
        b = lu.balance(p.datadir, mal.id)
        check(b["banned"], f"mallory is not banned on {p.name}")
    said = [ln for ln in winner.log_text().splitlines()
            if "event=job_failed" in ln or "event=accepted" in ln or
            "event=award_unconfirmed" in ln]
    log(f"the winner: {said[-3:]}")

    # 2. the winner's chain goes on everywhere
    before = lu.balance(provs[0].datadir, winner.id)["seq"]
    lu.append(winner, "transfer", 1, to=req)
    lu.wait_converged(provs, 30, "the winner's transfer to reach every node")
    for p in provs:
        check_eq(lu.balance(p.datadir, winner.id)["seq"], before + 1,
                 f"the winner's seq on {p.name}")

    # 3. the market goes on
    nstest.cli_ok("run", *job_flags(d, "local.bin"), timeout=120)
    r = nstest.cli("submit", "--datadir", req.datadir, "--bootstrap",
                   provs[0].addr, *job_flags(d, "out.bin"), "--max-price", "5",
                   "--deadline-s", "60", timeout=120)
    check(r.returncode == 0, f"an honest job after the fork failed "
          f"({r.returncode}): {r.stderr.strip()[-800:]}")
    with open(os.path.join(d, "out.bin"), "rb") as f1, \
            open(os.path.join(d, "local.bin"), "rb") as f2:
        check(f1.read() == f2.read(), "the job's output differs from run's")
    log("an honest job settled after the fork")


nstest.main(test, "fork_award")
