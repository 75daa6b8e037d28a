#!/usr/bin/env python3
"""The node's log, as an operator relies on it, on a 3-node network:

  * `--log-file FILE`: the log goes to FILE; after FILE is renamed (as
    logrotate does) and the node gets SIGHUP, new events go to a new FILE
    (it says event=log_reopened) and the node lives on;
  * every market outcome that touches a node's money has its event, with
    the amounts: escrow locked and the job paid (the requester), the
    collateral locked and the job paid (the provider), credits claimed,
    a transfer out and the credit received, stake and unstake, escrow
    refunded on cancel;
  * one event per line: every line of every log is `ts=... level=...
    mod=... event=...`;
  * a healthy network logs nothing at warn or error level, a job, a
    transfer and a cancel included;
  * then, unhealthy: a provider that accepts and goes silent logs that it
    was penalised (warn) and that its award ended, the requester that it
    reopened the job; a requester that posts jobs and settles none is
    refused, and the providers log event=refused_requester.
"""
import json
import os
import random
import re
import signal
import struct
import subprocess
import time

import nstest
from nstest import check, check_eq, cli, cli_ok, log

HEARTBEAT_MS = 1500
LINE = re.compile(r"^ts=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z "
                  r"level=(error|warn|info|debug) mod=[a-z]+ event=[a-z_]+")


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def events(text, name):
    return [l for l in text.splitlines() if f" event={name} " in l + " "]


def field(line, key):
    m = re.search(rf"\b{key}=(\S+)", line)
    return m.group(1) if m else None


