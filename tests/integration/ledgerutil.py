"""ledgerutil - ledger helpers shared by the ledger integration tests
(test_ledger_sync, test_partition, test_crash_safety, test_ledger_cli,
test_forks, test_forks_confirmed, and the market tests that check every
node's ledger: test_slash_by_ref, test_pipeline_award, test_self_check).

Everything goes through the real CLI, as scripts do:
  * `transfer|stake|unstake --datadir D ... --json` asks the node to append
    (it answers {"entry": HEX, "seq": N} once the entry is durable);
  * `ledger --json --limit N` and `balance ID --json` read the datadir's
    LMDB directly (the node may or may not run);
  * `status --json` gives the running node's ledger map (entries, digest,
    buffered, rejected{...}).
"""
import base64
import json
import os
import subprocess
import threading

import nstest
from nstest import TestFailure, check, cli, wait_until

ALL = 100000  # --limit that lists every entry of these small ledgers


def no_pull_repair(nodes):
    """Switch the gossip layer's pull repair off (config.ini, before the
    nodes start): otherwise it re-delivers what a node missed within its
    30 s window, and the ledger's own sync (heads exchange and range pulls)
    would go untested."""
    for n in nodes:
        nstest.cli_ok("init", "--datadir", n.datadir, "--set",
                      "node.pull_interval_ms=3600000")


def append(node, cmd, amount, to=None, timeout=20):
    """Ask node to append `cmd` (transfer, stake, unstake); return the
    stored entry's id (hex). Raises TestFailure if the CLI fails."""
    args = [cmd, "--datadir", node.datadir]
    if to is not None:
        args += ["--to", to.id if isinstance(to, nstest.Node) else to]
    args += [str(amount), "--json"]
    r = cli(*args, timeout=timeout)
    if r.returncode != 0:
        raise TestFailure(f"`nightshift {' '.join(args)}` on {node.name} "
                          f"exited {r.returncode}: {r.stderr.strip()}")
    try:
        doc = json.loads(r.stdout)
    except json.JSONDecodeError as e:
        raise TestFailure(f"{cmd} --json on {node.name} printed invalid "
                          f"JSON ({e}): {r.stdout[:200]!r}")
    check(isinstance(doc, dict) and isinstance(doc.get("entry"), str) and
          len(doc["entry"]) == 64,
          f"{cmd} --json on {node.name}: no entry id in {doc!r}")
    return doc["entry"]


def ledger(datadir, limit=ALL, author=None):
    """`ledger --datadir D --json --limit N` as a dict; raises on failure
    (a non-conserving ledger exits 1: the document is still returned)."""
    args = ["ledger", "--datadir", datadir, "--json", "--limit", str(limit)]
    if author:
        args += ["--author", author]
    r = cli(*args)
    try:
        doc = json.loads(r.stdout) if r.stdout.strip() else None
    except json.JSONDecodeError as e:
        raise TestFailure(f"ledger --json on {datadir} printed invalid JSON "
                          f"({e}): {r.stdout[:200]!r}")
    if doc is None:
        raise TestFailure(f"`nightshift {' '.join(args)}` exited "
                          f"{r.returncode}: {r.stderr.strip()}")
    check(r.returncode == (0 if doc.get("conserved") else 1),
          f"ledger on {datadir}: exit {r.returncode} with conserved="
          f"{doc.get('conserved')}")
    return doc


