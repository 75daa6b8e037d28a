"""Submitting through a running node, failures reported at once, and
cancelling a job, on a 3-node testnet.

  * `submit --node node0`: the node posts the job with its own key, runs
    the auction and the checks, streams progress back and writes the
    outputs; the output equals `nightshift run`'s.
  * A kernel that does not build, through --node and through the light
    peer: a one-line error naming the file, exit 1, and no JOB entry (the
    pre-flight catches it before any credit moves).
  * `nightshift cancel`: a job left open by a killed submit is cancelled
    through a light peer; the escrow comes back. A job a `submit --node`
    waits on, cancelled mid-auction: the client ends at once, saying so.
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

N = 3


def script(name, *args, timeout=90):
    env = {**os.environ, "NIGHTSHIFT_BIN": nstest.BIN}
    return subprocess.run([os.path.join(nstest.REPO, "testnet", name),
                           *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env, stdin=subprocess.DEVNULL)


def balance(datadir, ident):
    r = cli("balance", "--datadir", datadir, ident, "--json")
    check(r.returncode == 0, f"balance {ident[:10]}: {r.stderr.strip()}")
    d = json.loads(r.stdout)
    return d["free"], d["locked_escrow"]


def job_entries(datadir, ident):
    if not os.path.isdir(os.path.join(datadir, "ledger")):
        return []  # never joined: nothing posted
    r = cli("ledger", "--datadir", datadir, "--author", ident, "--json",
            "--limit", "1000")
    check(r.returncode == 0, f"ledger --author: {r.stderr}")
    return [e for e in json.loads(r.stdout)["list"] if e["type"] == "job"]


def test(net):
    tn = os.path.join(net.dir, "tn")
    base, port_lock = nstest.reserve_ports(N)
    net.at_exit(port_lock.close)
    net.at_exit(lambda: script("stop.sh", "-d", tn, timeout=30))
    r = script("run.sh", "-n", N, "-d", tn, "-p", base, "-i", 500, "-t", 60)
    check(r.returncode == 0, f"run.sh: {r.stdout}\n{r.stderr}")
    node0 = os.path.join(tn, "node0")
    req = os.path.join(tn, "requester")
    with open(os.path.join(tn, "bootstrap")) as f:
        boot = f.read().strip()
    node0_id = nstest.cli_ok("id", "--datadir", node0).splitlines()[0]
    req_id = nstest.cli_ok("id", "--datadir", req).splitlines()[0]

    n = 4096
    a = [random.uniform(-1, 1) for _ in range(n)]
    b = [random.uniform(-1, 1) for _ in range(n)]
    pa, pb = os.path.join(net.dir, "a.bin"), os.path.join(net.dir, "b.bin")
    with open(pa, "wb") as f:
        f.write(struct.pack(f"{n}f", *a))
    with open(pb, "wb") as f:
        f.write(struct.pack(f"{n}f", *b))

    def vadd(out):
        return ["--builtin", "vector_add", "--global", str(n), "--arg",
                f"in:{pa}", "--arg", f"in:{pb}", "--arg",
                f"out:{4 * n}:{out}", "--arg", f"u32:{n}"]

    local = os.path.join(net.dir, "local.bin")
    nstest.cli_ok("run", *vadd(local))

    # 1. through the running node
    out = os.path.join(net.dir, "via-node.bin")
    t0 = time.monotonic()
    r = cli("submit", "--node", node0, *vadd(out), "--max-price", 10,
            "--bid-window-ms", 50, timeout=120)
    took = time.monotonic() - t0
    log(f"submit --node: exit {r.returncode} in {took:.2f}s")
    check(r.returncode == 0, f"submit --node failed: {r.stderr[-800:]}")
    check("handed to the node" in r.stderr and "settled" in r.stderr,
          f"no progress streamed back: {r.stderr!r}")
    check("receipt" in r.stdout, f"no receipt: {r.stdout!r}")
    with open(out, "rb") as f, open(local, "rb") as g:
        check(f.read() == g.read(), "submit --node output differs from run")
    check_eq(len(job_entries(node0, node0_id)), 1,
             "JOB entries by node0 after one submit --node")
    check("inputs copied into the node's blob store" in r.stderr,
          f"the inputs were not copied into the node's store: {r.stderr!r}")
    # again with the same inputs: the node uses its stored copies (checked
    # against their hashes), no copy of the files
    os.unlink(out)
    r = cli("submit", "--node", node0, *vadd(out), "--max-price", 10,
            "--bid-window-ms", 50, timeout=120)
    check(r.returncode == 0, f"the second submit --node failed: "
          f"{r.stderr[-800:]}")
    check("already in the node's blob store" in r.stderr and
          "inputs copied" not in r.stderr,
          f"the node copied inputs it holds: {r.stderr!r}")
    with open(out, "rb") as f, open(local, "rb") as g:
        check(f.read() == g.read(), "the second output differs from run")
    n_node0_jobs = 3  # with the job file's below

    # 1b. the same job as a job file (docs/JOBS.md), through the node
    jobfile = os.path.join(net.dir, "vadd.json")
    with open(jobfile, "w") as f:
        json.dump({"builtin": "vector_add",
                   "buffers": {"a": {"file": "a.bin"},
                               "b": {"file": "b.bin"},
                               "c": {"bytes": 4 * n, "out": "via-job.bin"}},
                   "steps": [{"global": [n],
                              "args": ["a", "b", "c", {"u32": n}]}]}, f)
    r = cli("submit", "--node", node0, "--job", jobfile, "--max-price", 10,
            "--bid-window-ms", 50, timeout=120)
    check(r.returncode == 0, f"submit --job failed: {r.stderr[-800:]}")
    with open(os.path.join(net.dir, "via-job.bin"), "rb") as f, \
            open(local, "rb") as g:
        check(f.read() == g.read(), "submit --job output differs from run")

    # 1c. a job without inputs (it has nothing to copy into the store)
    pi_local = os.path.join(net.dir, "pi-local.bin")
    pi_out = os.path.join(net.dir, "pi-node.bin")
    pi = ["--builtin", "montecarlo_pi", "--global", "256", "--arg",
          "out:1024:{}", "--arg", "u64:7", "--arg", "u32:64"]
    nstest.cli_ok("run", *[x.format(pi_local) for x in pi])
    r = cli("submit", "--node", node0, *[x.format(pi_out) for x in pi],
            "--max-price", 10, "--bid-window-ms", 50, timeout=60)
    check(r.returncode == 0,
          f"submit --node of a job without inputs: {r.stderr[-800:]}")
    with open(pi_out, "rb") as f, open(pi_local, "rb") as g:
        check(f.read() == g.read(), "no-input job's output differs from run")
    n_node0_jobs += 1

    # 2. a kernel that does not build: caught before any credit moves
    bad = os.path.join(net.dir, "bad.cl")
    with open(bad, "w") as f:
        f.write("kernel void k(global float *o)\n{\n  o[0] = 1.0f +;\n}\n")
    bad_job = ["--kernel", bad, "--entry", "k", "--global", "4", "--arg",
               f"out:16:{os.path.join(net.dir, 'bad.bin')}"]
    for how in (["--node", node0], ["--datadir", req, "--bootstrap", boot]):
        t0 = time.monotonic()
        r = cli("submit", *how, *bad_job, "--max-price", 5, timeout=60)
        took = time.monotonic() - t0
        # progress lines ("[ 0.03s] pre-flight: ..."), then one error
        lines = [l for l in nstest.error_lines(r.stderr)
                 if not l.startswith("[")]
        log(f"broken kernel via {how[0]}: exit {r.returncode} in {took:.2f}s:"
            f" {lines}")
        check_eq(r.returncode, 1, f"exit status of a broken kernel ({how[0]})")
        check(len(lines) == 1 and "bad.cl" in lines[0] and
              "does not build" in lines[0] and ":3:" in lines[0],
              f"the error should name bad.cl and its line: {lines}")
        check(took < 10, f"the broken kernel took {took:.1f}s to report")
    check_eq(len(job_entries(node0, node0_id)), n_node0_jobs,
             "JOB entries by node0 after the broken kernel")
    check_eq(len(job_entries(req, req_id)), 0,
             "JOB entries by the requester after the broken kernel")

    # 3. cancel: a submit killed after it locked the escrow
    free0, _ = balance(node0, req_id)
    p = subprocess.Popen([nstest.BIN, "submit", "--datadir", req,
                          "--bootstrap", boot, *vadd(out), "--max-price", "7",
                          "--work", str(10 ** 19), "--bid-window-ms", "60000"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, stdin=subprocess.DEVNULL)
    job = None
    t_end = time.monotonic() + 30
    lines = []
    while time.monotonic() < t_end and job is None:
        line = p.stderr.readline()
        lines.append(line)
        if "auction round 1: job" in line:
            job = line.split("job ")[1].split()[0]
    check(job is not None, f"submit never announced: {lines}")
    p.send_signal(signal.SIGKILL)
    p.wait()
    check_eq(len(job_entries(req, req_id)), 1,
             "JOB entries of the killed submit")
    saved = os.listdir(os.path.join(req, "jobs"))
    job_id = next((j for j in saved if j.startswith(job)), None)
    check(job_id is not None, f"no saved job {job} in {saved}")
    # a unique prefix names the job (the progress lines show 16 digits)
    r = cli("cancel", job, "--datadir", req, "--bootstrap", boot,
            "--json", timeout=60)
    log(f"cancel: exit {r.returncode}: {r.stdout.strip()} "
        f"{r.stderr.strip()}")
    check(r.returncode == 0, f"cancel failed: {r.stderr}")
    check("refunded" in json.loads(r.stdout)["outcome"], r.stdout)
    nstest.wait_until(lambda: balance(node0, req_id) == (free0, 0), 30,
                      "the refund to reach node0", interval=0.3)
    r = cli("cancel", job_id, "--datadir", req, "--bootstrap", boot)
    check(r.returncode == 1 and "already cancelled" in r.stderr,
          f"a second cancel: {r.returncode} {r.stderr!r}")

    # 4. cancel a job a `submit --node` waits on, mid-auction (a bid window
    #    of a minute): the client ends within seconds, saying so
    p = subprocess.Popen([nstest.BIN, "submit", "--node", node0,
                          *vadd(os.path.join(net.dir, "never.bin")),
                          "--max-price", "7", "--work", str(10 ** 19),
                          "--bid-window-ms", "60000"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, stdin=subprocess.DEVNULL)
    net.at_exit(lambda: p.poll() is None and p.kill())
    job, lines = None, []
    t_end = time.monotonic() + 30
    while time.monotonic() < t_end and job is None:
        line = p.stderr.readline()
        lines.append(line)
        if "auction round 1: job" in line:
            job = line.split("job ")[1].split()[0]
    check(job is not None, f"submit --node never announced: {lines}")
    r = cli("cancel", job, "--datadir", node0, "--json", timeout=60)
    check(r.returncode == 0, f"cancel through node0 failed: {r.stderr}")
    t0 = time.monotonic()
    try:
        _, err = p.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        p.kill()
        raise nstest.TestFailure("submit --node still waits 15 s after its "
                                 "job was cancelled")
    log(f"cancelled mid-auction: client exit {p.returncode} after "
        f"{time.monotonic() - t0:.1f}s")
    check(p.returncode != 0 and "cancelled" in err,
          f"the client should fail saying the job was cancelled: "
          f"{p.returncode} {err[-400:]!r}")


nstest.main(test, "submit_node")
