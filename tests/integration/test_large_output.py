"""Streaming outputs: a requester receives a large output into a file as
the chunks arrive, computes the commitment's leaves on the way, checks
the job from that file and renames it into place once settled; the
output is never whole in its memory.

One provider p and a job whose output (OUT_MIB MiB) is far larger than
its input (4 KiB): each work-item writes a word derived from the input.

  1. `nightshift run` of the job: the reference bytes;
  2. `submit` as a light peer: the job settles, the output file is
     byte-identical to run's, no .part file is left beside it, and the
     submit process's peak RSS once the pre-flight is done (VmHWM reset
     at the later of the escrow and the pre-flight's verdict, read at exit
     by wait4) stays far below the output's size (the old requester held
     the output twice: its receive buffer and the spot check's copy);
  3. `submit --node n` (n: a node running beside p): the same job through
     n's requester; identical output, and n's VmHWM from then on stays
     far below the output's size;
  4. a destination in a missing directory: the light peer fails before
     the escrow, naming the file.

The pre-flight (exec/preflight.c: timed before the escrow, its checks
until "pre-flight checks passed", which may come after the escrow) still
takes two full-size output sets and two bitmaps: it is left out of the
peaks.
"""
import json
import os
import subprocess
import threading
import time

import nstest
from nstest import check, check_eq, log

OUT_MIB = 256
# Through the node: smaller, as a 256 MiB one once kept the node's loop
# (its pre-flight ran there) from answering the submitter's polls within
# their 5 s. An unoptimised (sanitizer) build
# takes that long at 16 MiB: 4 MiB there, and n's memory is only logged
# (the light peer's is checked in every build).
DEBUG = os.environ.get("NS_BUILD_TYPE") == "Debug"
NODE_OUT_MIB = 4 if DEBUG else 64
# The old requester's RSS grew by twice the output from the escrow on
# (its receive buffer and the spot check's copy); a streaming one by a few
# MiB of it (the compare's window, the pages the re-run writes) and what
# the spot check's kernel build and launches take: about 10 MiB here for
# either size. The bound is half the smaller output.
MAX_GROWTH_MIB = 32

KERNEL = """
kernel void spread(global const uint *seed, global uint *out)
{
    uint i = (uint)get_global_id(0);
    out[i] = seed[i & 1023u] * 2654435761u + i;
}
"""


