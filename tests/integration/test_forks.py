#!/usr/bin/env python3
"""Forks are resolved the same way everywhere (issue 13, item 3): an account
signs two TRANSFERs at one seq to two recipients (tests/tools/forge.c) and
they are injected at once at different nodes of a 4-node network
(ns_flood --entry), first split 2/2, then, with a second account, 3/1.
Every node detects the fork, names the author in its log, bans it and
voids both branches: all nodes end with the same entries, digest and
pending credits, the author at seq 0 with its genesis credits, and no
credit from either branch. Then a recipient's own node starts, catches
up and appends: its chain is not blocked anywhere."""
import nstest
from nstest import check, check_eq, cli_ok, log

import ledgerutil as lu
from ledgerutil import forge, hex_of, inject

CREDITS = 1000000


def fork_round(nodes, author, r1, r2, split, network_id, min_entries):
    t1, id1 = forge(author, network_id, 1, "0" * 64, r1, 100)
    t2, id2 = forge(author, network_id, 1, "0" * 64, r2, 200)
    check(id1 != id2, "the two branches have one id")
    plan = [(n, t1) for n in nodes[:split]] + [(n, t2) for n in nodes[split:]]
    log(f"{split}/{len(nodes) - split} split: {author.name} pays "
        f"{r1.name} on {[n.name for n, _ in plan[:split]]}, {r2.name} on "
        f"the others")
    inject(plan, network_id)

    def resolved():
        seen = [(n.name, lu.balance(n.datadir, author.id)) for n in nodes]
        ok = all(b["banned"] and b["seq"] == 0 for _, b in seen)
        return ok, "(node, banned, seq): " + str(
            [(name, b["banned"], b["seq"]) for name, b in seen])
    nstest.wait_until(resolved, 30, f"every node to ban {author.name} and "
                                    f"void both branches")
    lu.wait_converged(nodes, 30, f"the {split}/{len(nodes) - split} fork to "
                                 f"resolve", min_entries=min_entries,
                      pending=0)
    who = hex_of(author.id)
    for n in nodes:
        b = lu.balance(n.datadir, author.id)
        check(b["banned"], f"{n.name}: {author.name} not banned: {b}")
        check_eq(b["seq"], 0, f"{author.name}'s seq on {n.name}")
        check_eq(b["free"], CREDITS, f"{author.name}'s free on {n.name}")
        for r in (r1, r2):
            check_eq(lu.balance(n.datadir, r.id)["free"], CREDITS,
                     f"{r.name}'s free on {n.name}")
        doc = lu.ledger(n.datadir, author=author.id)
        check_eq(len(doc["list"]), 0, f"{author.name}'s entries on {n.name}")
    named = [n.name for n in nodes
             if f"event=fork_detected author={who}" in n.log_text()]
    check(named, f"no node logged the fork with the author {who[:16]}")


def test(net):
    nodes = [net.node(f"node{i}").init() for i in range(4)]
    mal, mal2, r1, r2 = (net.node(n).init()
                         for n in ("mallory", "mallory2", "r1", "r2"))
    g = net.genesis(nodes + [mal, mal2, r1, r2], credits=CREDITS)
    for n in nodes + [mal, mal2, r1, r2]:
        cli_ok("init", "--datadir", n.datadir, "--genesis", g)
    net.start_all(nodes)
    net.wait_mesh(nodes)
    network_id = nodes[0].status()["network_id"]
    entries0 = lu.ledger_status(nodes[0])["entries"]

    fork_round(nodes, mal, r1, r2, 2, network_id, entries0)
    fork_round(nodes, mal2, r2, r1, 3, network_id, entries0)

    # A recipient's chain goes on: its node starts, catches up, appends.
    r1.start(bootstrap=[nodes[0]])
    everyone = nodes + [r1]
    net.wait_mesh(everyone, timeout=40)
    lu.append(r1, "transfer", 5, to=nodes[1])
    lu.wait_converged(everyone, 30, "r1's transfer to reach every node",
                      min_entries=entries0 + 1)
    for n in everyone:
        check_eq(lu.balance(n.datadir, r1.id)["seq"], 1,
                 f"r1's seq on {n.name}")


nstest.main(test, "forks")
