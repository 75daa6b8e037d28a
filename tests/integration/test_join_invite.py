#!/usr/bin/env python3
"""One-line joining (issue 12, item 6), with real processes:

  * `invite` on a running node prints one line: the network id (the hash
    of its genesis) and its own address, then live provider peers';
  * `init --join LINE` in a fresh datadir fetches the genesis from a
    bootstrap peer over CURVE, writes the identical file and the bootstrap
    setting, and says the next command; that node starts with no flags,
    joins, and its ledger converges with the others';
  * `invite` on a stopped node gives just its own address: the advertise
    endpoint when set, never a wildcard host;
  * `init --join` against a refused port, a wrong key (a live node's
    address with another id), a port that never answers (timed out), a
    node of another network, and malformed
    lines: exit non-zero with one error line naming the address and the
    cause, and no datadir (nor a temporary one) left behind;
  * a light peer (`submit`) whose bootstrap has the wrong key says so,
    naming the address, instead of "could not reach any peer".
"""
import base64
import json
import os
import shlex
import socket

import ledgerutil
import nstest
from nstest import check, check_eq, cli, cli_ok, error_lines, log


def b32_to_hex(text):
    pad = "=" * (-len(text) % 8)
    return base64.b32decode(text.upper() + pad).hex()


def parse_invite(line):
    check(line.startswith("nightshift:1:"), f"invite: {line!r}")
    net_id, _, addrs = line[len("nightshift:1:"):].partition("@")
    return b32_to_hex(net_id), addrs.split(",")


def leftovers(path):
    parent, base = os.path.split(path)
    return [f for f in os.listdir(parent)
            if f == base or f.startswith(base + ".join-")]


def join_fails(net, invite, name, want_addr, want_cause, rc_want=None):
    """init --join must fail with one line naming want_addr and the cause,
    and leave nothing."""
    datadir = os.path.join(net.dir, name)
    r = cli("init", "--join", invite, "--datadir", datadir, "--listen",
            "tcp://127.0.0.1:0", timeout=30)
    lines = error_lines(r.stderr)
    log(f"{name}: exit {r.returncode}: {r.stderr.strip()}")
    check(r.returncode != 0, f"{name}: init --join succeeded: {r.stdout}")
    if rc_want is not None:
        check_eq(r.returncode, rc_want, f"{name}: exit status")
    check_eq(len(lines), 1, f"{name}: error lines ({lines})")
    if want_addr:
        check(want_addr in lines[0], f"{name}: the error does not name "
                                     f"{want_addr}: {lines[0]}")
    check(want_cause in lines[0], f"{name}: the error does not say "
                                  f"{want_cause!r}: {lines[0]}")
    check(not leftovers(datadir), f"{name}: left {leftovers(datadir)}")
    check_eq(r.stdout, "", f"{name}: stdout")


