#!/usr/bin/env python3
"""The ledger commands on the command line: `balance` and `ledger` on a
datadir whose node never ran (`ledger`; `balance` shows the genesis
allocation), or that has no genesis, fail with one clear line; bad ids and amounts are usage errors (exit 2); a transfer beyond the
balance, an unstake beyond the stake, a stake beyond the free credits and a
transfer to oneself are refused by the node with the rule's name and a
non-zero exit, and leave no trace in the ledger; --help works on every
ledger command; testnet/run.sh's genesis funds every node and the
requester with exactly the credits it allots."""
import json
import os
import subprocess
import time

import nstest
from nstest import check, check_eq, cli, log

import ledgerutil as lu

HB_MS = 400
CREDITS = 1000000
LEDGER_COMMANDS = ["ledger", "balance", "transfer", "stake", "unstake",
                   "connect", "block"]


def fails(r, what, code=None, *needles):
    """r failed (with exit status code if given) with one error line on
    stderr naming the program and containing every needle."""
    check(r.returncode != 0, f"{what}: exit status 0 (stdout "
                             f"{r.stdout.strip()[:120]!r})")
    if code is not None:
        check_eq(r.returncode, code, f"{what}: exit status")
    lines = nstest.error_lines(r.stderr)
    check(len(lines) == 1, f"{what}: expected one error line, got "
                           f"{r.stderr!r}")
    check(lines[0].startswith("nightshift"),
          f"{what}: error line does not name the program: {lines[0]!r}")
    for n in needles:
        check(n.lower() in lines[0].lower(),
              f"{what}: error does not mention {n!r}: {lines[0]!r}")
    return lines[0]


