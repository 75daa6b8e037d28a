#!/usr/bin/env python3
"""Sybil and eclipse resistance (issue 13, item 2) and envelope caps
(item 6), with real nodes on loopback and a hostile peer (ns_flood).

The attack: over ONE link, heartbeats each signed by a fresh key (keys cost
nothing), each advertising a dead endpoint. Before the fix, 200 of them
filled every node's peer table (the target gossiped them on), honest nodes
lost their honest peers, ledger entries stopped propagating, a restarted
node could not rejoin and jobs found no provider.

What must hold now (docs/PROTOCOL.md, "Peer admission and scores"):
  * a heartbeat interval of an hour is refused (bounded intervals);
  * under the flood every honest node keeps every honest peer, and no fake
    key is ever a live peer anywhere (only reachable keys are);
  * the flooder's link ran out of its budget of unknown keys;
  * a ledger entry appended during the flood reaches every node within a
    few seconds;
  * a node restarted while a flood goes on rejoins the whole mesh;
  * a job still finds a provider and settles;
  * an envelope of exactly NS_MAX_MSG reaches ingest (no too_big), one
    byte more is counted as too_big.

Short form for CI: 200 keys. NS_LONG=1 (or --long): 2,000 keys.
"""
import os
import random
import struct
import sys
import threading
import time

import ledgerutil
import nstest
from nstest import check, check_eq, cli, log

HB_MS = 500
LONG = os.environ.get("NS_LONG") == "1" or "--long" in sys.argv
KEYS = 2000 if LONG else 200
N = 5
NS_MAX_MSG = 256 * 1024
PROPAGATION_S = 5.0  # "ledger entries reach every node within a few s"


def flood(target, *args, timeout=120):
    """Run ns_flood against target; return its summary fields."""
    r = nstest.subprocess.run([nstest.FLOOD_BIN, target.addr,
                               *map(str, args)], capture_output=True,
                              text=True, timeout=timeout,
                              stdin=nstest.subprocess.DEVNULL)
    check(r.returncode == 0, f"ns_flood {' '.join(map(str, args))} exited "
                             f"{r.returncode}: {r.stderr.strip()}")
    last = r.stdout.splitlines()[-1]
    check(last.startswith("sent "), f"ns_flood summary: {r.stdout}")
    log(f"ns_flood {' '.join(map(str, args))}: {last}")
    return dict(kv.split("=", 1) for kv in last.split()[1:])


def mesh_report(nodes):
    """(every node lists every other one, no node lists a stranger,
    detail)."""
    honest = {n.id for n in nodes}
    bad = []
    strangers = 0
    for n in nodes:
        check(n.running(), f"{n.name} died: {n.log_tail(5)}")
        got = n.peer_ids()
        lack = honest - {n.id} - got
        extra = got - honest
        strangers += len(extra)
        if lack:
            bad.append(f"{n.name} lacks {len(lack)}")
        if extra:
            bad.append(f"{n.name} lists {len(extra)} fake peers")
    return not bad, strangers, ", ".join(bad)


