#!/usr/bin/env python3
"""testnet/run.sh -n 8 forms a network on fixed ports where every node lists
the 7 others with their devices; testnet/stop.sh stops exactly those nodes
(and nothing else), and both scripts refuse or no-op where they should."""
import json
import os
import re
import subprocess
import time

import nstest
from nstest import check, check_eq, cli, log

N = 8
HEARTBEAT_MS = 500


# Runs the real binary, but `node` on .../node3 without its --bootstrap.
ISOLATE_WRAPPER = """#!/bin/sh
if [ "$1" = node ] && [ "$3" != "${{3%/node3}}" ]; then
    exec {bin} node --datadir "$3"
fi
exec {bin} "$@"
"""


def script(name, *args, timeout=90, env=None):
    env = {**os.environ, "NIGHTSHIFT_BIN": nstest.BIN, **(env or {})}
    return subprocess.run([os.path.join(nstest.REPO, "testnet", name),
                           *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env, stdin=subprocess.DEVNULL)


def read_pids(tn):
    with open(os.path.join(tn, "pids")) as f:
        rows = [l.split(None, 1) for l in f.read().splitlines() if l.strip()]
    return [(int(p), d.strip()) for p, d in rows]


def test(net):
    tn = os.path.join(net.dir, "tn")
    base, port_lock = nstest.reserve_ports(N)
    net.at_exit(port_lock.close)

    def emergency_stop():
        # Whatever happened, nothing run.sh started may outlive the test.
        if os.path.exists(os.path.join(tn, "pids")):
            script("stop.sh", "-d", tn, timeout=30)
            for pid, _ in read_pids(tn):
                if nstest.pid_alive(pid) and "node" in nstest.pid_cmdline(pid):
                    os.kill(pid, 9)
    net.at_exit(emergency_stop)

    t0 = time.monotonic()
    r = script("run.sh", "-n", N, "-d", tn, "-p", base, "-i", HEARTBEAT_MS,
               "-t", 60)
    log(f"run.sh took {time.monotonic() - t0:.1f}s")
    check(r.returncode == 0, f"run.sh exited {r.returncode}:\n{r.stdout}\n"
                             f"{r.stderr}")
    check("testnet up" in r.stdout, f"no summary from run.sh: {r.stdout}")

    # What run.sh leaves behind.
    pids = read_pids(tn)
    check_eq(len(pids), N, "lines in DIR/pids")
    datadirs = [os.path.join(os.path.realpath(tn), f"node{i}")
                for i in range(N)]
    check_eq([d for _, d in pids], datadirs, "datadirs in DIR/pids")
    for pid, dd in pids:
        check(nstest.pid_alive(pid), f"pid {pid} of {dd} is not running")
        argv = nstest.pid_cmdline(pid)
        check("node" in argv and dd in argv,
              f"pid {pid} is not `nightshift node --datadir {dd}`: {argv}")
    ids = [nstest.cli_ok("id", "--datadir", d).splitlines()[0]
           for d in datadirs]
    check_eq(len(set(ids)), N, "distinct node ids")
    with open(os.path.join(tn, "bootstrap")) as f:
        check_eq(f.read().strip(), f"{ids[0]}@tcp://127.0.0.1:{base}",
                 "DIR/bootstrap")
    for i, d in enumerate(datadirs):
        with open(os.path.join(d, "node.addr")) as f:
            check_eq(f.read().strip(), f"{ids[i]}@tcp://127.0.0.1:{base + i}",
                     f"node{i}'s address")

    # The requester: a funded datadir with the same genesis, no node on it.
    req = os.path.join(tn, "requester")
    req_id = nstest.cli_ok("id", "--datadir", req).splitlines()[0]
    with open(os.path.join(tn, "genesis.ini")) as f:
        genesis = f.read()
    with open(os.path.join(req, "genesis.ini")) as f:
        check_eq(f.read(), genesis, "requester's genesis.ini")
    for i in range(N):
        with open(os.path.join(datadirs[i], "genesis.ini")) as f:
            check(f.read() == genesis, f"node{i} has another genesis")
    for who in ids + [req_id]:
        check(f"{who} = " in genesis, f"genesis does not fund {who}")
    check(not os.path.exists(os.path.join(req, "control.sock")),
          "a node runs on the requester datadir")

    # Every node lists the 7 others, with devices.
    devs = json.loads(nstest.cli_ok("devices", "--json"))
    for i, d in enumerate(datadirs):
        peers = json.loads(nstest.cli_ok("peers", "--datadir", d, "--json"))
        got = {p["id"] for p in peers}
        check_eq(got, set(ids) - {ids[i]}, f"peers of node{i}")
        for p in peers:
            for key in ("id", "endpoint", "last_seen_ms", "devices"):
                check(key in p, f"node{i}: peer entry without {key}: {p}")
            check(isinstance(p["devices"], list), f"devices not a list: {p}")
            if devs:  # this machine has OpenCL devices: peers announce them
                check(len(p["devices"]) == len(devs),
                      f"node{i}: peer {p['id'][:10]} announces "
                      f"{len(p['devices'])} devices, this machine has "
                      f"{len(devs)}")
                check(all("name" in x and "type" in x for x in p["devices"]),
                      f"device entries lack name/type: {p['devices']}")
            check(p["last_seen_ms"] < 3 * HEARTBEAT_MS,
                  f"node{i}: peer {p['id'][:10]} last seen "
                  f"{p['last_seen_ms']} ms ago")
            check_eq(p["endpoint"],
                     f"tcp://127.0.0.1:{base + ids.index(p['id'])}",
                     f"node{i}'s endpoint for {p['id'][:10]}")

    # A healthy network: every drop has a named reason (they add up to the
    # total, "other" included) and nothing is logged at warn level.
    for i, d in enumerate(datadirs):
        r = cli("status", "--datadir", d, "--json")
        check(r.returncode == 0, f"status node{i}: {r.stderr}")
        dropped = json.loads(r.stdout)["dropped"]
        check_eq(sum(v for k, v in dropped.items() if k != "total"),
                 dropped["total"], f"node{i}'s named drops vs the total")
        with open(os.path.join(d, "node.log")) as f:
            warns = [line for line in f if "level=warn" in line]
        check(not warns, f"node{i} warned on a healthy network: {warns[:3]}")

    # A second run.sh on a running testnet is refused and changes nothing.
    r = script("run.sh", "-n", 2, "-d", tn, "-p", base + 20)
    check(r.returncode != 0, "run.sh accepted a DIR with a running testnet")
    check("running testnet" in r.stderr, f"unclear refusal: {r.stderr}")
    check_eq(read_pids(tn), pids, "DIR/pids after the refused run")

    # stop.sh signals only what is still its node: a pid in DIR/pids that
    # now belongs to another process is left alone.
    bystander = subprocess.Popen(["sleep", "60"],
                                 preexec_fn=nstest._die_with_parent)
    net.procs.append(bystander)
    with open(os.path.join(tn, "pids"), "a") as f:
        f.write(f"{bystander.pid} {datadirs[0]}\n")

    t0 = time.monotonic()
    r = script("stop.sh", "-d", tn, timeout=60)
    log(f"stop.sh took {time.monotonic() - t0:.1f}s")
    check(r.returncode == 0, f"stop.sh exited {r.returncode}: {r.stderr}")
    for pid, dd in pids:
        check(not nstest.pid_alive(pid), f"pid {pid} ({dd}) survived stop.sh")
        check(not os.path.exists(os.path.join(dd, "control.sock")),
              f"{dd}/control.sock left behind: the node did not exit "
              f"cleanly on SIGTERM")
    check_eq(r.stdout.count("stopped (pid"), N, "nodes stop.sh reports as "
             f"stopped in:\n{r.stdout}")
    check(bystander.poll() is None,
          "stop.sh killed a process that was not its node")
    for i, d in enumerate(datadirs):
        log_text = open(os.path.join(d, "node.log")).read()
        check("event=stopped reason=signal" in log_text,
              f"node{i} did not log a clean stop")

    # Idempotent: nothing left to stop, still success.
    r = script("stop.sh", "-d", tn)
    check(r.returncode == 0, f"second stop.sh exited {r.returncode}")
    check("not running" in r.stdout and "stopped (pid" not in r.stdout,
          f"second stop.sh output: {r.stdout}")
    check(bystander.poll() is None, "second stop.sh killed the bystander")

    # A network that does not form: run.sh names the lagging node, fails,
    # and stops everything it started. A wrapper binary keeps node3 from
    # bootstrapping, so nobody ever hears of it.
    wrapper = os.path.join(net.dir, "isolate-node3")
    with open(wrapper, "w") as f:
        f.write(ISOLATE_WRAPPER.format(bin=nstest.BIN))
    os.chmod(wrapper, 0o755)
    tn2 = os.path.join(net.dir, "tn2")
    net.at_exit(lambda: os.path.exists(os.path.join(tn2, "pids")) and
                script("stop.sh", "-d", tn2, timeout=30))
    t0 = time.monotonic()
    r = script("run.sh", "-n", 4, "-d", tn2, "-i", HEARTBEAT_MS, "-t", 3,
               env={"NIGHTSHIFT_BIN": wrapper})
    log(f"run.sh on an isolated node failed in {time.monotonic() - t0:.1f}s")
    check(r.returncode == 1, f"run.sh exited {r.returncode} although node3 "
                             f"was isolated:\n{r.stdout}\n{r.stderr}")
    check(re.search(r"did not form.*node3 sees 0/3", r.stderr),
          f"run.sh's failure does not name node3: {r.stderr}")
    check(re.search(r"node0 sees 2/3", r.stderr),
          f"run.sh does not say what node0 sees: {r.stderr}")
    check("waiting for the network:" in r.stdout,
          f"no progress lines from run.sh: {r.stdout}")
    pids2 = read_pids(tn2)
    check_eq(len(pids2), 4, "nodes in tn2/pids")
    for pid, dd in pids2:
        check(not nstest.pid_alive(pid),
              f"run.sh failed but left {dd} (pid {pid}) running")

    # A non-empty DIR that is not a testnet is refused and left as it was.
    other = os.path.join(net.dir, "not-a-testnet")
    os.makedirs(other)
    open(os.path.join(other, "precious"), "w").close()
    r = script("run.sh", "-n", 2, "-d", other)
    check(r.returncode != 0 and os.path.exists(os.path.join(other,
                                                            "precious")),
          "run.sh used a non-empty directory that is not a testnet")


nstest.main(test, "testnet")
