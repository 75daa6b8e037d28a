#!/usr/bin/env python3
"""The market end to end, through testnet/scenario.sh and the submit CLI.

    test_market_scenarios.py                 bad inputs (below)
    test_market_scenarios.py honest|cheater|crash|mixed
                                             testnet/scenario.sh NAME --short
    test_market_scenarios.py all             all of the above, in turn

A scenario run checks (see testnet/scenario.sh --help) that settled outputs
equal a local `nightshift run`, that cheaters are slashed, that no honest
provider loses stake, conservation on every node and ledger convergence.

Bad inputs, on a 3-node honest testnet, each must fail with a clear error
and leave the requester's balance as it was:
  * a job descriptor that fails validation: exit 2, the reason on stderr,
    no JOB entry (no escrow ever locked);
  * a max price below every bid, with --no-wait: the error names the
    failing requirement with its count ("price <= 1: 0 of 3") at once, the
    escrow is refunded;
  * inputs larger than any provider's memory (--min-mem 10^15): the job
    waits for a provider up to its 4 s deadline, saying why none qualifies
    ("memory >= ...: 0 of 3"), then fails with that reason, refunded.
"""
import json
import os
import re
import struct
import subprocess
import sys
import time

import nstest
from nstest import check, check_eq, cli, log

SCENARIOS = ("honest", "cheater", "crash", "mixed")
SCENARIO_TIMEOUT = 240  # a --short scenario takes < 60 s on a 2-core box
N = 3


