#!/usr/bin/env python3
"""A fresh node catches up a ledger written by many accounts. A source
datadir gets a ledger made by ns_ledger_fill (bench/bench_ledger.c --build:
the source's key funds N accounts, each then writes a chain of transfers,
stakes and unstakes that take in each other's credits, so entries name
entries of other chains in their refs); a node runs on it, and a fresh
node that bootstraps to it must end with the same entries and heads
digest. Once with fewer authors than the ranges one sync round asks for,
once with more, and once with last round's livelock: 100 authors x 80
entries crediting each other, more than the old 4096-entry out-of-order
buffer held while they waited on each other, so the catch-up never
finished."""
import os
import subprocess
import time

import nstest
from nstest import check, log

import ledgerutil as lu

HB_MS = 400
# (authors, entries per author, seconds allowed for the catch-up)
ROUNDS = [(30, 20, 30), (80, 50, 40), (100, 80, 60)]

FILL_BIN = os.environ.get("NS_LEDGER_FILL_BIN") or os.path.join(
    os.path.dirname(nstest.BIN), "tests", "integration", "ns_ledger_fill")


def catch_up(net, authors, per_author, timeout):
    tag = f"a{authors}"
    src = net.node(f"{tag}-source").init()
    fresh = net.node(f"{tag}-fresh").init()
    # The source's key must fund every author (1000000 each).
    genesis = net.genesis([src, fresh], os.path.join(net.dir,
                                                     f"{tag}-genesis.ini"),
                          credits=10 ** 12)
    for n in (src, fresh):
        nstest.cli_ok("init", "--datadir", n.datadir, "--genesis", genesis)
    r = subprocess.run([FILL_BIN, "--build", src.datadir, str(authors),
                        str(per_author)], capture_output=True, text=True,
                       timeout=120)
    check(r.returncode == 0, f"ns_ledger_fill failed ({r.returncode}): "
                             f"{r.stderr.strip()} {r.stdout.strip()}")
    want = authors + authors * per_author
    src.start()
    st = lu.ledger_status(src)
    check(st["entries"] == want, f"the source holds {st['entries']} "
                                 f"entries, ns_ledger_fill made {want}")
    t0 = time.monotonic()
    fresh.start(bootstrap=[src])
    try:
        lu.wait_converged([src, fresh], timeout,
                          f"a fresh node to catch up {want} entries by "
                          f"{authors + 1} authors", min_entries=want)
    except nstest.TestFailure as e:
        lg = lu.ledger_status(fresh)
        raise nstest.TestFailure(
            f"{e}\n  the fresh node stalled at {lg['entries']}/{want} "
            f"entries with {lg['buffered']} buffered, after {lg['ranges_in']}"
            f" ENTRIES replies ({authors + 1} authors; a sync round asks "
            f"for at most 64 ranges)")
    took = time.monotonic() - t0
    log(f"{authors + 1} authors, {want} entries: caught up in {took:.1f}s")
    lu.check_identical([src, fresh], [src.id, fresh.id])
    for n in (src, fresh):
        n.stop()


def test(net):
    net.heartbeat_ms = HB_MS
    check(os.access(FILL_BIN, os.X_OK), f"no ns_ledger_fill at {FILL_BIN} "
                                        f"(set NS_LEDGER_FILL_BIN)")
    for authors, per_author, timeout in ROUNDS:
        catch_up(net, authors, per_author, timeout)


nstest.main(test, "ledger_catchup")