def reset_peak(pid):
    """Start pid's VmHWM afresh from its RSS now (proc(5), clear_refs 5)."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


def submit(args, on_line=None):
    """Run `nightshift submit ARGS` to its end, handing each progress line
    to on_line(proc, line) as it comes; (returncode, stdout, stderr, peak
    RSS bytes of the submit process itself: its VmHWM, read every 5 ms to
    its end. wait4's ru_maxrss would count its sandboxed worker too, whose
    pre-flight samples units on output-sized buffers of its own.)"""
    # In a sanitizer build, freed chunks wait in ASan's quarantine (256 MiB
    # by default): each 128 KiB chunk that went through would count. No
    # quarantine for the light peer, so its peak is what the code holds
    # (ignored by a build without ASan).
    asan = os.environ.get("ASAN_OPTIONS", "")
    env = {**os.environ, "ASAN_OPTIONS": ((asan + ":") if asan else "") +
           "quarantine_size_mb=0:thread_local_quarantine_size_kb=0"}
    p = subprocess.Popen([nstest.BIN, "submit", *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         text=True, env=env)
    err, hwm, on = [], [0], [True]

    def sample():
        while on[0]:
            try:
                # a zombie shows no VmHWM: keep the last one seen
                hwm[0] = max(hwm[0], nstest.proc_kib(p.pid, "VmHWM") << 10)
            except (OSError, ValueError):
                return
            time.sleep(0.005)
    t = threading.Thread(target=sample, daemon=True)
    t.start()
    for line in p.stderr:
        err.append(line)
        if on_line:
            on_line(p, line)
    on[0] = False
    t.join()
    _, status, ru = os.wait4(p.pid, 0)
    out = p.stdout.read()
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, out, "".join(err), hwm[0]


def test(net):
    p, n, req = net.named_nodes("p", "n", "req")
    p.start(extra=("--set", "node.stake=100000"))
    n.start(bootstrap=[p])

    seed = os.path.join(net.dir, "seed.bin")
    with open(seed, "wb") as f:
        f.write(os.urandom(4096))
    src = os.path.join(net.dir, "spread.cl")
    with open(src, "w") as f:
        f.write(KERNEL)

    def job(out, mib=OUT_MIB):
        return ["--kernel", src, "--entry", "spread", "--global",
                str((mib << 20) // 4), "--arg", f"in:{seed}", "--arg",
                f"out:{mib << 20}:{out}"]

    # 1. the references
    want = {}
    for mib in (OUT_MIB, NODE_OUT_MIB):
        ref = os.path.join(net.dir, "run.bin")
        r = nstest.cli("run", *job(ref, mib), "--timeout-ms", "300000",
                       timeout=300)
        check(r.returncode == 0, f"run: {r.stderr.strip()[-500:]}")
        want[mib] = nstest.file_digest(ref)
        os.unlink(ref)  # leave the page cache and disk to the others

    # 2. the light peer. Its pre-flight samples units on full-size output
    # buffers (exec/preflight.c, two sets and two bitmaps), in its
    # sandboxed worker since issue 24 (not counted: submit's own VmHWM),
    # its checks on while the auction goes on: the peak is taken from the
    # later of the escrow and their verdict, which covers the check and
    # the rename (and the fetch, or what is left of it).
    base = {}

    def after_preflight(pid):
        def on_line(proc, line):
            if "escrow of" in line or "pre-flight checks passed" in line:
                reset_peak(pid or proc.pid)
                base[pid] = nstest.proc_kib(pid or proc.pid, "VmHWM") << 10
        return on_line

    light = os.path.join(net.dir, "light.bin")
    rc, out, err, rss = submit(
        ["--datadir", req.datadir, "--bootstrap", p.addr, *job(light),
         "--max-price", "1000", "--no-wait", "--deadline-s", "240", "--timeout-s", "280"],
        after_preflight(None))
    check(rc == 0, f"submit failed ({rc}): {err.strip()[-800:]}")
    check("escrow of" in err, f"no escrow line: {err[-400:]}")
    check("pre-flight checks passed" in err, f"no verdict line: {err[-400:]}")
    check_eq(nstest.file_digest(light), want[OUT_MIB], "the light peer's output vs run's")
    left = [f for f in os.listdir(net.dir) if f.endswith(".part")]
    check(not left, f"part files left beside the output: {left}")
    grew = rss - base[None]
    log(f"light peer: {OUT_MIB} MiB output identical to run's; submit RSS "
        f"{base[None] >> 20} MiB at the escrow, peak {rss >> 20} MiB after "
        f"(+{grew >> 20} MiB, bound +{MAX_GROWTH_MIB} MiB)")
    check(grew < MAX_GROWTH_MIB << 20,
          f"submit's RSS grew by {grew >> 20} MiB for a {OUT_MIB} MiB "
          f"output: the output was held in memory")
    os.unlink(light)

    # 3. through the node n: n's peak from its requester's escrow on
    via = os.path.join(net.dir, "node.bin")
    rc, out, err, _ = submit(
        ["--node", n.datadir, *job(via, NODE_OUT_MIB), "--max-price", "1000", "--no-wait",
         "--deadline-s", "240", "--timeout-s", "280"], after_preflight(n.pid))
    check(rc == 0, f"submit --node failed ({rc}): {err.strip()[-800:]}")
    check("escrow of" in err, f"no escrow line: {err[-400:]}")
    check_eq(nstest.file_digest(via), want[NODE_OUT_MIB], "submit --node's output vs run's")
    hwm = nstest.proc_kib(n.pid, "VmHWM") << 10
    grew = hwm - base[n.pid]
    log(f"submit --node: {NODE_OUT_MIB} MiB output identical to run's; n's "
        f"RSS {base[n.pid] >> 20} MiB at the escrow, peak {hwm >> 20} MiB "
        f"after (+{grew >> 20} MiB, bound "
        f"+{MAX_GROWTH_MIB} MiB)")
    check(DEBUG or grew < MAX_GROWTH_MIB << 20,
          f"n's RSS grew by {grew >> 20} MiB for a {NODE_OUT_MIB} MiB output")
    os.unlink(via)

    # 4. a destination that cannot be written (its directory is missing):
    # the light peer says so before any credit moves, and posts nothing
    bad = os.path.join(net.dir, "gone", "o.bin")
    rc, out, err, _ = submit(
        ["--datadir", req.datadir, "--bootstrap", p.addr, *job(bad, 1),
         "--max-price", "1000", "--no-wait", "--timeout-s", "60"])
    check(rc != 0, "submit into a missing directory succeeded")
    check(f"cannot write the output '{bad}'" in err,
          f"the error does not name the file: {err.strip()[-400:]}")
    check("escrow of" not in err, f"credits moved: {err.strip()[-400:]}")
    log(f"missing directory: {err.strip().splitlines()[-1]}")


nstest.main(test, "large_output")