def test(net):
    nodes = net.make_nodes(N)
    for n in nodes:  # providers, as testnet/run.sh makes them
        nstest.cli_ok("init", "--datadir", n.datadir, "--set",
                      "node.stake=500000")
    net.start_all(nodes)
    net.wait_mesh(nodes)
    ledgerutil.wait_converged(nodes, 30, "the genesis stakes to converge")
    target = nodes[2]
    network_id = target.status()["network_id"]
    honest = {n.id for n in nodes}

    # -- 1. an interval of an hour is refused outright -------------------
    d0 = target.status()["dropped"]
    flood(target, "--sybil", 20, "--interval-ms", 3600000, "--network",
          network_id)
    nstest.wait_until(
        lambda: (target.status()["dropped"]["invalid"] - d0["invalid"] >= 20,
                 target.status()["dropped"]),
        10, "20 heartbeats with an hour's interval to be refused as invalid")

    # -- 2. the flood: KEYS fresh keys over one link ------------------------
    st0 = target.status()
    t0 = time.monotonic()
    flood(target, "--sybil", KEYS, "--interval-ms", 60000, "--rate", 0,
          "--network", network_id)

    def refused():
        # Past the link's burst of unknown keys (16, + 2/s) each key is
        # refused, unless the per-link message limit cut it first.
        st = target.status()
        n = (st["messages"]["new_keys_limited"]
             - st0["messages"]["new_keys_limited"]
             + st["dropped"]["rate_limited"] - st0["dropped"]["rate_limited"])
        return n >= KEYS - 40, f"{n} of {KEYS} refused"
    nstest.wait_until(refused, 20, "the flooder's link to run out of its "
                                   "budget of unknown keys")
    # Watch the mesh for a while: it must stay whole at every look.
    worst_strangers = 0
    looks = 0
    while time.monotonic() - t0 < 6.0 or looks < 5:
        ok, strangers, detail = mesh_report(nodes)
        check(ok, f"the honest mesh broke under {KEYS} fake keys: {detail}")
        worst_strangers = max(worst_strangers, strangers)
        looks += 1
        time.sleep(0.3)
    st = target.status()
    log(f"after {KEYS} fake keys: mesh whole at {looks} looks; target "
        f"peers={st['peers']} connecting={st['peers_connecting']} "
        f"new_keys_limited={st['messages']['new_keys_limited']} "
        f"table_full={st['messages']['peer_table_full']}")
    check(st["peers_connecting"] <= 40,
          f"{st['peers_connecting']} unreachable entries on the target")

    # -- 3. ledger entries still reach every node ------------------------
    fl = {}
    th = threading.Thread(target=lambda: fl.update(flood(
        target, "--sybil", KEYS, "--interval-ms", 60000, "--rate",
        max(KEYS // 4, 1), "--network", network_id)))
    th.start()
    entry = ledgerutil.append(nodes[0], "transfer", 1234, to=nodes[4])
    t1 = time.monotonic()

    def everywhere():
        missing = [n.name for n in nodes if not any(
            e["id"] == entry for e in ledgerutil.ledger(
                n.datadir, limit=50, author=nodes[0].id)["list"])]
        return not missing, f"missing on {missing}"
    nstest.wait_until(everywhere, PROPAGATION_S,
                      "a transfer appended during the flood to reach every "
                      "node", interval=0.1)
    log(f"transfer reached all {N} nodes in "
        f"{time.monotonic() - t1:.2f}s during a flood")

    # -- 4. a restarted node rejoins while the flood goes on ---------------
    # Stopped until every other node forgot it, back on a new port.
    back = nodes[3]
    others = [n for n in nodes if n is not back]
    back.stop()
    nstest.wait_until(
        lambda: (not [n.name for n in others if back.id in n.peer_ids()],
                 [n.name for n in others if back.id in n.peer_ids()]),
        10, f"{back.name} to be forgotten")
    back.start(bootstrap=[nodes[0], nodes[1]])
    t2 = time.monotonic()

    def rejoined():
        ok, _, detail = mesh_report(nodes)
        stale = [n.name for n in others
                 if {p["id"]: p["endpoint"] for p in n.peers()}.get(back.id)
                 != back.endpoint]
        return ok and not stale, f"{detail}; old endpoint on {stale}"
    nstest.wait_until(rejoined, 20, f"{back.name} to rejoin the whole mesh",
                      interval=0.2)
    log(f"{back.name} rejoined the whole mesh "
        f"{time.monotonic() - t2:.2f}s after it answered status (a flood "
        f"going on)")
    th.join()
    ok, strangers, detail = mesh_report(nodes)
    check(ok, f"after the restart: {detail}")
    ledgerutil.wait_converged(nodes, 15, "the ledgers to converge after "
                                         "the flood and the restart")

    # -- 5. jobs still match -------------------------------------------------
    n = 1024
    a = [random.uniform(-1, 1) for _ in range(n)]
    b = [random.uniform(-1, 1) for _ in range(n)]
    pa, pb = os.path.join(net.dir, "a.bin"), os.path.join(net.dir, "b.bin")
    with open(pa, "wb") as f:
        f.write(struct.pack(f"{n}f", *a))
    with open(pb, "wb") as f:
        f.write(struct.pack(f"{n}f", *b))
    out = os.path.join(net.dir, "out.bin")
    r = cli("submit", "--node", nodes[0].datadir, "--builtin", "vector_add",
            "--global", n, "--arg", f"in:{pa}", "--arg", f"in:{pb}",
            "--arg", f"out:{4 * n}:{out}", "--arg", f"u32:{n}",
            "--max-price", 10, "--bid-window-ms", 100, timeout=120)
    check(r.returncode == 0, f"submit after the flood failed: "
                             f"{r.stderr[-800:]}")
    with open(out, "rb") as f:
        got = struct.unpack(f"{n}f", f.read())
    check(all(abs(g - (x + y)) < 1e-5 for g, x, y in zip(got, a, b)),
          "the job's output is wrong")
    log("a job matched and settled after the flood")

    # -- 6. envelope caps (item 6) -------------------------------------------
    st0 = target.status()
    flood(target, "--size", NS_MAX_MSG, "--network", network_id)
    nstest.wait_until(
        lambda: (target.status()["dropped"]["total"]
                 > st0["dropped"]["total"], target.status()["dropped"]),
        10, f"an envelope of exactly {NS_MAX_MSG} bytes to reach ingest")
    st1 = target.status()
    check_eq(st1["dropped"]["too_big"], st0["dropped"]["too_big"],
             f"too_big after an envelope of exactly NS_MAX_MSG bytes")
    flood(target, "--size", NS_MAX_MSG + 1, "--network", network_id)
    nstest.wait_until(
        lambda: (target.status()["dropped"]["too_big"]
                 == st1["dropped"]["too_big"] + 1,
                 target.status()["dropped"]["too_big"]),
        10, f"an envelope of NS_MAX_MSG + 1 bytes to count as too_big")
    flood(target, "--size", 2 * NS_MAX_MSG - 300, "--network", network_id)
    nstest.wait_until(
        lambda: (target.status()["dropped"]["too_big"]
                 == st1["dropped"]["too_big"] + 2,
                 target.status()["dropped"]["too_big"]),
        10, f"an envelope of 2 * NS_MAX_MSG - 300 bytes to count as too_big")
    check(target.running(), "the target died")
    ok, _, detail = mesh_report(nodes)
    check(ok, f"at the end: {detail}")


nstest.main(test, "sybil_long" if LONG else "sybil")
