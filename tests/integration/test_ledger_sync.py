#!/usr/bin/env python3
"""Four nodes append transfers, stakes and unstakes at the same time; every
node ends with the same ledger: entry count, heads digest, entry ids and
the balance of every account, with credits conserved everywhere, and the
balances are the ones the operations imply once each running node has
taken in its credits (on its own: a claim entry, STAKE of 0 with refs). A
node stopped while the others append - more than one sync batch from one
author, and credits passed round a ring so that entries arrive before what
their refs name - catches up on its own when it restarts (no command but
starting it)."""
import threading
import time

import nstest
from nstest import check, check_eq, log

import ledgerutil as lu

HB_MS = 400
CREDITS = 1000000  # nstest's genesis allotment per node
BIG = 270  # entries n0 appends while n3 is away
RING_ROUNDS = 4  # transfers round n0 -> n1 -> n2 -> n0 while n3 is away


class Book:
    """The operations the test made, to compute the expected balances."""

    def __init__(self):
        self.lock = threading.Lock()
        self.ops = []  # (author id, cmd, amount, recipient id or None)

    def do(self, node, cmd, amount, to=None):
        entry = lu.append(node, cmd, amount, to=to)
        with self.lock:
            self.ops.append((node.id, cmd, amount,
                             to.id if isinstance(to, nstest.Node) else to))
        return entry

    def count(self, account):
        return sum(1 for a, *_ in self.ops if a == account)

    def sent_to(self, account):
        return sum(a for _, c, a, to in self.ops
                   if c == "transfer" and to == account)

    def expected(self, account):
        """(free + staked + locked, staked) once all credits are claimed."""
        worth, staked = CREDITS, 0
        for author, cmd, amount, to in self.ops:
            if author == account:
                if cmd == "transfer":
                    worth -= amount
                elif cmd == "stake":
                    staked += amount
                elif cmd == "unstake":
                    staked -= amount
            elif cmd == "transfer" and to == account:
                worth += amount
        return worth, staked


def run_parallel(scripts):
    """Run each list of operations (callables) in its own thread; re-raise
    the first failure."""
    errors = []

    def worker(ops):
        try:
            for op in ops:
                op()
        except Exception as e:  # reported below, in the main thread
            errors.append(e)
    threads = [threading.Thread(target=worker, args=(s,)) for s in scripts]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    check(not any(t.is_alive() for t in threads), "an append thread hung")
    if errors:
        raise errors[0]


