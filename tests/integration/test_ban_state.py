#!/usr/bin/env python3
"""One ban state everywhere (issue 13, item 4), whatever order the entries
of a liar arrive in, and whatever the gossip layer has already seen.

An account signs two entries at seq 1: X, a CANCEL of a job that does not
exist (a market entry: refused by state at a free seq, checked for form
only at a seq already taken, docs/PROTOCOL.md "Forks"), and Y, a valid
TRANSFER. One signed envelope carrying X (same bytes, same message id) is
sent to node a first: a refuses X (no such job) and remembers the
message id as seen. Y then goes to node b and reaches everyone. Then the
same envelope of X goes to b: at b, X is a second signed entry at a used
seq, a fork, and b bans the account. Node a must learn of it although the
envelope b passes on is one a has seen: every node ends with the account
banned, Y voided, and the same ledger.
"""
import os
import subprocess
import time

import nstest
from nstest import check, check_eq, cli_ok, log

import ledgerutil as lu
from ledgerutil import forge, hex_of

CREDITS = 1000000


def send_entry(node, hexbytes, network_id, key, ts):
    r = subprocess.run([nstest.FLOOD_BIN, node.addr, "--entry", hexbytes,
                        "--network", network_id, "--key", key,
                        "--ts", str(ts)],
                       capture_output=True, text=True, timeout=30)
    check(r.returncode == 0, f"ns_flood to {node.name}: {r.stderr.strip()}")


def forge_cancel(author, network_id, seq, prev, job_hex):
    r = subprocess.run([lu.FORGE_BIN,
                        os.path.join(author.datadir, "node.key"),
                        network_id, str(seq), prev, "cancel", job_hex],
                       capture_output=True, text=True, timeout=20)
    check(r.returncode == 0, f"ns_forge exited {r.returncode}: {r.stderr}")
    return r.stdout.split()


def rejected(node):
    st = lu.ledger_status(node)
    return sum(st["rejected"].values())


def test(net):
    nodes = [net.node(n).init() for n in ("a", "b", "c")]
    mal, r = net.node("mallory").init(), net.node("r").init()
    g = net.genesis(nodes + [mal, r], credits=CREDITS)
    for n in nodes + [mal, r]:
        cli_ok("init", "--datadir", n.datadir, "--genesis", g)
    net.start_all(nodes)
    net.wait_mesh(nodes)
    a, b, c = nodes
    network_id = a.status()["network_id"]
    entries0 = lu.ledger_status(a)["entries"]
    key = os.path.join(mal.datadir, "node.key")
    ts = int(time.time() * 1000)

    x_hex, x_id = forge_cancel(mal, network_id, 1, "0" * 64, "ab" * 32)
    y_hex, y_id = forge(mal, network_id, 1, "0" * 64, r, 100)

    # 1. X alone at a: refused by state (no such job), nobody banned
    before = rejected(a)
    send_entry(a, x_hex, network_id, key, ts)
    nstest.wait_until(lambda: rejected(a) > before, 10,
                      "a to refuse the CANCEL of a job that does not exist")
    check(not lu.balance(a.datadir, mal.id)["banned"],
          "a banned the author for one refused entry")
    log("1: a refused X (a CANCEL of no job) at a free seq")

    # 2. Y at b reaches everyone
    send_entry(b, y_hex, network_id, key, ts + 1)
    lu.wait_converged(nodes, 20, "Y to reach every node",
                      min_entries=entries0 + 1)
    log("2: Y (a valid TRANSFER at the same seq) is on every node")

    # 3. the same envelope of X at b: a fork there; everyone must ban
    send_entry(b, x_hex, network_id, key, ts)

    def banned_everywhere():
        seen = {n.name: lu.balance(n.datadir, mal.id)["banned"]
                for n in nodes}
        return all(seen.values()), f"banned: {seen}"
    nstest.wait_until(banned_everywhere, 20,
                      "every node to ban the author of the fork")
    lu.wait_converged(nodes, 20, "the ledgers to agree after the fork",
                      min_entries=entries0, pending=0)
    for n in nodes:
        bal = lu.balance(n.datadir, mal.id)
        check_eq(bal["seq"], 0, f"mallory's seq on {n.name} (Y voided)")
        check_eq(lu.balance(n.datadir, r.id)["free"], CREDITS,
                 f"r's free on {n.name}")
    who = hex_of(mal.id)
    check(f"event=fork_detected author={who}" in b.log_text(),
          "b did not log the fork with its author")
    log("3: every node banned the author and voided Y, a included")


nstest.main(test, "ban_state")
