#!/usr/bin/env python3
"""Forks across a partition, with stake (issue 13, item 3; docs/PROTOCOL.md,
"Confirmation"): four nodes stake equally. An account signs two TRANSFERs
at one seq (tests/tools/forge.c) and they are injected on the two sides of
a partition (`block`).

3/1: the side of three confirms its branch (3/4 of the stake voted for
it), and the recipient there, a running node, takes the credit in while
the partition lasts. The lone node cannot confirm the other branch (1/4)
and its recipient does not take that credit in. Once the partition heals,
every node keeps the confirmed branch (the lone node voids its own and
puts the confirmed entry in its place), the recipient's claim is accepted
everywhere, and all ledgers end identical: no innocent chain is blocked.

2/2: neither branch reaches more than half of the stake: nobody takes a
credit in, and once healed every node voids both branches, as without
stake."""
import time

import nstest
from nstest import check, check_eq, cli, log

import ledgerutil as lu
from ledgerutil import forge, hex_of, inject

CREDITS = 1000000
MICRO = 10**6  # a forged TRANSFER carries micro-credits
STAKE = 1000
HB_MS = 300
BLOCK_MS = 6000


def block(sides, ms):
    """Cut every link between the two lists of nodes, both ways."""
    for a in sides[0]:
        for b in sides[1]:
            for x, y in ((a, b), (b, a)):
                r = cli("block", "--datadir", x.datadir, y.id, "--ms", ms)
                check(r.returncode == 0,
                      f"block on {x.name} exited {r.returncode}: "
                      f"{r.stderr.strip()}")
    return time.monotonic() + ms / 1000.0


def free_on(node, account):
    return lu.balance(node.datadir, account.id)["free"]


def round_3_1(net, nodes, mal, network_id):
    a_side, b_side = nodes[:3], nodes[3:]
    r_a, r_b = nodes[1], nodes[3]  # each branch pays a running node
    before_a = free_on(nodes[0], r_a)
    before_b = free_on(nodes[0], r_b)
    ends = block((a_side, b_side), BLOCK_MS)
    x_hex, x_id = forge(mal, network_id, 1, "0" * 64, r_a, 100 * MICRO)
    y_hex, y_id = forge(mal, network_id, 1, "0" * 64, r_b, 200 * MICRO)
    inject([(nodes[0], x_hex), (nodes[3], y_hex)], network_id)
    log(f"3/1: {mal.name} pays {r_a.name} 100 on {[n.name for n in a_side]}"
        f", {r_b.name} 200 on {[n.name for n in b_side]}")

    def claimed_on_a():
        got = [free_on(n, r_a) for n in a_side]
        return all(g == before_a + 100 for g in got), str(got)
    nstest.wait_until(claimed_on_a, BLOCK_MS / 1000.0 - 1.5,
                      f"{r_a.name} to take the confirmed credit in on its "
                      f"side while the partition lasts")
    check_eq(free_on(nodes[3], r_b), before_b,
             f"{r_b.name}'s free on its side (1/4 of the stake cannot "
             f"confirm its credit)")
    time.sleep(max(0.0, ends - time.monotonic()))
    for a in a_side:  # heal at once rather than at the next dial
        cli("connect", "--datadir", nodes[3].datadir, a.addr)
    log("3/1: partition healed")

    def resolved():
        seen = []
        for n in nodes:
            b = lu.balance(n.datadir, mal.id)
            doc = lu.ledger(n.datadir, author=mal.id)
            ids = [e["id"] for e in doc["list"]]
            seen.append((n.name, b["banned"], b["seq"], ids))
        ok = all(s[1] and s[2] == 1 and s[3] == [x_id] for s in seen)
        return ok, str(seen)
    nstest.wait_until(resolved, 30, "every node to ban the author and keep "
                                    "the confirmed branch")
    lu.wait_converged(nodes, 30, "the 3/1 fork to resolve", pending=0)
    for n in nodes:
        check_eq(free_on(n, r_a), before_a + 100,
                 f"{r_a.name}'s free on {n.name}")
        check_eq(free_on(n, r_b), before_b, f"{r_b.name}'s free on {n.name}")
    check(f"event=fork_adopted author={hex_of(mal.id)}"
          in nodes[3].log_text(),
          "the lone node did not log that it put the confirmed entry in "
          "place")


def round_2_2(net, nodes, mal, network_id):
    a_side, b_side = nodes[:2], nodes[2:]
    r_a, r_b = nodes[0], nodes[2]
    before = [free_on(nodes[0], r) for r in (r_a, r_b)]
    ends = block((a_side, b_side), BLOCK_MS)
    x_hex, _ = forge(mal, network_id, 1, "0" * 64, r_a, 100 * MICRO)
    y_hex, _ = forge(mal, network_id, 1, "0" * 64, r_b, 200 * MICRO)
    inject([(nodes[0], x_hex), (nodes[2], y_hex)], network_id)
    log(f"2/2: {mal.name} pays {r_a.name} on one side, {r_b.name} on the "
        f"other")
    time.sleep(max(0.0, ends - time.monotonic()))
    for (n, r), b in zip(((nodes[0], r_a), (nodes[2], r_b)), before):
        check_eq(free_on(n, r), b, f"{r.name}'s free on its own side (half "
                                   f"the stake does not confirm)")
    for a in a_side:
        for b in b_side:
            cli("connect", "--datadir", b.datadir, a.addr)
    log("2/2: partition healed")

    def resolved():
        seen = [(n.name, lu.balance(n.datadir, mal.id)) for n in nodes]
        ok = all(b["banned"] and b["seq"] == 0 for _, b in seen)
        return ok, str([(nm, b["banned"], b["seq"]) for nm, b in seen])
    nstest.wait_until(resolved, 30, "every node to void both branches")
    lu.wait_converged(nodes, 30, "the 2/2 fork to resolve", pending=0)
    for n in nodes:
        for r, b in zip((r_a, r_b), before):
            check_eq(free_on(n, r), b, f"{r.name}'s free on {n.name}")


def test(net):
    net.heartbeat_ms = HB_MS
    nodes = [net.node(f"node{i}").init() for i in range(4)]
    mal, mal2 = (net.node(n).init() for n in ("mallory", "mallory2"))
    g = net.genesis(nodes + [mal, mal2], credits=CREDITS)
    for n in nodes + [mal, mal2]:
        nstest.cli_ok("init", "--datadir", n.datadir, "--genesis", g)
    net.start_all(nodes)
    net.wait_mesh(nodes)
    network_id = nodes[0].status()["network_id"]
    for n in nodes:
        lu.append(n, "stake", STAKE)
    lu.wait_converged(nodes, 30, "the stakes to reach every node",
                      min_entries=len(nodes), pending=0)
    for n in nodes:
        st = n.status()["votes"]
        check_eq(st["total_stake"], len(nodes) * STAKE * MICRO,
                 f"total stake as {n.name} weighs votes")

    round_3_1(net, nodes, mal, network_id)
    round_2_2(net, nodes, mal2, network_id)


nstest.main(test, "forks_confirmed")
