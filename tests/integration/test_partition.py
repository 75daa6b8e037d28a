#!/usr/bin/env python3
"""A partition between two nodes heals: `block` cuts traffic between A and
B in both directions; while cut off, A transfers to B and stakes, B stakes,
unstakes and transfers to A, and neither sees the other's new entries.
Once the block expires (first round: on its own; second round: with a
`connect` as well) both end with the same heads digest, the same entries
and the same balances, and the credits sent across the partition are taken
in on the other side (each node claims its credits on its own)."""
import threading
import time

import nstest
from nstest import check, check_eq, cli, log

import ledgerutil as lu

HB_MS = 300
CREDITS = 1000000
BLOCK1_MS = 7000
BLOCK2_MS = 6000
ROUND2 = 24  # appends on each side in round 2
HEAL_TIMEOUT = 25  # s after the block expires


def block_both(a, b, ms):
    """Cut a <-> b on both sides; returns when the block ends (monotonic)."""
    for x, y in ((a, b), (b, a)):
        r = cli("block", "--datadir", x.datadir, y.id, "--ms", ms)
        check(r.returncode == 0, f"block on {x.name} exited {r.returncode}: "
                                 f"{r.stderr.strip()}")
    return time.monotonic() + ms / 1000


def authored(node, author):
    """Ids of author's entries in node's ledger."""
    doc = lu.ledger(node.datadir, author=author.id)
    return {e["id"] for e in doc["list"]}


def appends_in_parallel(jobs):
    """jobs: {node: [(cmd, amount[, to])]}; returns {node: [entry ids]}."""
    out, errors = {}, []

    def run(node, ops):
        try:
            out[node] = [lu.append(node, o[0], o[1],
                                   to=o[2] if len(o) > 2 else None)
                         for o in ops]
        except Exception as e:
            errors.append(e)
    threads = [threading.Thread(target=run, args=kv) for kv in jobs.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    if errors:
        raise errors[0]
    return out


def check_cut(a, b, a_new, b_new):
    """Neither side holds what the other appended during the partition."""
    leaked = (a_new & authored(b, a)) | (b_new & authored(a, b))
    check(not leaked, f"{len(leaked)} entries crossed the partition: "
                      f"`block` did not cut traffic between A and B")


def test(net):
    net.heartbeat_ms = HB_MS
    a, b = net.make_nodes(2)
    lu.no_pull_repair([a, b])  # healing must come from ledger sync
    a.start()
    b.start(bootstrap=[a])  # b dials a again whenever a is missing
    net.wait_mesh([a, b])
    accounts = sorted([a.id, b.id])

    lu.append(a, "transfer", 1000, to=b)
    lu.append(b, "stake", 10)
    lu.wait_converged([a, b], 15, "A and B to agree before the partition "
                      "(B having taken in A's transfer)", min_entries=2,
                      pending=0)
    before = lu.ledger_status(a)["entries"]
    log(f"A and B agree on {before} entries; cutting them apart")

    # -- round 1: the block expires on its own ---------------------------
    ends = block_both(a, b, BLOCK1_MS)
    new = appends_in_parallel({
        a: [("transfer", 111, b), ("stake", 333), ("transfer", 222, b),
            ("unstake", 100)],
        b: [("stake", 50), ("transfer", 44, a), ("unstake", 20),
            ("stake", 7), ("transfer", 6, a)],
    })
    a_new, b_new = set(new[a]), set(new[b])
    time.sleep(1.5)  # gossip would have crossed by now
    check(time.monotonic() < ends - 0.5, "the partition round took too long "
                                         "to check the cut; raise BLOCK1_MS")
    check_cut(a, b, a_new, b_new)
    sa, sb = lu.ledger_status(a), lu.ledger_status(b)
    check_eq((sa["entries"], sb["entries"]), (before + 4, before + 5),
             "entries on (A, B) during the partition")
    check(sa["digest"] != sb["digest"], "A and B show one digest while "
                                        "partitioned")
    log(f"partitioned: A has {sa['entries']} entries, B {sb['entries']}")

    time.sleep(max(0.0, ends - time.monotonic()))
    t0 = time.monotonic()
    total = before + len(a_new) + len(b_new)
    lu.wait_converged([a, b], HEAL_TIMEOUT, "A and B to converge after the "
                      "block expired, credits taken in", min_entries=total,
                      pending=0)
    log(f"healed {time.monotonic() - t0:.1f}s after the block expired")
    snap = lu.check_identical([a, b], accounts)
    check(a_new <= authored(b, a) and b_new <= authored(a, b),
          "after healing, an entry of the partition is missing on the "
          "other side")
    # The credits sent across the partition were taken in.
    fa, ka, la, *_ = snap["balances"][a.id]
    fb, kb, lb, *_ = snap["balances"][b.id]
    check_eq((fa + ka + la, ka), (CREDITS - 1000 - 111 - 222 + 44 + 6,
                                  333 - 100),
             "A's (worth, staked) after round 1")
    check_eq((fb + kb + lb, kb), (CREDITS + 1000 + 111 + 222 - 44 - 6,
                                  10 + 50 - 20 + 7),
             "B's (worth, staked) after round 1")

    # -- round 2: longer chains on both sides, healed with `connect` -----
    before = snap["entries"]
    ends = block_both(a, b, BLOCK2_MS)
    new = appends_in_parallel({
        a: [("transfer", 1, b) if i % 3 == 0 else ("stake", 2)
            for i in range(ROUND2)],
        b: [("transfer", 3, a) if i % 4 == 0 else ("stake", 1)
            for i in range(ROUND2)],
    })
    a_new, b_new = set(new[a]), set(new[b])
    check(time.monotonic() < ends - 0.3, "round 2 appends outlasted the "
                                         "block; raise BLOCK2_MS")
    check_cut(a, b, a_new, b_new)
    time.sleep(max(0.0, ends - time.monotonic()) + 0.1)
    t0 = time.monotonic()
    r = cli("connect", "--datadir", a.datadir, b.addr)
    check(r.returncode == 0 or "exist" in r.stderr.lower(),
          f"connect A -> B after the block: exit {r.returncode}: "
          f"{r.stderr.strip()}")
    lu.wait_converged([a, b], HEAL_TIMEOUT, "A and B to converge after "
                      "round 2", min_entries=before + 2 * ROUND2, pending=0)
    log(f"round 2 healed {time.monotonic() - t0:.1f}s after the block "
        f"expired")
    snap = lu.check_identical([a, b], accounts)
    check(a_new <= authored(b, a) and b_new <= authored(a, b),
          "after round 2, an entry of the partition is missing on the "
          "other side")
    a_sent = sum(1 for i in range(ROUND2) if i % 3 == 0)  # 1 credit each
    b_sent = sum(3 for i in range(ROUND2) if i % 4 == 0)
    a_staked = 2 * (ROUND2 - a_sent)
    b_staked = ROUND2 - b_sent // 3
    for n, (worth, staked), sent, got, stakes in (
            (a, (fa + ka + la, ka), a_sent, b_sent, a_staked),
            (b, (fb + kb + lb, kb), b_sent, a_sent, b_staked)):
        f, k, lk, _, banned = snap["balances"][n.id]
        check_eq((f + k + lk, k), (worth - sent + got, staked + stakes),
                 f"{n.name}'s (worth, staked) after round 2")
        check(not banned, f"{n.name} is banned")


nstest.main(test, "partition")