def script(name, *args, timeout=90):
    env = {**os.environ, "NIGHTSHIFT_BIN": nstest.BIN}
    return subprocess.run([os.path.join(nstest.REPO, "testnet", name),
                           *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env, stdin=subprocess.DEVNULL)


def stop_testnet(tn):
    """Stop what run.sh started in tn, whatever happened."""
    pids = os.path.join(tn, "pids")
    if not os.path.exists(pids):
        return
    script("stop.sh", "-d", tn, timeout=30)
    with open(pids) as f:
        for line in f:
            parts = line.split(None, 1)
            if len(parts) == 2 and nstest.pid_alive(int(parts[0])) and \
                    "node" in nstest.pid_cmdline(int(parts[0])):
                os.kill(int(parts[0]), 9)


# ---- scenarios ---------------------------------------------------------------

def run_scenario(net, name):
    base, port_lock = nstest.reserve_ports(8)
    net.at_exit(port_lock.close)
    work = os.path.join(net.dir, f"scenario-{name}")
    # Whatever happens (a timeout, ctest's SIGTERM), its testnet stops.
    net.at_exit(lambda: stop_testnet(os.path.join(work, name, "net")))
    log(f"testnet/scenario.sh {name} --short (ports from {base})")
    t0 = time.monotonic()
    env = {**os.environ, "NIGHTSHIFT_BIN": nstest.BIN}
    p = subprocess.Popen([os.path.join(nstest.REPO, "testnet", "scenario.sh"),
                          name, "--short", "-d", work, "-p", str(base),
                          "--keep"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env,
                         stdin=subprocess.DEVNULL)
    try:
        out, err = p.communicate(timeout=SCENARIO_TIMEOUT)
    except BaseException:
        # SIGTERM first: the script's trap stops its testnet and submits.
        p.terminate()
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        print(out, err, sep="\n", flush=True)
        raise
    took = time.monotonic() - t0
    print(out, end="", flush=True)
    if p.returncode != 0:
        print(err, end="", flush=True)
    check(p.returncode == 0, f"scenario {name} failed (exit {p.returncode}): "
          + next((l for l in err.splitlines() if "FAIL" in l),
                 err.strip()[-500:]))
    check(re.search(rf"^scenario {name}: PASS", out, re.M),
          f"scenario {name}: no PASS summary in its output")
    log(f"scenario {name} passed in {took:.1f}s")
    return took


# ---- bad inputs -----------------------------------------------------------------

def balance(datadir, ident):
    r = cli("balance", "--datadir", datadir, ident, "--json")
    check(r.returncode == 0, f"balance {ident[:10]} in {datadir}: exit "
                             f"{r.returncode}: {r.stderr.strip()}")
    d = json.loads(r.stdout)
    return d["free"], d["locked_escrow"]


def entries_by(datadir, ident):
    r = cli("ledger", "--datadir", datadir, "--author", ident, "--json",
            "--limit", "1000")
    check(r.returncode == 0, f"ledger --author in {datadir}: {r.stderr}")
    return [e["type"] for e in json.loads(r.stdout)["list"]]


def submit(tn, job, *flags, timeout=120):
    with open(os.path.join(tn, "bootstrap")) as f:
        boot = f.read().strip()
    return cli("submit", "--datadir", os.path.join(tn, "requester"),
               "--bootstrap", boot, *job, *flags, "--json", "--timeout-s",
               "90", timeout=timeout)


def test_bad_inputs(net):
    tn = os.path.join(net.dir, "tn")
    base, port_lock = nstest.reserve_ports(N)
    net.at_exit(port_lock.close)
    net.at_exit(lambda: stop_testnet(tn))
    r = script("run.sh", "-n", N, "-d", tn, "-p", base, "-i", 500, "-t", 60)
    check(r.returncode == 0, f"run.sh exited {r.returncode}:\n{r.stdout}\n"
                             f"{r.stderr}")
    node0 = os.path.join(tn, "node0")
    req = os.path.join(tn, "requester")
    req_id = nstest.cli_ok("id", "--datadir", req).splitlines()[0]

    def wait_ledgers():
        """node0's ledger and every node's agree (same digest)."""
        def same():
            ds = []
            for i in range(N):
                r = cli("status", "--datadir", os.path.join(tn, f"node{i}"),
                        "--json")
                if r.returncode != 0:
                    return (False, r.stderr.strip())
                ds.append(json.loads(r.stdout)["ledger"]["digest"])
            return (len(set(ds)) == 1, f"digests {[d[:8] for d in ds]}")
        nstest.wait_until(same, 30, "the nodes' ledgers to agree",
                          interval=0.3)

    wait_ledgers()
    free0, esc0 = balance(node0, req_id)
    check_eq(esc0, 0, "requester's escrow before any job")

    a = os.path.join(net.dir, "a.bin")
    b = os.path.join(net.dir, "b.bin")
    for p, seed in ((a, 1), (b, 2)):
        with open(p, "wb") as f:
            f.write(struct.pack("<65536f", *(((i * 7 + seed) % 13) / 13.0
                                             for i in range(65536))))
    out = os.path.join(net.dir, "c.bin")

    def sgemm(local="1,64"):
        return ["--builtin", "sgemm", "--global", "4,256", "--local", local,
                "--arg", f"in:{a}", "--arg", f"in:{b}",
                "--arg", f"out:262144:{out}", "--arg", "u32:256",
                "--arg", "u32:256", "--arg", "u32:256"]

    # 1. A descriptor that fails validation: exit 2, clear error, nothing
    #    posted, nothing locked.
    for what, job, needle in (
            ("local size not dividing the global size", sgemm("1,63"),
             "does not divide"),
            ("an output of 0 bytes", [x if x != f"out:262144:{out}"
                                      else f"out:0:{out}" for x in sgemm()],
             "out")):
        r = submit(tn, job, "--max-price", 100)
        log(f"invalid job ({what}): exit {r.returncode}: "
            f"{r.stderr.strip()}")
        check_eq(r.returncode, 2, f"submit of an invalid job ({what}): exit "
                                  f"status")
        lines = nstest.error_lines(r.stderr)
        check(len(lines) == 1 and lines[0].startswith("nightshift submit:"),
              f"invalid job ({what}): expected one error line naming "
              f"`nightshift submit`, got {r.stderr!r}")
        check(needle in lines[0], f"invalid job ({what}): the error does not "
                                  f"say why ({needle!r}): {lines[0]!r}")
        check(not os.path.exists(out), f"invalid job ({what}) wrote {out}")
    check_eq(entries_by(node0, req_id), [], "the requester's entries after "
                                             "invalid jobs")
    if os.path.isdir(os.path.join(req, "ledger")):
        check_eq(entries_by(req, req_id), [], "entries in the requester's "
                                              "own ledger after invalid jobs")
    check_eq(balance(node0, req_id), (free0, 0),
             "requester's (free, escrow) after invalid jobs")

    # 2. A max price below every bid: the work estimate makes every honest
    #    bid (default price 1000 microcredits per device-second) cost
    #    well over 1 credit on any device under 10 PFLOPS. --no-wait: the
    #    job fails at once instead of waiting for a provider.
    r = submit(tn, sgemm(), "--max-price", 1, "--work", 10**19, "--no-wait")
    log(f"max price 1: exit {r.returncode}")
    check(r.returncode != 0, "a job no provider can take at its price was "
                             "reported as success")
    doc = json.loads(r.stdout)
    log(f"  error: {doc.get('error')}")
    check_eq(doc["status"], "failed", "status of the unpriceable job")
    check(re.search(rf"price <= 1: 0 of {N}\b", doc.get("error", "")),
          f"the error does not name the failing requirement as "
          f"'price <= 1: 0 of {N}': {doc.get('error')!r}")
    check_eq(doc["slashed"], 0, "slashed on an honest network")
    check(not os.path.exists(out), "outputs written for a failed job")
    # Refunded: the requester's own ledger at once, every node soon.
    check_eq(balance(req, req_id), (free0, 0),
             "requester's (free, escrow) in its own ledger after the "
             "failed auction")
    wait_ledgers()
    check_eq(balance(node0, req_id), (free0, 0),
             "requester's (free, escrow) on node0 after the failed auction")
    types = entries_by(node0, req_id)
    check("job" in types and "cancel" in types,
          f"expected the job's escrow locked and released (JOB, CANCEL), "
          f"got {types}")

    # 3. More memory than any provider has. Without --no-wait the job
    #    waits for a provider that has it, saying why none can, and fails
    #    at its deadline.
    t0 = time.monotonic()
    r = submit(tn, sgemm(), "--max-price", 100, "--min-mem",
               10**15, "--deadline-s", 4)
    log(f"min-mem 10^15: exit {r.returncode} after "
        f"{time.monotonic() - t0:.1f}s")
    check(time.monotonic() - t0 >= 3.5,
          "the job should wait for a provider up to its deadline")
    check(r.returncode != 0, "a job no provider has the memory for was "
                             "reported as success")
    doc = json.loads(r.stdout)
    log(f"  error: {doc.get('error')}")
    check_eq(doc["status"], "failed", "status of the job too big for all")
    check(re.search(rf"memory >= [^:;]+: 0 of {N}\b", doc.get("error", "")),
          f"the error does not name the failing requirement as "
          f"'memory >= ...: 0 of {N}': {doc.get('error')!r}")
    check_eq(balance(req, req_id), (free0, 0),
             "requester's (free, escrow) in its own ledger after the "
             "memory failure")
    wait_ledgers()
    check_eq(balance(node0, req_id), (free0, 0),
             "requester's (free, escrow) on node0 after the memory failure")

    # Conservation everywhere, and the network still serves a good job.
    r = submit(tn, sgemm(), "--max-price", 100)
    check(r.returncode == 0 and json.loads(r.stdout)["status"] == "settled",
          f"a valid job after the bad ones did not settle: {r.stdout} "
          f"{r.stderr}")
    for dd in [os.path.join(tn, f"node{i}") for i in range(N)] + [req]:
        r = cli("ledger", "--datadir", dd, "--json", "--limit", "0")
        check(r.returncode == 0 and json.loads(r.stdout)["conserved"],
              f"conservation fails in {dd}: {r.stdout[:300]} {r.stderr}")


def test(net, which):
    if which in ("bad_inputs", "all"):
        test_bad_inputs(net)
    for name in SCENARIOS:
        if which in (name, "all"):
            run_scenario(net, name)


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "bad_inputs"
    if which not in (*SCENARIOS, "bad_inputs", "all"):
        print(f"usage: {sys.argv[0]} [bad_inputs|{'|'.join(SCENARIOS)}|all]",
              file=sys.stderr)
        sys.exit(2)
    nstest.main(lambda net: test(net, which), f"market_{which}")
