"""Nightshift nodes on both sides of a masquerading router (netns.py), for
test_nat.py, test_nat_relay.py and bench/bench_nat.py.

The public nodes listen on 0.0.0.0 in the pub namespace and advertise
tcp://10.77.0.1:PORT; ports are fixed because each run has namespaces of
its own (nothing else binds there). The home nodes run with
node.reachable=no: they dial out only.
"""
import json
import os
import random
import struct
import subprocess
import time

import netns
import nstest
from nstest import check, cli, cli_ok, log

PUB_PORT = 7946


def setup(net, homes=1):
    """The namespaces, removed (after the processes in them) when the net
    closes; nstest.Skip where they cannot be made."""
    try:
        topo = netns.Topology(homes=homes)
    except netns.NetnsUnavailable as e:
        raise nstest.Skip(f"behind-a-router test needs network namespaces: "
                          f"{e}")

    def teardown():
        for p in net.procs:
            if p.poll() is None:
                p.terminate()
        for p in net.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        topo.close()
    net.at_exit(teardown)
    # The router is real: a home cannot be dialled, and what it opens
    # leaves with the router's address.
    check(topo.tcp_probe(topo.pub, topo.homes[0], netns.HOME_IPS[0]) is None,
          "pub reached a home directly: the router lets inbound through")
    seen = None
    for _ in range(3):  # the first packets may wait for ARP
        seen = seen or topo.tcp_probe(topo.homes[0], topo.pub, netns.PUB_IP)
    check(seen == netns.ROUTER_PUB_IP,
          f"a home's connection to pub came from {seen}, not the router's "
          f"{netns.ROUTER_PUB_IP} (no masquerade)")
    return topo


def make_nodes(net, topo, specs):
    """specs: [(name, netns, listen port)]; init'ed nodes on one genesis
    (1,000,000 credits each), datadirs in the test's dir."""
    nodes = []
    for name, ns, port in specs:
        n = net.node(name)
        n.netns = ns
        n.init(listen=f"tcp://0.0.0.0:{port}")
        nodes.append(n)
    g = net.genesis(nodes)
    for n in nodes:
        cli_ok("init", "--datadir", n.datadir, "--genesis", g)
    return nodes


def pub_args(port, *more):
    return ["--set", f"node.advertise=tcp://{netns.PUB_IP}:{port}", *more]


def job_files(net, n=4096):
    pa, pb = os.path.join(net.dir, "a.bin"), os.path.join(net.dir, "b.bin")
    for p in (pa, pb):
        with open(p, "wb") as f:
            f.write(struct.pack(f"{n}f", *[random.uniform(-1, 1)
                                           for _ in range(n)]))
    return n, pa, pb


def submit(net, ns, requester, boot, *flags, n=4096, tag="", timeout=150):
    """`nightshift submit` of a vector_add in namespace ns (None: here, on
    loopback); the receipt (JSON), the seconds it took and its stderr."""
    size, pa, pb = job_files(net, n)
    out = os.path.join(net.dir, f"out{tag}.bin")
    args = (["ip", "netns", "exec", ns] if ns else []) + [
            nstest.BIN, "submit", "--datadir",
            requester.datadir, "--bootstrap", boot, "--builtin",
            "vector_add", "--global", str(size), "--arg", f"in:{pa}",
            "--arg", f"in:{pb}", "--arg", f"out:{4 * size}:{out}",
            "--arg", f"u32:{size}", "--max-price", "10", "--bid-window-ms",
            "1500", "--deadline-s", "60", "--timeout-s", "120", "--json",
            *flags]
    t0 = time.monotonic()
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    took = time.monotonic() - t0
    open(os.path.join(net.dir, f"submit{tag}.err"), "w").write(r.stderr)
    check(r.returncode == 0,
          f"submit from {ns} exited {r.returncode}: {r.stderr[-1500:]} "
          f"{r.stdout[-800:]}")
    receipt = json.loads(r.stdout)
    a = struct.unpack(f"{size}f", open(pa, "rb").read())
    b = struct.unpack(f"{size}f", open(pb, "rb").read())
    got = struct.unpack(f"{size}f", open(out, "rb").read())
    check(all(abs(got[i] - (a[i] + b[i])) < 1e-5 for i in range(size)),
          "the job's output is not a + b")
    return receipt, took, r.stderr


def balance(node_dir, ident):
    r = cli("balance", "--datadir", node_dir, ident, "--json")
    check(r.returncode == 0, f"balance: {r.stderr.strip()}")
    return json.loads(r.stdout)


def free_credits(node_dir, ident):
    return float(balance(node_dir, ident)["free"])


def free_after_stake(watcher, provider, stake=100000, timeout=20):
    """provider's free credits on watcher's ledger once its stake is
    there (the base its earnings are seen against)."""
    nstest.wait_until(
        lambda: (float(balance(watcher.datadir, provider.id)["staked"]) >=
                 stake, "not staked yet"), timeout,
        f"{provider.name}'s stake to reach {watcher.name}'s ledger")
    return free_credits(watcher.datadir, provider.id)


def wait_held(holder, node, timeout=20):
    """holder lists node as a live peer that it holds over node's own
    connection."""
    def held():
        for p in holder.peers():
            if p["id"] == node.id:
                return p.get("held") == 1, f"listed, held={p.get('held')}"
        return False, "not listed"
    t0 = time.monotonic()
    nstest.wait_until(held, timeout, f"{holder.name} to list {node.name} "
                                     f"(behind the router) as a live peer")
    return time.monotonic() - t0


def wait_paid(watcher, provider, before, timeout=30):
    nstest.wait_until(
        lambda: (free_credits(watcher.datadir, provider.id) > before,
                 f"free {free_credits(watcher.datadir, provider.id)}"),
        timeout, f"{provider.name} to be paid (on {watcher.name}'s ledger)")
    log(f"{provider.name} paid: free {before} -> "
        f"{free_credits(watcher.datadir, provider.id)} credits")