def test(net):
    net.heartbeat_ms = HB_MS
    nodes = net.make_nodes(4)
    n0, n1, n2, n3 = nodes
    # An account that no node runs: its credits stay pending for good.
    outsider = net.node("outsider").init().id
    lu.no_pull_repair(nodes)  # n3's catch-up must come from ledger sync
    net.start_all(nodes)
    net.wait_mesh(nodes)
    accounts = sorted({n.id for n in nodes} | {outsider})
    for n in nodes:
        st = lu.ledger_status(n)
        check_eq((st["entries"], st["buffered"]), (0, 0),
                 f"{n.name}'s ledger at start (entries, buffered)")
    log("mesh of 4 formed, ledgers empty")

    book = Book()

    def op(node, cmd, amount, to=None):
        return lambda: book.do(node, cmd, amount, to)

    def check_books(snap, running):
        """Balances and chains of the running nodes as the operations
        imply, once each has taken in all its credits."""
        doc = lu.ledger(nodes[0].datadir)
        for n in running:
            free, staked, locked, seq, banned = snap["balances"][n.id]
            worth, want_staked = book.expected(n.id)
            check_eq((free + staked + locked, staked), (worth, want_staked),
                     f"{n.name}'s (free+staked+locked, staked) once it took "
                     f"in its credits")
            check(not banned, f"{n.name} is banned")
            check_eq(seq, book.count(n.id) + len(lu.claims(doc, n.id)),
                     f"{n.name}'s chain length (its appends + its claims)")

    # -- phase 1: all four append at once ------------------------------
    scripts = [
        [op(n0, "transfer", 1000 + r, n1) for r in range(3)] +
        [op(n0, "stake", 5000), op(n0, "transfer", 300, outsider),
         op(n0, "transfer", 2000, n2), op(n0, "unstake", 1200)],
        [op(n1, "stake", 100), op(n1, "transfer", 50, n3),
         op(n1, "unstake", 40), op(n1, "transfer", 77, n0),
         op(n1, "stake", 900), op(n1, "transfer", 11, outsider)],
        [op(n2, "transfer", 4000, n0), op(n2, "stake", 2500),
         op(n2, "transfer", 123, n3), op(n2, "transfer", 456, n1),
         op(n2, "unstake", 500)],
        [op(n3, "transfer", 10, n1), op(n3, "transfer", 20, n2),
         op(n3, "stake", 30000), op(n3, "transfer", 40, n0),
         op(n3, "unstake", 29999), op(n3, "transfer", 5, outsider)],
    ]
    t0 = time.monotonic()
    run_parallel(scripts)
    appended = len(book.ops)
    log(f"phase 1: {appended} entries appended on 4 nodes in "
        f"{time.monotonic() - t0:.1f}s")
    entries, digest = lu.wait_converged(
        nodes, 20, "4 ledgers to converge after phase 1 (and every node to "
        "take in its credits)", min_entries=appended,
        pending=book.sent_to(outsider))
    log(f"converged {time.monotonic() - t0:.1f}s after the first append: "
        f"{entries} entries, digest {digest[:16]}")
    check_books(lu.check_identical(nodes, accounts), nodes)

    # -- phase 2: n3 is away while the others append ---------------------
    check_eq(n3.stop(), 0, "n3's exit status on SIGTERM")
    before_n3 = lu.ledger(n3.datadir)["entries"]
    away = [n0, n1, n2]
    to_n3 = book.sent_to(n3.id)
    scripts = [
        [op(n0, "transfer", 700, n3), op(n0, "stake", 10),
         op(n0, "transfer", 800, n3)],
        # More than one sync batch (NS_SYNC_BATCH = 256) from one author;
        # three CLI processes at a time hide their start-up cost.
        *([op(n0, "stake", 1) for _ in range(BIG // 3)] for _ in range(3)),
        [op(n1, "transfer", 60, n3), op(n1, "stake", 5),
         op(n1, "transfer", 9, n2)],
        [op(n2, "stake", 1), op(n2, "transfer", 3, n3),
         op(n2, "unstake", 2)],
    ]
    run_parallel(scripts)
    # Credits passed round a ring: each transfer from the second round on
    # also takes in the credit its author got from the previous one, so n3
    # meets entries whose refs name entries of chains it has not pulled
    # yet, whatever order its pulls come back in (it is a ring).
    ring = [n0, n1, n2]
    for r in range(RING_ROUNDS):
        for i, x in enumerate(ring):
            book.do(x, "transfer", 10 + r, ring[(i + 1) % len(ring)])
    total = len(book.ops)
    lu.wait_converged(away, 20, "the 3 remaining ledgers to converge",
                      min_entries=total,
                      pending=book.sent_to(outsider) +
                      book.sent_to(n3.id) - to_n3)
    check_eq(lu.ledger(n3.datadir)["entries"], before_n3,
             "entries in the stopped n3's ledger")
    log(f"phase 2: {total - appended} entries appended while n3 was "
        f"stopped; n3 holds {before_n3}, the others "
        f"{lu.ledger_status(n0)['entries']}")

    # n3 restarts with the same flags; nobody does anything else.
    t0 = time.monotonic()
    n3.start(bootstrap=n3.bootstrap)
    lu.wait_converged(nodes, 25, "the restarted n3 to catch up on its own "
                      "(and take in the credits sent to it meanwhile)",
                      min_entries=total, pending=book.sent_to(outsider))
    st3 = lu.ledger_status(n3)
    log(f"n3 caught up {time.monotonic() - t0:.1f}s after its restart "
        f"(ranges_in {st3['ranges_in']}, gossip_in {st3['gossip_in']})")
    snap = lu.check_identical(nodes, accounts)
    check_books(snap, nodes)
    check_eq(snap["balances"][outsider][:3], (0, 0, 0),
             "the outsider's balance (it never claimed)")
    check_eq(snap["total"], CREDITS * 4, "genesis total")
    log(f"{snap['entries']} entries identical on 4 nodes ({total} appended "
        f"by the test, the rest claims), balances as computed")


nstest.main(test, "ledger_sync")
