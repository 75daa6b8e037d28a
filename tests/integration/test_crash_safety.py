#!/usr/bin/env python3
"""kill -9 never costs an entry the node reported stored, nor the ledger's
consistency. A node (V) appends transfers, stakes and unstakes as fast as
the CLI can ask while its peer (P) keeps appending too (so V also ingests
and commits gossip and sync batches); V is killed with SIGKILL at
different moments, including while it catches up right after a restart.
After each kill, before V restarts (so nothing can come back from P), its
datadir's ledger opens, conserves credits, and holds every entry id the
CLI reported, in a gap-free chain; V then restarts without a corruption
error. At the end V and P agree on everything."""
import json
import random
import subprocess
import threading
import time

import nstest
from nstest import TestFailure, check, check_eq, log

import ledgerutil as lu

HB_MS = 400
# One cycle each: (seconds V stays down before it restarts, seconds from
# the restart to its SIGKILL). Kills land mid-appends at various points;
# after a longer time down, a kill 0.02-0.25 s after the restart lands
# while V catches up on what P appended meanwhile.
CYCLES = [(0, 0.4), (0, 1.1), (2.0, 0.02), (0, 0.7), (0, 1.6), (1.5, 0.15),
          (0, 0.25), (0, 0.9)]


class Driver(threading.Thread):
    """Appends on one node in a loop until stopped (ops: (cmd, amount[,
    to]) in turn); remembers every entry
    the CLI reported as stored. A failure before `expect_failure` is set
    is the test's failure."""

    def __init__(self, node, ops, pause=0.0):
        super().__init__(daemon=True)
        self.node, self.ops, self.pause = node, ops, pause
        self.stored = []
        self.halt = threading.Event()
        self.expect_failure = threading.Event()
        self.error = None
        self.lock = threading.Lock()
        self.proc = None  # the CLI request in flight

    def run(self):
        try:
            self._loop()
        except Exception as e:  # a bug in the test itself: report it
            self.error = repr(e)

    def _loop(self):
        i = 0
        while not self.halt.is_set():
            cmd, amount, *to = self.ops[i % len(self.ops)]
            i += 1
            args = [nstest.BIN, cmd, "--datadir", self.node.datadir]
            if to:
                args += ["--to", getattr(to[0], "id", to[0])]
            args += [str(amount), "--json"]
            with self.lock:
                if self.halt.is_set():
                    return
                self.proc = subprocess.Popen(
                    args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    stdin=subprocess.DEVNULL, text=True)
            try:
                out, err = self.proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                out, err = self.proc.communicate()
                err = "timed out after 10 s"
            if self.proc.returncode != 0:
                if not self.expect_failure.is_set():
                    self.error = (f"`{' '.join(args[1:])}` exited "
                                  f"{self.proc.returncode}: {err.strip()}")
                return
            try:
                entry = json.loads(out)["entry"]
            except (ValueError, KeyError, TypeError):
                self.error = f"{cmd} --json printed {out[:200]!r}"
                return
            check(len(entry) == 64, f"odd entry id {entry!r}")
            self.stored.append(entry)
            if self.pause:
                time.sleep(self.pause)

    def abandon(self):
        """The node is gone: stop the request in flight (its reply is lost
        with the node) instead of waiting for the CLI's timeout."""
        self.halt.set()
        with self.lock:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.kill()

    def finish(self):
        self.halt.set()
        self.join(timeout=30)
        check(not self.is_alive(), f"driver on {self.node.name} hung")
        if self.error:
            raise TestFailure(f"append on {self.node.name} failed while it "
                              f"was up: {self.error}")


