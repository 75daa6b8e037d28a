"""A provider whose blob store (the inputs it keeps by hash, where inputs
are received as they arrive) is full or read-only: it says so, takes the
input in memory instead, and the job settles; the node keeps running.

Provider p keeps <datadir>/blobs on a 4 MiB tmpfs (mounted here: root
only; skipped with the reason elsewhere); the job's input is 6 MiB:

  1. full: the room for the input cannot be reserved (No space left on
     device): p logs event=input_spool_failed with the cause and the job
     settles with the right output;
  2. read-only (the tmpfs remounted ro): the same, with its cause;
  3. p still answers status, and no part file was left on the store.

The requester's side: a light peer copies its inputs into its own blob
store before anything is posted (its blobs on a 4 MiB tmpfs of its own):

  4. full: submit fails with one line naming the input file and the
     cause (No space left on device), no escrow, nothing left on the
     store;
  5. read-only: the same, with its cause (Read-only file system).
"""
import json
import os
import subprocess

import nstest
from nstest import check, check_eq, log

SIZE = 6 << 20
STRIDE = 4096

KERNEL = """
kernel void pick(global const uchar *x, global uchar *out, uint stride)
{
    size_t i = get_global_id(0);
    out[i] = x[i * stride];
}
"""


def test(net):
    if os.geteuid() != 0:
        raise nstest.Skip("needs root to mount a small tmpfs")
    p = net.node("p").init()
    req = net.node("req").init()
    g = net.genesis([p, req])
    for n in (p, req):
        nstest.cli_ok("init", "--datadir", n.datadir, "--genesis", g)
    blobs = os.path.join(p.datadir, "blobs")
    os.makedirs(blobs, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs",
                        blobs], capture_output=True, text=True)
    if r.returncode != 0:
        raise nstest.Skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    net.at_exit(lambda: subprocess.run(["umount", "-l", blobs]))
    p.start(extra=("--set", "node.stake=100000"))
    src = os.path.join(net.dir, "pick.cl")
    with open(src, "w") as f:
        f.write(KERNEL)
    n_out = SIZE // STRIDE

    def submit(x, tag, *more):
        out = os.path.join(net.dir, f"out-{tag}.bin")
        return out, nstest.cli(
            "submit", "--datadir", req.datadir, "--bootstrap", p.addr,
            "--kernel", src, "--entry", "pick", "--global", str(n_out),
            "--arg", f"in:{x}", "--arg", f"out:{n_out}:{out}", "--arg",
            f"u32:{STRIDE}", "--max-price", "10", *more, timeout=120)

    def job(tag, cause):
        data = os.urandom(SIZE)
        x = os.path.join(net.dir, f"x-{tag}.bin")
        with open(x, "wb") as f:
            f.write(data)
        out, r = submit(x, tag, "--json")
        check(r.returncode == 0, f"{tag}: submit failed: "
              f"{r.stderr.strip()[-600:]} {r.stdout.strip()[-600:]}")
        check_eq(json.loads(r.stdout)["status"], "settled", f"{tag}: status")
        with open(out, "rb") as f:
            check(f.read() == data[::STRIDE][:n_out],
                  f"{tag}: the output is not the input's picks")
        lines = [ln for ln in p.log_text().splitlines()
                 if "event=input_spool_failed" in ln and cause in ln]
        check(lines, f"{tag}: p's log does not say {cause!r}: "
              f"{p.log_tail(8)}")
        log(f"{tag}: settled; p said: {lines[-1].split('level=')[1]}")

    def read_only(path):
        r = subprocess.run(["mount", "-o", "remount,ro", path],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"remount ro: {r.stderr.strip()}")

    # 1. full
    job("full", "No space left on device")
    # 2. read-only
    read_only(blobs)
    job("read-only", "Read-only file system")
    # 3. the node is fine, nothing half-written left behind
    check(p.running(), "p stopped")
    p.status()
    check_eq([f for f in os.listdir(blobs) if f.endswith(".part")], [],
             "part files on the store")

    # 4, 5. the requester's own store cannot take its input
    mine = os.path.join(req.datadir, "blobs")
    os.makedirs(mine, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs",
                        mine], capture_output=True, text=True)
    check(r.returncode == 0, f"mount: {r.stderr.strip()}")
    net.at_exit(lambda: subprocess.run(["umount", "-l", mine]))
    x = os.path.join(net.dir, "x-requester.bin")
    with open(x, "wb") as f:
        f.write(os.urandom(SIZE))

    def refused(tag, cause):
        _, r = submit(x, tag)
        err = r.stderr.strip()
        check(r.returncode == 1, f"{tag}: submit did not fail ({r.returncode})"
              f": {err[-400:]}")
        check("escrow of" not in err, f"{tag}: credits moved: {err[-400:]}")
        last = err.splitlines()[-1] if err else ""
        check(x in last and cause in last,
              f"{tag}: the error does not name the file and {cause!r}: {last}")
        check_eq(os.listdir(mine), [], f"{tag}: files left on the store")
        log(f"requester, {tag}: {last}")

    refused("requester-full", "No space left on device")
    read_only(mine)
    refused("requester-read-only", "Read-only file system")


nstest.main(test, "blob_store_faults")