def script(name, *args, timeout=90):
    env = {**os.environ, "NIGHTSHIFT_BIN": nstest.BIN}
    return subprocess.run([os.path.join(nstest.REPO, "testnet", name),
                           *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env, stdin=subprocess.DEVNULL)


def check_help():
    for cmd in LEDGER_COMMANDS:
        for flag in ("--help", "-h"):
            r = cli(cmd, flag)
            check_eq(r.returncode, 0, f"`nightshift {cmd} {flag}` exit")
            check(r.stdout.startswith(f"usage: nightshift {cmd}"),
                  f"`nightshift {cmd} {flag}` prints no usage: "
                  f"{r.stdout[:80]!r}")
            check_eq(r.stderr, "", f"stderr of `nightshift {cmd} {flag}`")
        # Help wins over everything else on the line.
        r = cli(cmd, "--datadir", "/nonexistent", "--help")
        check(r.returncode == 0 and r.stdout.startswith("usage:"),
              f"`nightshift {cmd} --datadir X --help` did not print help")


def check_never_ran(a, b):
    """a has a genesis but its node never started; a bare datadir has no
    genesis at all."""
    fails(cli("ledger", "--datadir", a.datadir), "ledger before the node "
          "first ran", 1, "no ledger", "node")
    fails(cli("ledger", "--datadir", a.datadir, "--json"),
          "ledger --json before the node first ran", 1, "no ledger")
    # balance reads the genesis instead: a requester sees what it has to
    # spend before its first submit (issue 12).
    for who in (a, b):
        r = cli("balance", "--datadir", a.datadir, who.id, "--json")
        check_eq(r.returncode, 0, f"balance of {who.name} before the node "
                 f"first ran: exit ({r.stderr.strip()})")
        doc = json.loads(r.stdout)
        check_eq((doc["free"], doc["staked"], doc["locked"], doc["seq"],
                  doc["genesis_view"]), (CREDITS, 0, 0, 0, True),
                 f"{who.name}'s genesis view")
    r = cli("balance", "--datadir", a.datadir)
    check(r.returncode == 0 and "genesis" in r.stdout and
          "1000000" in r.stdout, f"balance (text) before the node first "
          f"ran: {r.returncode} {r.stdout!r} {r.stderr!r}")
    bare = nstest.Node(a.net, "bare")
    os.makedirs(bare.datadir, mode=0o700)
    bare.init()  # key and config, no genesis
    for cmd in ("balance", "ledger"):
        fails(cli(cmd, "--datadir", bare.datadir), f"{cmd} without a "
              f"genesis", 1, "genesis")
    missing = os.path.join(a.net.dir, "no-such-dir")
    fails(cli("ledger", "--datadir", missing), "ledger on a missing dir", 1)
    fails(cli("balance", "--datadir", missing), "balance on a missing dir",
          1)
    for cmd in ("transfer", "stake", "unstake"):
        args = [cmd, "--datadir", a.datadir, "5"]
        if cmd == "transfer":
            args[1:1] = ["--to", b.id]
        fails(cli(*args), f"{cmd} with no node running", 1, "no node")
    check(not os.path.exists(os.path.join(a.datadir, "ledger",
                                          "data.mdb")),
          "a read-only command created the ledger")


def check_usage_errors(a, b):
    bad_ids = ["notanid", "", b.id[:-1], b.id + "a",
               "1" * 52, b.id[:51] + "1"]
    for bad in bad_ids:
        fails(cli("balance", "--datadir", a.datadir, bad),
              f"balance {bad!r}", 2, "node id")
        fails(cli("transfer", "--datadir", a.datadir, "--to", bad, "5"),
              f"transfer --to {bad!r}", 2, "id")
    fails(cli("ledger", "--datadir", a.datadir, "--author", "zz"),
          "ledger --author zz", 2, "--author")
    fails(cli("block", "--datadir", a.datadir, "zz", "--ms", "10"),
          "block zz", 2)
    fails(cli("connect", "--datadir", a.datadir, "zz@tcp://127.0.0.1:1"),
          "connect to a bad address", 2, "address")
    for amount in ("0", "-5", "abc", "1.0000001", "1e6", "1.",
                   "99999999999999999999999", ""):
        for cmd in ("stake", "unstake"):
            fails(cli(cmd, "--datadir", a.datadir, amount),
                  f"{cmd} {amount!r}", 2)
        fails(cli("transfer", "--datadir", a.datadir, "--to", b.id, amount),
              f"transfer {amount!r}", 2)
    fails(cli("transfer", "--datadir", a.datadir, "5"),
          "transfer without --to", 2, "--to")
    fails(cli("stake", "--datadir", a.datadir), "stake without AMOUNT", 2,
          "AMOUNT")
    fails(cli("ledger", "--datadir", a.datadir, "--limit", "x"),
          "ledger --limit x", 2, "--limit")
    for cmd in ("ledger", "balance", "transfer", "stake", "unstake"):
        fails(cli(cmd, "5"), f"{cmd} without --datadir", 2, "--datadir")
        fails(cli(cmd, "--datadir", a.datadir, "--bogus"),
              f"{cmd} --bogus", 2, "--bogus")


def refused(node, what, rule, *args):
    """The node refuses the append: exit != 0, the rule named, and the
    account and ledger unchanged."""
    before = lu.balance(node.datadir, node.id)
    r = cli(*args)
    fails(r, what, None, rule)
    check(r.stdout.strip() == "", f"{what}: printed {r.stdout[:100]!r}")
    check_eq(lu.balance(node.datadir, node.id), before,
             f"{node.name}'s balance and seq after a refused {what}")


def check_refusals(a, b):
    a_bal = lu.balance(a.datadir, a.id)
    check_eq((a_bal["free"], a_bal["staked"], a_bal["locked"],
              a_bal["seq"]), (CREDITS, 0, 0, 0), "a's genesis balance")
    refused(a, "transfer beyond the balance", "insufficient_funds",
            "transfer", "--datadir", a.datadir, "--to", b.id, CREDITS + 1)
    refused(a, "transfer of 2^63 micro-credits", "insufficient_funds",
            "transfer", "--datadir", a.datadir, "--to", b.id,
            f"{2 ** 63 // 10 ** 6}.{2 ** 63 % 10 ** 6:06d}")
    refused(a, "stake beyond the balance", "insufficient_funds",
            "stake", "--datadir", a.datadir, CREDITS + 1)
    refused(a, "unstake with nothing staked", "insufficient_funds",
            "unstake", "--datadir", a.datadir, 1)
    refused(a, "transfer to oneself", "invalid",
            "transfer", "--datadir", a.datadir, "--to", a.id, 5)

    # The whole balance can go; one credit more cannot.
    e1 = lu.append(a, "transfer", 400000, to=b)
    e2 = lu.append(a, "stake", 600000)
    refused(a, "transfer from an empty account", "insufficient_funds",
            "transfer", "--datadir", a.datadir, "--to", b.id, 1)
    refused(a, "unstake beyond the stake", "insufficient_funds",
            "unstake", "--datadir", a.datadir, 600001)
    e3 = lu.append(a, "unstake", 600000)
    refused(a, "unstake of what was just unstaked", "insufficient_funds",
            "unstake", "--datadir", a.datadir, 1)
    bal = lu.balance(a.datadir, a.id)
    check_eq((bal["free"], bal["staked"], bal["seq"]), (600000, 0, 3),
             "a's (free, staked, seq) after transfer, stake, unstake and "
             "seven refusals")
    doc = lu.ledger(a.datadir, author=a.id)
    check_eq([(e["seq"], e["type"], e["id"]) for e in doc["list"]],
             [(1, "transfer", e1), (2, "stake", e2), (3, "unstake", e3)],
             "a's chain (refused appends leave no trace)")
    # --limit and the human forms.
    lu.wait_converged([a, b], 15, "b to receive a's entries and take in "
                      "the transfer", min_entries=3, pending=0)
    one = lu.ledger(b.datadir, limit=1)
    check(one["entries"] >= 3 and len(one["list"]) == 1,
          f"ledger --limit 1: {one['entries']} entries, "
          f"{len(one['list'])} listed")
    text = nstest.cli_ok("ledger", "--datadir", b.datadir)
    check("conserved" in text and "NOT" not in text and a.id[:10] in text,
          f"ledger's table: {text[:300]!r}")
    text = nstest.cli_ok("balance", "--datadir", b.datadir)
    check(b.id in text and "free" in text, f"balance's text: {text!r}")
    # b took a's transfer in on its own (a claim entry).
    check_eq(lu.balance(b.datadir, b.id)["free"], CREDITS + 400000,
             "b's free credits once it took in the transfer")
    lu.append(b, "stake", 1)
    bal = lu.balance(b.datadir, b.id)
    check_eq((bal["free"], bal["staked"]), (CREDITS + 400000 - 1, 1),
             "b's (free, staked) after taking in a's transfer")
    # An unknown but valid id has an empty account.
    outsider = nstest.cli_ok("id", "--datadir",
                             os.path.join(a.net.dir, "bare")).split()[0]
    bal = lu.balance(a.datadir, outsider)
    check_eq((bal["id"], bal["free"], bal["staked"], bal["locked"]),
             (outsider, 0, 0, 0), "balance of an account not in genesis")


def check_dead_node(a, b):
    """A node killed with SIGKILL leaves a stale control socket: appends
    fail fast with a clear error; the read-only views still work."""
    a.kill()
    t0 = time.monotonic()
    r = cli("transfer", "--datadir", a.datadir, "--to", b.id, "1")
    took = time.monotonic() - t0
    fails(r, "transfer to a killed node", 1, "no node")
    check(took < 3, f"transfer to a killed node took {took:.1f}s to fail")
    bal = lu.balance(a.datadir, a.id)
    check_eq(bal["seq"], 3, "a's seq read from the killed node's datadir")


def check_testnet(net):
    tn = os.path.join(net.dir, "tn")
    base, port_lock = nstest.reserve_ports(3)
    net.at_exit(port_lock.close)
    net.at_exit(lambda: os.path.exists(os.path.join(tn, "pids")) and
                script("stop.sh", "-d", tn, timeout=30))
    allot = 777777
    r = script("run.sh", "-n", 3, "-d", tn, "-p", base, "-i", HB_MS,
               "-t", 30, "-c", allot)
    check(r.returncode == 0, f"run.sh exited {r.returncode}:\n{r.stdout}\n"
                             f"{r.stderr}")
    datadirs = [os.path.join(tn, f"node{i}") for i in range(3)]
    req = os.path.join(tn, "requester")
    ids = [nstest.cli_ok("id", "--datadir", d).split()[0]
           for d in datadirs + [req]]
    # The requester's node never ran: it sees its genesis allocation
    # before its first submit (issue 12)...
    r = cli("balance", "--datadir", req, "--json")
    check_eq(r.returncode, 0, f"balance on the requester datadir (no node "
             f"ever ran there): exit ({r.stderr.strip()})")
    doc = json.loads(r.stdout)
    check(doc["genesis_view"] and doc["free"] == allot,
          f"the requester's genesis view: {doc}")
    # ...and every node's ledger knows its balance. Nodes may stake part
    # of theirs at start (run.sh sets node.stake): their only entries.
    def same_everywhere():
        docs = [lu.ledger(d) for d in datadirs]
        ids_seen = {tuple(sorted(e["id"] for e in doc["list"]))
                    for doc in docs}
        return (len(ids_seen) == 1,
                [(os.path.basename(d), doc["entries"])
                 for d, doc in zip(datadirs, docs)])
    nstest.wait_until(same_everywhere, 15, "the 3 nodes' ledgers to agree "
                      "on run.sh's start-up entries")
    for d in datadirs:
        doc = lu.ledger(d)
        check_eq((doc["accounts"], doc["total"], doc["conserved"],
                  doc["pending_credit"], doc["burned"]),
                 (4, 4 * allot, True, 0, 0),
                 f"{os.path.basename(d)}'s ledger (accounts, total, "
                 f"conserved, pending, burned)")
        kinds = {e["type"] for e in doc["list"]}
        check(kinds <= {"stake"}, f"entries other than stakes right after "
                                  f"run.sh: {kinds}")
        for who in ids:
            bal = lu.balance(d, who)
            staked = sum(int(e["summary"]) for e in doc["list"]
                         if e["author"] == who)
            check_eq((bal["free"] + bal["staked"], bal["staked"],
                      bal["locked"]), (allot, staked, 0),
                     f"(free+staked, staked, locked) of {who[:10]} in "
                     f"{os.path.basename(d)}")
        own = json.loads(nstest.cli_ok("balance", "--datadir", d, "--json"))
        check_eq((own["id"], own["free"] + own["staked"]),
                 (ids[datadirs.index(d)], allot),
                 f"own balance of {os.path.basename(d)}")
    bal = lu.balance(datadirs[0], ids[-1])
    check_eq((bal["free"], bal["staked"], bal["locked"], bal["seq"]),
             (allot, 0, 0, 0), "the requester's balance")
    r = script("stop.sh", "-d", tn, timeout=60)
    check(r.returncode == 0, f"stop.sh exited {r.returncode}: {r.stderr}")


def test(net):
    net.heartbeat_ms = HB_MS
    check_help()
    a, b = net.make_nodes(2)
    check_never_ran(a, b)
    check_usage_errors(a, b)
    log("help, never-ran datadirs and usage errors checked")
    a.start()
    b.start(bootstrap=[a])
    net.wait_mesh([a, b])
    check_refusals(a, b)
    log("refusals checked")
    check_dead_node(a, b)
    check_testnet(net)
    log("testnet/run.sh genesis checked")


nstest.main(test, "ledger_cli")