def test(net):
    # node3 and the poster join later (below), with credits from the start
    req, p1, p2, p3, poster = net.make_nodes(5)
    logdir = os.path.join(net.dir, "logs")
    os.makedirs(logdir)
    p1_log = os.path.join(logdir, "p1.log")
    # heartbeats every 1.5 s: a peer is dropped after 4.5 s of silence, so
    # that a node stalled by a loaded machine (a kernel build on a busy
    # 2-core box) is not mistaken for an unhealthy network
    net.heartbeat_ms = HEARTBEAT_MS
    req.start(extra=["--set", "node.slots=0"])
    p1.start(bootstrap=[req], extra=["--set", "node.stake=1000",
                                     "--log-file", p1_log])
    p2.start(bootstrap=[req], extra=["--set", "node.stake=1000"])
    net.wait_mesh([req, p1, p2])
    check(os.path.getsize(p1_log) > 0 and "event=" not in p1.log_text(),
          "with --log-file the events go to the file, not to stderr")

    # -- a job through the requester node: escrow, award, pay, claim
    n = 1024
    a = os.path.join(net.dir, "a.bin")
    b = os.path.join(net.dir, "b.bin")
    with open(a, "wb") as f:
        f.write(struct.pack(f"{n}f", *[random.uniform(-1, 1)
                                       for _ in range(n)]))
    with open(b, "wb") as f:
        f.write(struct.pack(f"{n}f", *[random.uniform(-1, 1)
                                       for _ in range(n)]))

    def vadd(out, *more):
        return ["submit", "--node", req.datadir, "--builtin", "vector_add",
                "--global", str(n), "--arg", f"in:{a}", "--arg", f"in:{b}",
                "--arg", f"out:{4 * n}:{out}", "--arg", f"u32:{n}", *more]

    r = cli(*vadd(os.path.join(net.dir, "c.bin"), "--max-price", 10,
                  "--bid-window-ms", 100, "--json"), timeout=120)
    check(r.returncode == 0, f"submit failed: {r.stderr[-800:]}")
    receipt = json.loads(r.stdout)
    job = receipt["job"][:16]
    winner = p1 if receipt["provider"].startswith(p1.id[:10]) else p2
    check(receipt["provider"][:10] in (p1.id[:10], p2.id[:10]),
          f"provider {receipt['provider']} is neither p1 nor p2")
    log(f"job {job} settled by {winner.name} at {receipt['price']}")

    def winner_log():
        return read(p1_log) if winner is p1 else p2.log_text()

    nstest.wait_until(lambda: events(winner_log(), "credits_claimed"), 30,
                      f"{winner.name} to claim its payment")
    text = req.log_text()
    locked = [l for l in events(text, "escrow_locked") if f"job={job}" in l]
    check(len(locked) == 1 and field(locked[0], "escrow") == "10",
          f"requester: escrow_locked for {job}: {locked}")
    paid = [l for l in events(text, "job_paid") if f"job={job}" in l]
    check(len(paid) == 1 and field(paid[0], "provider") == winner.id[:10],
          f"requester: job_paid for {job}: {paid}")
    price = field(paid[0], "price")
    refund = field(paid[0], "refund")
    check(abs(float(price) + float(refund) - 10) < 1e-9,
          f"price {price} + refund {refund} is not the escrow 10")
    wtext = winner_log()
    for ev in ("collateral_locked", "paid"):
        got = [l for l in events(wtext, ev) if f"job={job}" in l]
        check(len(got) == 1, f"{winner.name}: {ev} for {job}: {got}")
    got = events(wtext, "paid")[0]
    check(field(got, "price") == price and
          field(got, "requester") == req.id[:10],
          f"{winner.name}: paid says {got}, the requester paid {price}")
    log(f"job events: escrow_locked, job_paid price={price} "
        f"refund={refund}, collateral_locked, paid, credits_claimed")

    # -- log rotation on p1: rename, SIGHUP, the next events in a new file
    rotated = p1_log + ".1"
    os.rename(p1_log, rotated)
    p1.signal(signal.SIGHUP)
    time.sleep(0.3)
    check(p1.running(), f"p1 died on SIGHUP: {p1.log_tail(5)}")

    # -- transfer req -> p1 (p1's events go to the new file), stake and
    # unstake on p2
    cli_ok("transfer", "--datadir", req.datadir, "--to", p1.id, "2.5")
    nstest.wait_until(lambda: events(read(p1_log), "credits_claimed"), 30,
                      "p1 to take the transfer in (in its new log file)")
    new = read(p1_log)
    check(new.startswith("ts=") and "event=log_reopened" in new.splitlines()[0],
          f"the new file does not start with log_reopened: {new[:300]!r}")
    got = events(new, "credit_received")
    check(len(got) == 1 and field(got[0], "amount") == "2.5",
          f"p1: credit_received of the transfer: {got}")
    check(not events(read(rotated), "credit_received") or winner is p1,
          "p1 logged the transfer into the rotated file")
    check(p1.running() and p1.status()["id"] == p1.id,
          "p1 does not answer after SIGHUP")
    out = events(req.log_text(), "transfer_out")
    check(len(out) == 1 and field(out[0], "to") == p1.id[:10] and
          field(out[0], "amount") == "2.5", f"req: transfer_out: {out}")
    log("rotation: new events in the new file after SIGHUP; "
        "transfer_out / credit_received / credits_claimed logged")

    cli_ok("stake", "--datadir", p2.datadir, "3")
    cli_ok("unstake", "--datadir", p2.datadir, "2")
    t2 = p2.log_text()
    st = [l for l in events(t2, "stake") if field(l, "amount") == "3"]
    un = [l for l in events(t2, "unstake") if field(l, "amount") == "2"]
    check(len(st) == 1 and len(un) == 1, f"p2: stake {st} unstake {un}")

    # -- cancel: a job no provider will take (its work is priced far
    # above --max-price), cancelled through the node: escrow refunded
    sub = subprocess.Popen([nstest.BIN, *vadd(os.path.join(net.dir, "d.bin"),
                                              "--max-price", "7", "--work",
                                              str(10 ** 19), "--bid-window-ms",
                                              "60000")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True, stdin=subprocess.DEVNULL,
                           preexec_fn=nstest._die_with_parent)
    net.procs.append(sub)

    def posted():
        got = [l for l in events(req.log_text(), "escrow_locked")
               if field(l, "escrow") == "7"]
        return (len(got) == 1, got)
    locked = nstest.wait_until(posted, 30, "the second job's escrow")[1][0]
    job2 = field(locked, "job")
    r = cli("cancel", job2, "--datadir", req.datadir, "--json", timeout=60)
    check(r.returncode == 0, f"cancel {job2}: {r.stderr.strip()}")
    sub.terminate()  # its auction would wait out the 60 s window
    sub.wait(timeout=30)
    ref = [l for l in events(req.log_text(), "escrow_refunded")
           if f"job={job2}" in l]
    check(len(ref) == 1 and field(ref[0], "amount") == "7",
          f"req: escrow_refunded for {job2}: {ref}")
    log(f"cancel: escrow_locked 7 and escrow_refunded 7 for {job2}")

    # -- every line one event; nothing at warn or error
    texts = {"req": req.log_text(), "p1 (rotated)": read(rotated),
             "p1": read(p1_log), "p2": p2.log_text()}
    total = 0
    for name, text in texts.items():
        lines = text.splitlines()
        total += len(lines)
        bad = [l for l in lines if not LINE.match(l)]
        check(not bad, f"{name}: lines that are not one event: {bad[:3]}")
        warns = [l for l in lines if " level=warn " in l or
                 " level=error " in l]
        check(not warns, f"{name} logged at warn/error on a healthy "
                         f"network: {warns[:3]}")
    log(f"{total} log lines, each one event, none at warn or error")

    # -- an unhealthy turn: a provider that accepts and never returns is
    # penalised after the deadline and says so (warn); the requester
    # reopens the job and another provider settles it
    p3.start(bootstrap=[req], extra=["--set", "node.stake=1000", "--set",
                                     "node.price=1", "--fault", "silent"])
    net.wait_mesh([req, p1, p2, p3])

    # node3 bids only once it holds the ledger so far: a provider that
    # joined a moment ago may not have the requester's chain yet, and an
    # award it cannot find in its ledger is refused (event=job_failed)
    def entries(n):
        r = cli("ledger", "--datadir", n.datadir, "--json", "--limit", "1")
        return json.loads(r.stdout)["entries"] if r.returncode == 0 else -1
    nstest.wait_until(lambda: (entries(p3) == entries(req),
                               f"{entries(p3)} vs {entries(req)}"), 30,
                      "node3's ledger to catch up")
    # priced by its work so that node3's bid (price 1) beats the others'
    r = cli(*vadd(os.path.join(net.dir, "e.bin"), "--max-price", 10,
                  "--work", str(10 ** 11), "--bid-window-ms", 300,
                  "--deadline-s", 15, "--json"),
            timeout=120)
    check(r.returncode == 0, f"the job after a silent provider did not "
                             f"settle: {r.stdout[-800:]} {r.stderr[-800:]}")
    receipt = json.loads(r.stdout)
    job3 = receipt["job"][:16]
    check(not receipt["provider"].startswith(p3.id[:10]),
          "the silent provider was paid")

    def penalised():
        lines = p3.log_text().splitlines()
        pen = [l for l in lines if " level=warn " in l and
               " event=penalised " in l]
        ended = [l for l in lines if " event=award_ended " in l and
                 f"job={job3}" in l]
        return (len(pen) == 1 and len(ended) == 1, f"{pen} {ended}")
    nstest.wait_until(penalised, 30, "node3 to log that it was penalised")
    reopened = [l for l in events(req.log_text(), "job_reopened")
                if f"job={job3}" in l]
    check(len(reopened) == 1, f"req: job_reopened for {job3}: {reopened}")
    log(f"silent provider: event=penalised (warn) and award_ended on node3, "
        f"job_reopened on the requester, settled by another")

    # -- a requester that posts jobs and never settles them is refused,
    # and the providers say so (event=refused_requester)
    for i in range(6):
        r = cli("submit", "--datadir", poster.datadir, "--bootstrap", req.addr,
                "--builtin", "vector_add", "--global", str(n), "--arg",
                f"in:{a}", "--arg", f"in:{b}", "--arg",
                f"out:{4 * n}:{os.path.join(net.dir, 'f.bin')}", "--arg",
                f"u32:{n}", "--max-price", "0.000001", "--work",
                str(10 ** 15), "--no-wait", "--bid-window-ms", 100,
                timeout=60)
        check(r.returncode != 0, "a job priced below every bid settled")
    refused = []
    for p in (p1, p2):
        t = read(p1_log) if p is p1 else p.log_text()
        refused += [l for l in events(t, "refused_requester")
                    if f"requester={poster.id[:10]}" in l]
    check(refused, "no provider logged event=refused_requester for a "
                   "requester that settles nothing")
    log(f"refused_requester logged: {refused[0][refused[0].find('event'):]}")


nstest.main(test, "logs")
