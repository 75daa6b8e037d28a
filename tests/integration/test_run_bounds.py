"""A provider's run is bounded by the job, on a 2-node testnet.

  * A kernel that never ends, with a short deadline: each provider's
    worker is killed when what was left of the deadline runs out (not
    after the sandbox's 10-minute limit), the requester hears "timeout"
    from each and says that no provider is left to try, and both slots
    are free again at once: the next honest job settles.
  * The same kernel with a long deadline, cancelled while it runs: the
    provider sees the CANCEL in its ledger, kills the run and frees the
    slot within a tick, and the next honest job settles.

Both fail on a provider whose worker limit is a constant 10 minutes and
that ignores a CANCEL while it runs.
"""
import json
import os
import random
import signal
import struct
import subprocess
import time

import nstest
from nstest import check, check_eq, cli, log

N = 2

SPIN = """
/* Work-item 1 never ends while `forever` is non-zero (the pre-flight
 * samples units 0, n/3, 2n/3 and n-1, so it does not see it). */
kernel void spin(global volatile uint *out, uint forever)
{
    uint i = get_global_id(0);
    out[i] = i;
    if (i == 1)
        while (forever)
            out[i] = out[i] + 1u;
}
"""


def script(name, *args, timeout=90):
    env = {**os.environ, "NIGHTSHIFT_BIN": nstest.BIN}
    return subprocess.run([os.path.join(nstest.REPO, "testnet", name),
                           *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env, stdin=subprocess.DEVNULL)


def provider(datadir):
    r = cli("status", "--datadir", datadir, "--json")
    check(r.returncode == 0, f"status {datadir}: {r.stderr}")
    return json.loads(r.stdout)["provider"]


def test(net):
    tn = os.path.join(net.dir, "tn")
    base, port_lock = nstest.reserve_ports(N)
    net.at_exit(port_lock.close)
    net.at_exit(lambda: script("stop.sh", "-d", tn, timeout=30))
    r = script("run.sh", "-n", N, "-d", tn, "-p", base, "-i", 500, "-t", 60,
               "-r", 2)
    check(r.returncode == 0, f"run.sh: {r.stdout}\n{r.stderr}")
    nodes = [os.path.join(tn, f"node{i}") for i in range(N)]
    reqs = [os.path.join(tn, "requester"), os.path.join(tn, "requester1")]
    with open(os.path.join(tn, "bootstrap")) as f:
        boot = f.read().strip()

    spin = os.path.join(net.dir, "spin.cl")
    with open(spin, "w") as f:
        f.write(SPIN)
    spin_job = ["--kernel", spin, "--entry", "spin", "--global", "64",
                "--arg", f"out:256:{os.path.join(net.dir, 'spin.bin')}",
                "--arg", "u32:1", "--max-price", "10"]

    n = 1024
    pa = os.path.join(net.dir, "a.bin")
    with open(pa, "wb") as f:
        f.write(struct.pack(f"{n}f", *[random.uniform(-1, 1)
                                       for _ in range(n)]))

    def honest(req, what):
        out = os.path.join(net.dir, "sum.bin")
        t0 = time.monotonic()
        r = cli("submit", "--datadir", req, "--bootstrap", boot, "--builtin",
                "vector_add", "--global", n, "--arg", f"in:{pa}", "--arg",
                f"in:{pa}", "--arg", f"out:{4 * n}:{out}", "--arg", f"u32:{n}",
                "--max-price", 10, "--timeout-s", 30, timeout=60)
        log(f"honest job {what}: exit {r.returncode} in "
            f"{time.monotonic() - t0:.2f}s")
        check(r.returncode == 0, f"the honest job {what} failed: "
              f"{r.stderr[-800:]}")

    # 1. a deadline of 4 s bounds each provider's run
    t0 = time.monotonic()
    r = cli("submit", "--datadir", reqs[0], "--bootstrap", boot, *spin_job,
            "--deadline-s", 4, "--timeout-s", 20, timeout=60)
    took = time.monotonic() - t0
    err = nstest.error_lines(r.stderr)
    log(f"endless kernel, 4 s deadline: exit {r.returncode} in {took:.1f}s: "
        f"{err}")
    check_eq(r.returncode, 1, "exit status of the endless kernel")
    check("timeout" in r.stderr and "ms limit" in r.stderr,
          f"the providers' timeouts should reach the requester: {r.stderr}")
    check(any("no provider left to try" in x for x in err),
          f"the error should say no provider is left: {err}")
    nstest.wait_until(lambda: all(provider(d)["busy"] == 0 for d in nodes),
                      5, "both providers' slots to be free")
    honest(reqs[1], "after the endless kernel")

    # 2. a CANCEL stops the run at once
    p = subprocess.Popen([nstest.BIN, "submit", "--datadir", reqs[1],
                          "--bootstrap", boot, *spin_job, "--deadline-s",
                          "300", "--timeout-s", "300"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, stdin=subprocess.DEVNULL)
    net.at_exit(lambda: p.kill())
    job, accepted, lines = None, False, []
    t_end = time.monotonic() + 30
    while time.monotonic() < t_end and not accepted:
        line = p.stderr.readline()
        lines.append(line)
        if "auction round 1: job" in line:
            job = line.split("job ")[1].split()[0]
        accepted = "accepted: collateral" in line
    check(job is not None and accepted, f"the job never ran: {lines}")
    running = []
    nstest.wait_until(lambda: running.extend(
        d for d in nodes if provider(d)["busy"] > 0) or running, 10,
        "a provider to run the endless kernel")
    runner = running[0]
    time.sleep(0.5)  # well into the run
    p.send_signal(signal.SIGKILL)
    p.wait()
    t0 = time.monotonic()
    r = cli("cancel", job, "--datadir", reqs[1], "--bootstrap", boot,
            "--json", timeout=60)
    check(r.returncode == 0, f"cancel failed: {r.stderr}")
    nstest.wait_until(lambda: provider(runner)["busy"] == 0, 5,
                      "the cancelled run to free its slot")
    log(f"cancelled run stopped {time.monotonic() - t0:.2f}s after cancel")
    check_eq(provider(runner)["stopped"], 1, "runs stopped by the provider")
    with open(os.path.join(runner, "node.log")) as f:
        check("event=run_stopped" in f.read(), "no run_stopped in the log")
    honest(reqs[0], "after the cancelled one")


nstest.main(test, "run_bounds")
