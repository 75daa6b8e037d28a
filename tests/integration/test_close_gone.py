"""A requester that vanishes leaves no money locked (docs/PROTOCOL.md,
"Closing"), on a 3-node testnet whose close window is 3 s:

  1. a light-peer `submit` killed with SIGKILL as soon as its provider
     accepted (it says "accepted: collateral ... locked"), while the
     provider still fetches the job's 32 MiB of inputs from it: the
     provider gives the job up at the deadline and, past deadline +
     window, CLOSEs it under the deadline rule (a tenth of its collateral
     burned, the rest back to its stake, the escrow a credit for the
     requester);
  2. one killed as soon as it sees the provider's RESULT ("result
     committed"), before it could fetch the outputs and settle: past
     deadline + window the provider CLOSEs it and is paid, its collateral
     back;
  3. as 2, and then the requester forks its chain (two TRANSFERs signed
     with its key at one seq, injected at two nodes: tests/tools/forge.c)
     and is banned on every node in the middle of its job: the same
     CLOSE, the same outcome.

Each time, on every node, within deadline + window + a margin (and never
before deadline + window), the job is closed, the provider's locked
collateral is free again, the requester's escrow is unlocked, the right
party has the money and the ledger conserves. The time from deadline to
the last node's unlocked collateral is printed. The requester, resumed
after the second, says its job was closed by its provider.
"""
import array
import json
import os
import re
import signal
import subprocess
import time
import types

import nstest
from ledgerutil import forge, inject
from nstest import check, check_eq, cli, log

N = 3
WINDOW_S = 3
DEADLINE_S = 8
# past deadline + window: the provider's margin (2 s), its close tick
# (2 s), gossip, and a loaded 2-core box
MARGIN_S = 15
ITEMS = 4 * 1024 * 1024  # 16 MiB a vector


def node_id(datadir):
    with open(os.path.join(datadir, "node.addr")) as f:
        return f.read().strip().split("@")[0]