def balance(datadir, account):
    """`balance --datadir D ID --json` as a dict."""
    r = cli("balance", "--datadir", datadir, account, "--json")
    if r.returncode != 0:
        raise TestFailure(f"balance {account[:10]} on {datadir} exited "
                          f"{r.returncode}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def ledger_status(node):
    """The `ledger` map of the running node's status --json."""
    st = node.status()
    check("ledger" in st, f"{node.name}: status --json has no ledger map")
    return st["ledger"]


def accounts_of(doc, extra=()):
    """Every account a ledger document mentions: authors of its entries,
    plus extra ids (genesis accounts, transfer recipients)."""
    return sorted({e["author"] for e in doc["list"]} | set(extra))


def snapshot(node, accounts):
    """What must be identical on every node once converged."""
    doc = ledger(node.datadir)
    ids = sorted(e["id"] for e in doc["list"])
    bal = {}
    for a in accounts:
        b = balance(node.datadir, a)
        bal[a] = (b["free"], b["staked"], b["locked"], b["seq"], b["banned"])
    return {"entries": doc["entries"], "listed": len(ids),
            "ids": ids, "accounts": doc["accounts"],
            "pending_credit": doc["pending_credit"],
            "burned": doc["burned"], "total": doc["total"],
            "conserved": doc["conserved"], "balances": bal}


def wait_converged(nodes, timeout, what="the ledgers to converge",
                   min_entries=None, pending=None):
    """Wait until every node's status shows the same ledger (entries and
    digest, nothing buffered), with at least min_entries entries and, if
    given, exactly `pending` credits not yet taken in (a number, or a
    function called on each try that returns it). Nodes take their
    credits in on their own (a claim timer appends a STAKE of 0 with refs),
    so `pending` = the credits of accounts no running node owns makes the
    state final: nothing more will be appended. Returns (entries, digest).
    """
    def same():
        seen = []
        for n in nodes:
            check(n.running(), f"{n.name} died: {n.log_tail(5)}")
            lg = ledger_status(n)
            seen.append((n.name, lg["entries"], lg["digest"][:12],
                         lg["buffered"], lg["pending_credit"]))
        heads = {(e, d, p) for _, e, d, _, p in seen}
        want = pending() if callable(pending) else pending
        ok = (len(heads) == 1 and all(s[3] == 0 for s in seen) and
              (min_entries is None or seen[0][1] >= min_entries) and
              (want is None or seen[0][4] == want))
        return (ok, f"(name, entries, digest, buffered, pending): {seen}")
    wait_until(same, timeout, what, interval=0.25)
    lg = ledger_status(nodes[0])
    return lg["entries"], lg["digest"]


def sent_to(doc, account):
    """Credits the entries of a ledger document send to account."""
    short = account[:10]
    total = 0
    for e in doc["list"]:
        if e["type"] == "transfer":
            amount, _, to = e["summary"].partition(" to ")
            if to == short:
                total += int(amount)
    return total


def claims(doc, author):
    """Entries of author that only take credits in (STAKE of 0 with refs:
    what a node appends on its own)."""
    return [e for e in doc["list"] if e["author"] == author and
            e["type"] == "stake" and e["summary"] == "0" and e["refs"] > 0]


def check_identical(nodes, accounts):
    """Every node's ledger lists the same entries with the same balances
    for every account, and conserves credits. Returns the snapshot."""
    first = None
    for n in nodes:
        s = snapshot(n, accounts)
        check(s["conserved"], f"{n.name}: ledger not conserved: total "
                              f"{s['total']}, pending {s['pending_credit']}")
        check(s["listed"] == s["entries"],
              f"{n.name}: ledger --json lists {s['listed']} entries but "
              f"counts {s['entries']}")
        if first is None:
            first = (n, s)
            continue
        f = first[1]
        for key in ("entries", "accounts", "pending_credit", "burned",
                    "total"):
            check(s[key] == f[key], f"{n.name} has {key}={s[key]}, "
                                    f"{first[0].name} has {f[key]}")
        if s["ids"] != f["ids"]:
            only = set(s["ids"]) ^ set(f["ids"])
            raise TestFailure(f"{n.name} and {first[0].name} list different "
                              f"entries ({len(only)} differ, e.g. "
                              f"{sorted(only)[:2]})")
        for a in accounts:
            check(s["balances"][a] == f["balances"][a],
                  f"balance of {a[:10]} (free, staked, locked, seq, banned): "
                  f"{n.name} says {s['balances'][a]}, {first[0].name} says "
                  f"{f['balances'][a]}")
    return first[1]


# ---- forks: entries signed outside any node, injected with ns_flood -------

FORGE_BIN = os.environ.get("NS_FORGE_BIN") or os.path.join(
    nstest.REPO, "build", "tests", "integration", "ns_forge")


def forge(author, network_id, seq, prev, to, amount):
    """(hex bytes, id) of a TRANSFER signed with author's key."""
    r = subprocess.run([FORGE_BIN, os.path.join(author.datadir, "node.key"),
                        network_id, str(seq), prev, to.id, str(amount)],
                       capture_output=True, text=True, timeout=20)
    check(r.returncode == 0, f"ns_forge exited {r.returncode}: {r.stderr}")
    hexbytes, entry_id = r.stdout.split()
    return hexbytes, entry_id


def inject(plan, network_id):
    """plan: [(node, entry hex)]: all sent at once, one ns_flood each."""
    errors = []

    def send(node, hexbytes):
        r = subprocess.run([nstest.FLOOD_BIN, node.addr, "--entry", hexbytes,
                            "--network", network_id],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            errors.append(f"ns_flood to {node.name}: {r.stderr.strip()}")
    threads = [threading.Thread(target=send, args=p) for p in plan]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=40)
    check(not errors, "; ".join(errors))


def hex_of(node_id):
    """The hex form of a base32 node id (as the ledger's log lines use)."""
    raw = base64.b32decode(node_id.upper() + "=" * (-len(node_id) % 8))
    return raw[:32].hex()