def test(net):
    a, b = net.make_nodes(2)
    net.start_all([a, b])
    net.wait_mesh([a, b])
    ledgerutil.append(a, "transfer", 5, to=b)
    net_hex = a.status()["network_id"]

    # ---- invite from a running node
    line = cli_ok("invite", "--datadir", a.datadir)
    check_eq(len(line.splitlines()), 1, "invite output lines")
    line = line.strip()
    got_net, addrs = parse_invite(line)
    check_eq(got_net, net_hex, "the invitation's network id")
    check_eq(addrs[0], a.addr, "the invitation's first address")
    roles = {p["id"]: p["role"] for p in a.peers()}
    if roles.get(b.id) == "provider":
        check(b.addr in addrs, f"b (a live provider) is not in {addrs}")
    check(all("0.0.0.0" not in x for x in addrs), f"wildcard in {addrs}")
    doc = json.loads(cli_ok("invite", "--datadir", a.datadir, "--json"))
    check_eq(doc["invite"], line, "invite --json")
    log(f"invite: {line[:60]}... ({len(addrs)} addresses)")

    # ---- init --join into an empty datadir, then start with no flags
    c = net.node("c")  # an empty directory
    r = cli("init", "--join", line, "--datadir", c.datadir, "--listen",
            "tcp://127.0.0.1:0", timeout=30)
    check_eq(r.returncode, 0, f"init --join ({r.stderr.strip()})")
    last = r.stdout.strip().splitlines()[-1].strip()
    check_eq(shlex.split(last)[1:], ["node", "--datadir", c.datadir],
             "the next command init --join prints")
    check(os.path.realpath(shlex.split(last)[0]) ==
          os.path.realpath(nstest.BIN),
          f"the next command does not run this binary: {last}")
    with open(os.path.join(a.datadir, "genesis.ini"), "rb") as f1, \
            open(os.path.join(c.datadir, "genesis.ini"), "rb") as f2:
        check(f1.read() == f2.read(), "the fetched genesis differs")
    with open(os.path.join(c.datadir, "config.ini")) as f:
        cfg = f.read()
    check(a.addr in cfg, f"config.ini lacks the bootstrap {a.addr}: {cfg}")
    c.id = cli_ok("id", "--datadir", c.datadir).splitlines()[0]
    c.start()
    net.wait_mesh([a, b, c])
    ledgerutil.append(a, "transfer", 7, to=c)
    # c takes its credit in by itself (a claim), and everyone agrees.
    nstest.wait_until(
        lambda: (ledgerutil.balance(c.datadir, c.id)["free"] == 7,
                 ledgerutil.balance(c.datadir, c.id)),
        30, "c to take in the 7 credits sent to it")
    ledgerutil.wait_converged([a, b, c], 30, min_entries=3)
    log("c joined from the invitation and its ledger converged")

    # ---- invite on a stopped node: its own address, advertise first
    base, lock = nstest.reserve_ports(4)
    net.at_exit(lock.close)
    g = os.path.join(a.datadir, "genesis.ini")
    s = net.node("s")
    cli_ok("init", "--datadir", s.datadir, "--genesis", g, "--listen",
           f"tcp://127.0.0.1:{base}")
    s_id = cli_ok("id", "--datadir", s.datadir).splitlines()[0]
    got = cli_ok("invite", "--datadir", s.datadir).strip()
    check_eq(got, f"{line.split('@')[0]}@{s_id}@tcp://127.0.0.1:{base}",
             "invite of a stopped node")
    cli_ok("init", "--datadir", s.datadir, "--set",
           f"node.advertise=tcp://192.0.2.7:{base}")
    got = cli_ok("invite", "--datadir", s.datadir).strip()
    check(got.endswith(f"@{s_id}@tcp://192.0.2.7:{base}"),
          f"invite ignores advertise: {got}")
    w = net.node("w")
    cli_ok("init", "--datadir", w.datadir, "--genesis", g, "--listen",
           f"tcp://0.0.0.0:{base + 1}")
    r = cli("invite", "--datadir", w.datadir)
    check("0.0.0.0" not in r.stdout, f"invite hands out 0.0.0.0: {r.stdout}")
    check(r.returncode == 0 or "advertise" in r.stderr,
          f"invite of a wildcard listener: {r.returncode} {r.stderr}")

    # ---- failures: one line naming the address and the cause, nothing left
    prefix = line.split("@")[0]
    refused = f"{a.id}@tcp://127.0.0.1:{base + 2}"
    join_fails(net, f"{prefix}@{refused}", "j_refused", refused,
               "connection refused", 1)
    wrong_key = f"{b.id}@{a.endpoint}"
    join_fails(net, f"{prefix}@{wrong_key}", "j_key", wrong_key,
               "key mismatch", 1)
    # A port that takes TCP connections (the kernel's backlog) and never
    # speaks: no CURVE handshake within libzmq's 5 s.
    silent = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    net.at_exit(silent.close)
    silent.bind(("127.0.0.1", base + 3))
    silent.listen(8)
    mute = f"{a.id}@tcp://127.0.0.1:{base + 3}"
    join_fails(net, f"{prefix}@{mute}", "j_silent", mute, "timed out", 1)
    [o] = net.make_nodes(1, prefix="other", genesis_name="another-network")
    o.start()
    join_fails(net, f"{prefix}@{o.addr}", "j_other", o.addr,
               "other network", 1)
    # One bad address among good ones still joins; all bad names each.
    join_fails(net, f"{prefix}@{refused},{wrong_key}", "j_both", refused,
               "key mismatch", 1)
    for bad, why in [
            ("hello", "does not start with"),
            (line + ",", "empty address"),
            (line.replace("nightshift:1:", "nightshift:2:"), "version"),
            (prefix + "@" + a.addr + "," + a.addr, "repeated"),
            (prefix[:-1] + "1@" + a.addr, "base32"),
            (prefix + "@" + a.id + "@tcp://0.0.0.0:7000", "wildcard"),
            (prefix + "@" + a.id + "@tcp://127.0.0.1:99999", "not an address"),
            (line + " ", "space"),
            (prefix + "@", "no bootstrap address")]:
        join_fails(net, bad, "j_malformed", None, why, 2)
    # A datadir in use is refused before any traffic.
    r = cli("init", "--join", line, "--datadir", a.datadir)
    check(r.returncode != 0 and "not an empty directory" in r.stderr,
          f"init --join over a datadir: {r.returncode} {r.stderr}")
    log("every failure named its address and cause and left nothing")

    # ---- a node whose bootstraps fail says why in its log (once)
    lonely = net.node("lonely")
    cli_ok("init", "--datadir", lonely.datadir, "--genesis", g, "--listen",
           "tcp://127.0.0.1:0")
    lonely.id = cli_ok("id", "--datadir", lonely.datadir).splitlines()[0]
    lonely.start(bootstrap=[refused, wrong_key])

    # ---- a light peer says why its bootstrap failed
    req = net.node("req")
    cli_ok("init", "--datadir", req.datadir, "--genesis", g)
    inp = os.path.join(net.dir, "in.bin")
    with open(inp, "wb") as f:
        f.write(bytes(4096))
    r = cli("submit", "--datadir", req.datadir, "--bootstrap", wrong_key,
            "--builtin", "vector_add", "--global", "1024", "--arg",
            f"in:{inp}", "--arg", f"in:{inp}", "--arg",
            f"out:4096:{os.path.join(net.dir, 'out.bin')}", "--arg",
            "u32:1024", "--max-price", "1", timeout=60)
    check(r.returncode != 0, "submit through a wrong key succeeded")
    last = error_lines(r.stderr)[-1]
    check(wrong_key in last and "key mismatch" in last,
          f"submit does not name the address and the cause: {last}")
    log(f"submit: {last[:120]}")

    def said():
        lines = [x for x in lonely.log_text().splitlines()
                 if "event=no_peers" in x]
        return (bool(lines), lines)
    nstest.wait_until(said, 30, "the lonely node to log why it has no peer")
    line = [x for x in lonely.log_text().splitlines()
            if "event=no_peers" in x][0]
    for want in (refused, "connection refused", wrong_key, "key mismatch"):
        check(want in line, f"the node's no_peers line lacks {want}: {line}")
    log(f"node: {line[:160]}")


nstest.main(test, "join_invite")