def balance(datadir, ident):
    r = cli("balance", "--datadir", datadir, ident, "--json")
    check(r.returncode == 0, f"balance {ident[:10]}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def entries(datadir):
    r = cli("ledger", "--datadir", datadir, "--json", "--limit", "100000")
    check(r.returncode == 0, f"ledger: {r.stderr.strip()}")
    return json.loads(r.stdout)


def micro(credits):
    return round(credits * 1000000)


def job_entries(doc, short):
    return [e for e in doc["list"] if e["summary"].startswith(f"job {short}")]


def fork_requester(nodes, req, req_id):
    """Two TRANSFERs of the requester at its next seq, at two nodes: a
    fork; every node bans it."""
    doc = entries(nodes[0])
    mine = [e for e in doc["list"] if e["author"] == req_id]
    head = max(mine, key=lambda e: e["seq"])
    r = cli("status", "--datadir", nodes[0], "--json")
    check(r.returncode == 0, f"status: {r.stderr.strip()}")
    network_id = json.loads(r.stdout)["network_id"]
    author = types.SimpleNamespace(datadir=req)
    to = [types.SimpleNamespace(id=node_id(d)) for d in nodes[:2]]
    t1, _ = forge(author, network_id, head["seq"] + 1, head["id"], to[0], 1)
    t2, _ = forge(author, network_id, head["seq"] + 1, head["id"], to[1], 2)
    at = [types.SimpleNamespace(addr=open(os.path.join(d, "node.addr"))
                                .read().strip(), name=os.path.basename(d))
          for d in nodes[:2]]
    inject([(at[0], t1), (at[1], t2)], network_id)
    nstest.wait_until(lambda: all(balance(d, req_id)["banned"]
                                  for d in nodes),
                      15, "the requester banned on every node")
    log("requester banned on every node (fork at seq "
        f"{head['seq'] + 1})")


def run_case(net, tn, boot, nodes, req, case, cut, fork=False):
    out = os.path.join(net.dir, f"out-{case}.bin")
    args = ["--builtin", "vector_add", "--global", str(ITEMS),
            "--arg", f"in:{net.dir}/a.bin", "--arg", f"in:{net.dir}/b.bin",
            "--arg", f"out:{4 * ITEMS}:{out}", "--arg", f"u32:{ITEMS}",
            "--max-price", "10", "--bid-window-ms", "300",
            "--deadline-s", str(DEADLINE_S)]
    ids = [node_id(d) for d in nodes]
    before = {i: balance(nodes[0], i) for i in ids}
    p = subprocess.Popen([nstest.BIN, "submit", "--datadir", req,
                          "--bootstrap", boot, *args],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True)
    net.at_exit(lambda: p.poll() is None and p.kill())
    short = None
    killed = False
    said = []
    # "accepted: collateral ... locked; sending the job", "result committed
    # (root ...); fetching outputs": the requester dies there
    mark = "accepted: collateral" if cut == "accept" else "result committed"
    for line in p.stderr:
        said.append(line.rstrip())
        m = re.search(r"job ([0-9a-f]{16})", line)
        short = short or (m and m.group(1))
        if mark in line:
            p.send_signal(signal.SIGKILL)
            killed = True
            break
    p.wait(timeout=30)
    check(short is not None, f"{case}: no job id in submit's progress")
    check(killed, f"{case}: submit never reached the point to cut "
                  f"(exit {p.returncode}): " + " | ".join(said[-12:]))
    log(f"{case}: submit of job {short} killed (SIGKILL)")
    # the job's entries, from node 0's ledger (gossip may still bring them)
    t_end = time.monotonic() + 10
    while True:
        mine = job_entries(entries(nodes[0]), short)
        job = [e for e in mine if e["type"] == "job"]
        acc = [e for e in mine if e["type"] == "accept"]
        if (job and acc) or time.monotonic() > t_end:
            break
        time.sleep(0.2)
    check_eq(len(job), 1, f"{case}: JOB entries of the job")
    check_eq(len(acc), 1, f"{case}: ACCEPT entries of the job")
    req_id = job[0]["author"]
    prov = acc[0]["author"]
    check(prov in ids, f"{case}: the provider is one of the nodes")
    if fork:
        fork_requester(nodes, req, req_id)
    # the deadline the requester posted (its JOB's clock + --deadline-s)
    deadline_ms = job[0]["timestamp_ms"] + DEADLINE_S * 1000
    close_at_ms = deadline_ms + WINDOW_S * 1000

    def closed_everywhere():
        for d in nodes:
            b = balance(d, prov)
            r = balance(d, req_id)
            if b["locked_collateral"] != 0 or r["locked_escrow"] != 0:
                return False
        return True

    t_end = close_at_ms / 1000 + MARGIN_S
    while time.time() < t_end and not closed_everywhere():
        time.sleep(0.25)
    done_ms = time.time() * 1000
    check(closed_everywhere(),
          f"{case}: collateral or escrow still locked {MARGIN_S} s past "
          f"deadline + window")
    log(f"{case}: deadline to unlocked collateral on all {N} nodes: "
        f"{(done_ms - deadline_ms) / 1000:.1f} s (window {WINDOW_S} s)")
    for k, d in enumerate(nodes):
        doc = entries(d)
        mine = job_entries(doc, short)
        closes = [e for e in mine if e["type"] == "close"]
        results = [e for e in mine if e["type"] == "result"]
        settles = [e for e in mine if e["type"] in ("settle", "slash",
                                                    "cancel")]
        check_eq(len(closes), 1, f"{case}: node{k}: CLOSE entries")
        check_eq(len(settles), 0, f"{case}: node{k}: the requester's own "
                 f"end of the job")
        check(doc.get("conserved") is True, f"{case}: node{k}: conserved")
        if closes:
            check_eq(closes[0]["author"], prov,
                     f"{case}: node{k}: the CLOSE's author")
            check(closes[0]["timestamp_ms"] >= close_at_ms - 100,
                  f"{case}: node{k}: CLOSE before deadline + window")
        b0, b1 = before[prov], balance(d, prov)
        have = micro(b1["free"]) + micro(b1["staked"])
        was = micro(b0["free"]) + micro(b0["staked"]) + \
            micro(b0["locked_collateral"])
        if results:  # paid: the price, its whole collateral back
            check(have > was, f"{case}: node{k}: the provider was paid "
                              f"({have} <= {was})")
            check_eq(b1["jobs_settled"], b0["jobs_settled"] + 1,
                     f"{case}: node{k}: provider's settled jobs")
        else:  # the deadline rule: a tenth of the collateral burned
            check(have < was, f"{case}: node{k}: no penalty ({have} >= "
                              f"{was})")
            check_eq(b1["jobs_cancelled"], b0["jobs_cancelled"] + 1,
                     f"{case}: node{k}: provider's penalised jobs")
    if results and not fork:
        # back, the requester learns why there are no outputs
        full = [d for d in os.listdir(os.path.join(req, "jobs"))
                if d.startswith(short)]
        check_eq(len(full), 1, f"{case}: the job's directory")
        r = cli("submit", "--datadir", req, "--bootstrap", boot, "--resume",
                full[0], timeout=60)
        log(f"{case}: --resume: exit {r.returncode}: "
            f"{nstest.error_lines(r.stderr)}")
        check(r.returncode != 0 and "closed by its provider" in r.stderr,
              f"{case}: --resume of the closed job says so "
              f"({r.stderr.strip()[-300:]})")
    return bool(results)


def test(net):
    tn, boot = nstest.testnet(net, N, close_window_s=WINDOW_S)
    nodes = [os.path.join(tn, f"node{i}") for i in range(N)]
    req = os.path.join(tn, "requester")
    for name, v in (("a", 0.25), ("b", 0.5)):
        with open(os.path.join(net.dir, f"{name}.bin"), "wb") as f:
            array.array("f", [v]).tofile(f)
            f.truncate(4 * ITEMS)  # zeros after the first: any data will do
    paid_after_accept = run_case(net, tn, boot, nodes, req, "after accept",
                                 "accept")
    log(f"after accept: closed as {'paid' if paid_after_accept else 'penalised'}")
    check(not paid_after_accept,
          "after accept: the provider had the inputs before the kill")
    check(run_case(net, tn, boot, nodes, req, "after result", "result"),
          "after result: closed without the RESULT")
    check(run_case(net, tn, boot, nodes, req, "banned after result",
                   "result", fork=True),
          "banned after result: closed without the RESULT")


nstest.main(test, "close_gone")
