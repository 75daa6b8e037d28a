#!/usr/bin/env python3
"""Head sync lists only the heads that changed (docs/PROTOCOL.md,
"Incremental heads"), on real nodes: a source with 200 authors' chains
(ns_ledger_fill) and two fresh nodes that catch up from it, gossip pull
repair off so that the ledger's own sync does the work. While the nodes
append now and then, a HEADS answer lists a few heads, not the 200+ every
exchange listed before, and nothing is taken for a divergence; a node
restarted while the others append (its cursors gone, its epoch new)
catches up with a full listing and goes back to incremental exchanges;
every ledger ends identical."""
import os
import subprocess
import time

import nstest
from nstest import check, log

import ledgerutil as lu

HB_MS = 400
AUTHORS = 200
FILL_BIN = os.environ.get("NS_LEDGER_FILL_BIN") or os.path.join(
    os.path.dirname(nstest.BIN), "tests", "integration", "ns_ledger_fill")


def heads(node):
    st = node.status()
    h = st["ledger"]["heads"]
    h["answers"] = st["messages"]["by_type"].get("18", [0])[0]
    return h


def appends(nodes, seconds, every=0.3):
    t0 = time.monotonic()
    k = 0
    while time.monotonic() - t0 < seconds:
        lu.append(nodes[k % len(nodes)], "stake", 1)
        k += 1
        time.sleep(max(0.0, t0 + k * every - time.monotonic()))
    return k


def test(net):
    net.heartbeat_ms = HB_MS
    check(os.access(FILL_BIN, os.X_OK), f"no ns_ledger_fill at {FILL_BIN} "
                                        f"(set NS_LEDGER_FILL_BIN)")
    n0, n1, n2 = nodes = [net.node(f"n{i}").init() for i in range(3)]
    genesis = net.genesis(nodes, os.path.join(net.dir, "genesis.ini"),
                          credits=10 ** 12)
    for n in nodes:
        nstest.cli_ok("init", "--datadir", n.datadir, "--genesis", genesis)
    lu.no_pull_repair(nodes)
    r = subprocess.run([FILL_BIN, "--build", n0.datadir, str(AUTHORS), "1"],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"ns_ledger_fill failed ({r.returncode}): "
                             f"{r.stderr.strip()} {r.stdout.strip()}")
    n0.start()
    n1.start(bootstrap=[n0])
    n2.start(bootstrap=[n0])
    net.wait_mesh(nodes)
    lu.wait_converged(nodes, 40, "two fresh nodes to catch up",
                      min_entries=2 * AUTHORS)
    log(f"{AUTHORS} authors caught up by two fresh nodes")

    # Warm-up: each node's first exchange with a peer is a full listing.
    appends(nodes, 5)
    before = [heads(n) for n in nodes]
    k = appends(nodes, 8)
    after = [heads(n) for n in nodes]
    for n, b, a in zip(nodes, before, after):
        answers = a["answers"] - b["answers"]
        items = a["items_in"] - b["items_in"]
        inc = a["incremental"] - b["incremental"]
        log(f"{n.name}: {answers} HEADS, {items} heads listed, {inc} "
            f"incremental and {a['full'] - b['full']} full exchanges asked "
            f"while {k} entries were appended round the nodes")
        check(inc >= 3, f"{n.name} asked {inc} incremental exchanges in 8 s")
        check(a["full"] - b["full"] <= 2,
              f"{n.name} asked {a['full'] - b['full']} full listings in 8 s "
              f"(at most one per peer it had not asked yet)")
        check(a["divergent"] == b["divergent"],
              f"{n.name} took {a['divergent'] - b['divergent']} exchanges "
              f"for a divergence")
        check(answers > 0 and items <= 20 * answers,
              f"{n.name}: {items} heads in {answers} HEADS answers: a few "
              f"each expected, not the {AUTHORS + 3} every exchange listed "
              f"before")
    lu.wait_converged(nodes, 20, "the ledgers to converge after the appends")

    # A restart: n2's cursors go, its epoch changes; it misses appends.
    n2.stop()
    appends([n0, n1], 3)
    n2.start(bootstrap=[n0, n1])
    lu.wait_converged(nodes, 30, "the restarted node to catch up")
    h2 = heads(n2)
    check(h2["full"] >= 1, f"the restarted node asked no full listing: {h2}")
    log(f"n2 restarted and caught up: {h2['full']} full, "
        f"{h2['incremental']} incremental exchanges")
    appends(nodes, 4)
    h2b = heads(n2)
    check(h2b["incremental"] > h2["incremental"],
          f"the restarted node went back to no incremental exchange: {h2b}")
    lu.wait_converged(nodes, 20, "the ledgers to converge at the end")
    lu.check_identical(nodes, [n.id for n in nodes])


nstest.main(test, "heads_incremental")
