"""A light-peer submit killed mid-job, then `submit --resume JOB_ID`, on a
3-node testnet:

  1. killed right after its escrow is locked (the JOB entry stored, no
     award yet): the resumed submit reads the job's terms and its own JOB
     entry back from the ledger, runs a new auction and settles;
  2. killed right after the award: it waits for the result and settles;
  3. a job for a region no provider is in, killed after its escrow and
     resumed without --region: it still asks for that region (the terms
     saved with the job), and its receipt line says its real ceiling.

Each time the output equals `nightshift run`'s, and the job has one JOB
entry.
"""
import os
import random
import re
import signal
import struct
import subprocess

import nstest
from nstest import check, check_eq, cli, log


def test(net):
    tn, boot = nstest.testnet(net, 3)
    req = os.path.join(tn, "requester")
    n = 4096
    for name, seed in (("a", 1), ("b", 2)):
        rng = random.Random(seed)
        with open(os.path.join(net.dir, f"{name}.bin"), "wb") as f:
            f.write(struct.pack(f"<{n}f",
                                *(rng.uniform(-1, 1) for _ in range(n))))

    def job(out):
        return ["--builtin", "vector_add", "--global", str(n),
                "--arg", f"in:{net.dir}/a.bin", "--arg", f"in:{net.dir}/b.bin",
                "--arg", f"out:{4 * n}:{out}", "--arg", f"u32:{n}"]

    ref = os.path.join(net.dir, "ref.bin")
    nstest.cli_ok("run", *job(ref))
    for case, cut, window in (("after the escrow", "escrow of", 3000),
                              ("after the award", "awarded to", 300)):
        out = os.path.join(net.dir, f"out-{window}.bin")
        p = subprocess.Popen([nstest.BIN, "submit", "--datadir", req,
                              "--bootstrap", boot, *job(out), "--max-price",
                              "10", "--bid-window-ms", str(window)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL, text=True)
        short = None
        for line in p.stderr:
            m = re.search(r"job ([0-9a-f]{16})", line)
            short = short or (m and m.group(1))
            if cut in line:
                p.send_signal(signal.SIGKILL)
                break
        p.wait(timeout=30)
        check(short is not None, f"{case}: no job id in submit's progress")
        full = [d for d in os.listdir(os.path.join(req, "jobs"))
                if d.startswith(short or "-")]
        check_eq(len(full), 1, f"{case}: the job's directory in the datadir")
        r = cli("submit", "--datadir", req, "--bootstrap", boot, "--resume",
                full[0], "--json", timeout=120)
        log(f"{case}: resumed, exit {r.returncode}: "
            f"{nstest.error_lines(r.stderr)}")
        check_eq(r.returncode, 0, f"{case}: exit status of --resume "
                 f"({r.stderr.strip()[-600:]})")
        if r.returncode == 0:
            with open(out, "rb") as f, open(ref, "rb") as g:
                check(f.read() == g.read(), f"{case}: output differs from run's")

    # 3. the job's terms come back with it (FIRST-USE M5): a job for a
    # region no provider is in, killed once posted and resumed without
    # --region, still asks for that region, and says its real ceiling
    out = os.path.join(net.dir, "out-region.bin")
    p = subprocess.Popen([nstest.BIN, "submit", "--datadir", req,
                          "--bootstrap", boot, *job(out), "--max-price", "7",
                          "--region", "mars-1", "--bid-window-ms", "200"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True)
    short = None
    for line in p.stderr:
        m = re.search(r"job ([0-9a-f]{16})", line)
        short = short or (m and m.group(1))
        if "escrow of" in line:
            p.send_signal(signal.SIGKILL)
            break
    p.wait(timeout=30)
    check(short is not None, "region: no job id in submit's progress")
    full = [d for d in os.listdir(os.path.join(req, "jobs"))
            if d.startswith(short or "-")]
    r = cli("submit", "--datadir", req, "--bootstrap", boot, "--resume",
            full[0], "--no-wait", "--timeout-s", "20", timeout=60)
    log(f"region: resumed, exit {r.returncode}: "
        f"{nstest.error_lines(r.stderr)[-2:]}")
    check(r.returncode != 0, "a job for region mars-1 ran after --resume: "
          "its requirements were lost")
    check("mars-1" in r.stderr, f"the resumed job forgot its region: "
          f"{r.stderr[-600:]}")
    check("max price 0 credits" not in r.stderr and "max price 7" in r.stderr,
          f"the resumed job's ceiling: {r.stderr[-600:]}")


nstest.main(test, "submit_resume")