def check_on_disk(v, reported, kills):
    """V is down: its datadir alone must hold everything it reported."""
    doc = lu.ledger(v.datadir)  # opens read-only; fails on corruption
    check(doc["conserved"], f"after kill {kills}: V's ledger does not "
                            f"conserve credits (total {doc['total']})")
    mine = sorted((e["seq"], e["id"]) for e in doc["list"]
                  if e["author"] == v.id)
    seqs = [s for s, _ in mine]
    check_eq(seqs, list(range(1, len(seqs) + 1)),
             f"after kill {kills}: seqs of V's chain on disk")
    ids = {i for _, i in mine}
    lost = [e for e in reported if e not in ids]
    check(not lost, f"after kill {kills}: {len(lost)} of {len(reported)} "
                    f"entries the CLI reported stored are missing from V's "
                    f"ledger on disk, e.g. {lost[:3]}")
    # Stored but unreported: the node's own claims (STAKE 0 with refs),
    # and at most the one append in flight at each kill.
    own_claims = {e["id"] for e in lu.claims(doc, v.id)}
    unreported = ids - set(reported) - own_claims
    check(len(unreported) <= kills,
          f"after kill {kills}: V's chain has {len(unreported)} entries "
          f"that are neither reported appends nor claims (at most one per "
          f"kill may be: the append in flight)")
    bal = lu.balance(v.datadir, v.id)
    check_eq(bal["seq"], len(seqs), "V's account head seq vs its chain")
    return doc["entries"]


def test(net):
    net.heartbeat_ms = HB_MS
    rng = random.Random()
    p, v = net.make_nodes(2, prefix="n")
    sink = net.node("sink").init().id  # never runs: takes credits for good
    p.start()
    v.start(bootstrap=[p])
    net.wait_mesh([p, v])
    # Claims, refs, all entry kinds the CLI makes.
    v_ops = [("transfer", 3, sink), ("stake", 5), ("transfer", 1, p),
             ("unstake", 2), ("stake", 1)]
    p_ops = [("transfer", 2, v), ("stake", 1), ("transfer", 1, sink)]
    p_driver = Driver(p, p_ops, pause=0.01)
    p_driver.start()

    reported = []
    for k, (down, delay) in enumerate(CYCLES, 1):
        if k > 1:
            time.sleep(down)
            t_start = time.monotonic()
            v.start(bootstrap=[p])
            log(f"V restarted in {time.monotonic() - t_start:.2f}s")
            log_text = v.log_text()
            check("corrupt" not in log_text.lower(),
                  f"V logged a corruption after kill {k - 1}: "
                  f"{v.log_tail(5)}")
        delay += rng.uniform(0, 0.1)
        d = Driver(v, v_ops)
        d.start()
        time.sleep(delay)
        d.expect_failure.set()
        v.kill()
        d.abandon()
        d.finish()
        reported += d.stored
        st = check_on_disk(v, reported, k)
        log(f"kill {k} after {delay:.2f}s: {len(d.stored)} appends reported "
            f"this cycle, {len(reported)} in all, all on disk; V's ledger "
            f"holds {st} entries")
        check(p.running(), f"P died: {p.log_tail(5)}")

    # Last restart: V comes back cleanly and agrees with P.
    v.start(bootstrap=[p])
    time.sleep(0.5)
    p_driver.finish()
    check(len(p_driver.stored) > 50, f"P appended only "
                                     f"{len(p_driver.stored)} entries")
    lu.wait_converged([p, v], 30, "V and P to agree after the last "
                      "restart, every credit but the sink's taken in",
                      pending=lambda: lu.sent_to(lu.ledger(p.datadir), sink))
    snap = lu.check_identical([p, v], sorted([p.id, v.id, sink]))
    ids = set(snap["ids"])
    missing = [e for e in reported + p_driver.stored if e not in ids]
    check(not missing, f"{len(missing)} reported entries missing at the end")
    check(len(reported) > 20, f"V reported only {len(reported)} appends in "
                              f"{len(CYCLES)} cycles: too few to test")
    log(f"{len(reported)} appends on V over {len(CYCLES)} SIGKILLs, "
        f"{len(p_driver.stored)} on P: none lost, {snap['entries']} entries "
        f"identical")


nstest.main(test, "crash_safety")
