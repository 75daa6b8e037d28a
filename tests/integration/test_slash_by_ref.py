"""A SLASH whose inputs are too large to travel inside the entry, on a
4-node network: every node fetches the inputs by hash, re-runs the
disputed unit itself and applies the SLASH; nobody applies it without the
re-run, and every node ends with the same ledger.

node3 is lazy (--fault lazy=0.5) and cheap, so it wins the first round;
the others are honest and dear. The job (a 32768-float vector add, 256 KiB
of inputs) settles on an honest node after the slash. Checked on every
node: node3 slashed once, its collateral burned, the same burned total,
the same digest; the nodes that had not run the job logged that they
fetched the inputs (event=blob_fetched) into their blob stores (part
files renamed under the inputs' hashes) and none logged a SLASH applied
without a re-run; node3 logged that it was slashed (event=slashed, warn)
and that its award ended.
"""
import hashlib
import json
import os
import random
import struct
import time

import nstest
from ledgerutil import balance, ledger
from nstest import check, check_eq, cli, log

N = 4
HONEST_PRICE = 10_000_000


def test(net):
    nodes = [net.node(f"node{i}").init() for i in range(N)]
    req = net.node("req").init()
    g = net.genesis(nodes + [req])
    for n in nodes + [req]:
        nstest.cli_ok("init", "--datadir", n.datadir, "--genesis", g)
    common = ["--set", "node.stake=100000"]
    nodes[0].start(extra=common + ["--set", f"node.price={HONEST_PRICE}"])
    boot = [nodes[0]]
    for n in nodes[1:3]:
        n.start(bootstrap=boot, wait=False,
                extra=common + ["--set", f"node.price={HONEST_PRICE}"])
    nodes[3].start(bootstrap=boot, wait=False,
                   extra=common + ["--fault", "lazy=0.5"])
    for n in nodes[1:]:
        n.wait_started()
    net.wait_mesh(nodes)

    n_f = 32768
    a = [random.uniform(-1, 1) for _ in range(n_f)]
    b = [random.uniform(-1, 1) for _ in range(n_f)]
    pa, pb = os.path.join(net.dir, "a.bin"), os.path.join(net.dir, "b.bin")
    with open(pa, "wb") as f:
        f.write(struct.pack(f"{n_f}f", *a))
    with open(pb, "wb") as f:
        f.write(struct.pack(f"{n_f}f", *b))
    hashed = []  # the store's names for them: BLAKE2b-256, hex
    for path in (pa, pb):
        with open(path, "rb") as f:
            hashed.append(hashlib.blake2b(f.read(), digest_size=32)
                          .hexdigest())
    out = os.path.join(net.dir, "c.bin")
    t0 = time.monotonic()
    r = cli("submit", "--datadir", req.datadir, "--bootstrap", nodes[0].addr,
            "--builtin", "vector_add", "--global", str(n_f), "--arg",
            f"in:{pa}", "--arg", f"in:{pb}", "--arg", f"out:{4 * n_f}:{out}",
            "--arg", f"u32:{n_f}", "--max-price", 1000, "--collateral", 400,
            "--bid-window-ms", 400, "--work", str(10 ** 10), "--json",
            timeout=150)
    log(f"submit: exit {r.returncode} in {time.monotonic() - t0:.1f}s: "
        f"{r.stdout.strip()[:300]} {r.stderr.strip()[-300:]}")
    check(r.returncode == 0, f"the job did not settle: {r.stderr[-600:]}")
    receipt = json.loads(r.stdout)
    check_eq(receipt["slashed"], 1, "slashes in the receipt")
    check(receipt["provider"] != nodes[3].id, "the lazy node was paid")
    want = [x + y for x, y in zip(struct.unpack(f"{n_f}f",
                                                struct.pack(f"{n_f}f", *a)),
                                  struct.unpack(f"{n_f}f",
                                                struct.pack(f"{n_f}f", *b)))]
    with open(out, "rb") as f:
        got = struct.unpack(f"{n_f}f", f.read())
    check(all(abs(x - y) <= 1e-6 * max(1, abs(y)) for x, y in zip(got, want)),
          "the settled output is wrong")

    # every node applies the SLASH after fetching the inputs and re-running
    def slashed_everywhere():
        seen = []
        for n in nodes:
            bal = balance(n.datadir, nodes[3].id)
            seen.append(bal["jobs_slashed"])
        return (all(s == 1 for s in seen), f"slashed counts {seen}")
    nstest.wait_until(slashed_everywhere, 60, "every node to apply the SLASH",
                      interval=0.5)

    def same_ledgers():
        sums = [ledger(n.datadir, 1) for n in nodes]
        keys = {(s["entries"], s["burned"]) for s in sums}
        return (len(keys) == 1, f"(entries, burned) per node "
                                f"{[(s['entries'], s['burned']) for s in sums]}")
    nstest.wait_until(same_ledgers, 60, "the ledgers to agree", interval=0.5)
    burned = ledger(nodes[0].datadir, 1)["burned"]
    check_eq(burned, 400, "burned credits (the lazy node's collateral)")
    for n in nodes:
        text = n.log_text()
        check("slash_checked_without_rerun" not in text,
              f"{n.name} applied a SLASH without re-running it")
    fetched = [n for n in nodes if "event=blob_fetched" in n.log_text()]
    log(f"nodes that fetched the inputs by hash: "
        f"{[n.name for n in fetched]}")
    check(len(fetched) >= 2, f"only {fetched} fetched the inputs by hash")
    # received into the blob store as they arrived (a part file, hashed on
    # the way, renamed once whole), not in memory: the inputs are there
    # under their hashes, no part file is left, no spool failed
    for n in fetched:
        text = n.log_text()
        check("event=blob_spool_failed" not in text and
              "via=memory" not in text and "via=file" in text,
              f"{n.name} received the inputs in memory: " +
              str([l for l in text.splitlines() if "event=blob_" in l]))
        names = os.listdir(os.path.join(n.datadir, "blobs"))
        check(not [f for f in names if f.endswith(".part")],
              f"{n.name} left part files: {names}")
        check({hashed[0], hashed[1]} <= set(names),
              f"{n.name}'s store lacks the inputs: {names}")

    # the slashed node says so in its log, with the job whose award ended
    def told():
        lines = nodes[3].log_text().splitlines()
        sl = [l for l in lines if "level=warn" in l and "event=slashed " in l]
        ended = [l for l in lines if "event=award_ended " in l]
        return (len(sl) == 1 and len(ended) == 1, f"{sl} {ended}")
    nstest.wait_until(told, 30, "node3 to log event=slashed and award_ended")
    log("node3 logged event=slashed (warn) and event=award_ended")


nstest.main(test, "slash_by_ref")
