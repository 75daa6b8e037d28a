#!/usr/bin/env python3
"""A large input through a testnet, next to `nightshift run` of the same
job, with the provider's peak memory. Figures only; nothing passes or
fails on time.

The job reads one byte of every 4 KiB of an input of --mib MiB (random
bytes), so the time is the transfer's, not the kernel's. Three runs, in
this order, each printed with its wall time:

  run      `nightshift run` of the job (the reference: no network);
  stream   submit through a testnet (one provider, one light-peer
           requester): the provider receives the input into its blob
           store as it arrives (the streaming path);
  heap     the same with node.input_cache_bytes below the input's size:
           the provider receives it whole in its heap (the path every
           input took before streaming; the reference for memory).

For stream and heap: the provider node's peak RSS (VmHWM from
/proc/PID/status, read before the node stops) and its RSS when idle
before the job, the sandboxed worker's peak RSS (it must hold the input
for the device), and the submit process's peak RSS (wait4).

    bench/bench_transfer.py [--mib 256]

With --output-mib N, a large OUTPUT instead (the requester's side): a job
whose output is N MiB and whose input is 4 KiB, through one testnet (one
provider), submitted by a light peer once with --old-bin (a `nightshift`
built from an earlier commit: the requester that fetched outputs into its
heap and hashed them once complete) and once with this build (outputs
received into a file as they arrive, leaves hashed on the way), in
alternation, --rounds times. Each line: the fetch time (from "result
committed" to "outputs received" in submit's progress), the check and
settle time after it, the submit process's peak RSS over its whole life
(wait4; it includes the pre-flight, which takes output-sized buffers in
both builds: four and a byte map before, two and two bitmaps since) and
its peak from the escrow on (VmHWM reset by
/proc/PID/clear_refs once the escrow line is printed, so it covers the
fetch, the check and the writing of the output), with `nightshift run` of
the job first as the reference.

    bench/bench_transfer.py --output-mib 256 --old-bin OLD/build/nightshift
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
os.environ.setdefault("NIGHTSHIFT_BIN", os.path.join(ROOT, "build",
                                                     "nightshift"))
import nstest  # noqa: E402

STRIDE = 4096
KERNEL = """
kernel void pick(global const uchar *x, global uchar *out, uint stride)
{
    size_t i = get_global_id(0);
    out[i] = x[i * stride];
}
"""


def kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


class Peak:
    """Peak RssAnon (heap and other private memory) and RssFile (mapped
    files: reclaimable) of pid, sampled every 5 ms on a thread."""

    def __init__(self, pid):
        self.pid, self.anon, self.file, self.on = pid, 0, 0, True
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while self.on:
            try:
                self.anon = max(self.anon, kib(self.pid, "RssAnon"))
                self.file = max(self.file, kib(self.pid, "RssFile"))
            except OSError:
                return
            time.sleep(0.005)

    def stop(self):
        self.on = False
        self.t.join()


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return out


def timed(args):
    t = time.monotonic()
    p = subprocess.Popen(args, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    out, err = b"", b""
    _, status, ru = os.wait4(p.pid, 0)
    out, err = p.stdout.read(), p.stderr.read()
    p.returncode = os.waitstatus_to_exitcode(status)
    return time.monotonic() - t, p.returncode, out, err, ru.ru_maxrss


def network(tag, mib, job_args, extra):
    with nstest.Net(f"bench-transfer-{tag}") as net:
        p = net.node("p").init()
        req = net.node("req").init()
        g = net.genesis([p, req])
        for n in (p, req):
            nstest.cli_ok("init", "--datadir", n.datadir, "--genesis", g)
        p.start(extra=("--set", "node.stake=100000", *extra))
        time.sleep(1)
        idle = kib(p.pid, "RssAnon")
        peak = Peak(p.pid)
        wall, rc, out, err, sub_rss = timed(
            [nstest.BIN, "submit", "--datadir", req.datadir, "--bootstrap",
             p.addr, *job_args, "--max-price", "100", "--deadline-s", "300",
             "--json"])
        if rc != 0:
            sys.exit(f"{tag}: submit failed: {err.decode()[-500:]}")
        doc = json.loads(out)
        peak.stop()
        node_hwm = kib(p.pid, "VmHWM")
        worker_hwm = max([kib(c, "VmHWM") for c in children(p.pid)] or [0])
        t = doc["timings_ms"]
        print(f"{tag:7s} {wall:7.2f} s  (match {t['match']} ms, run "
              f"{t['run']} ms)  provider node: peak anon "
              f"{peak.anon / 1024:6.1f} MiB (idle {idle / 1024:.1f}), peak "
              f"mapped files {peak.file / 1024:6.1f} MiB, VmHWM "
              f"{node_hwm / 1024:6.1f} MiB;  worker VmHWM "
              f"{worker_hwm / 1024:.1f} MiB;  submit maxrss "
              f"{sub_rss / 1024:.1f} MiB;  input {mib} MiB", flush=True)


OUT_KERNEL = """
kernel void spread(global const uint *seed, global uint *out)
{
    uint i = (uint)get_global_id(0);
    out[i] = seed[i & 1023u] * 2654435761u + i;
}
"""


def sha256_file(path):
    """In 1 MiB pieces: a child's wait4 peak starts from this process's
    own (exec after vfork), so this process never holds a whole output."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                return h.hexdigest()
            h.update(b)


def submit_watched(binary, args):
    """Run `BINARY submit ARGS`; (wall s, rc, stderr, {progress marker:
    seconds}, peak RSS KiB before the escrow, RSS KiB at the escrow, peak
    RSS KiB from the escrow on)."""
    t = time.monotonic()
    p = subprocess.Popen([binary, "submit", *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         text=True)
    marks, err, pre, base = {}, [], 0, 0
    for line in p.stderr:
        err.append(line)
        at = time.monotonic() - t
        for key in ("escrow of", "result committed", "outputs received",
                    "settled"):
            if key in line and key not in marks:
                marks[key] = at
        if "escrow of" in line and not pre:
            pre = kib(p.pid, "VmHWM")
            with open(f"/proc/{p.pid}/clear_refs", "w") as f:
                f.write("5")
            base = kib(p.pid, "VmHWM")
    _, status, ru = os.wait4(p.pid, 0)
    p.stdout.read()
    rc = os.waitstatus_to_exitcode(status)
    return (time.monotonic() - t, rc, "".join(err), marks, pre, base,
            ru.ru_maxrss)


def outputs(a):
    mib = a.output_mib
    size = mib << 20
    with nstest.Net("bench-transfer-out") as net:
        seed = os.path.join(net.dir, "seed.bin")
        with open(seed, "wb") as f:
            f.write(os.urandom(4096))
        src = os.path.join(net.dir, "spread.cl")
        with open(src, "w") as f:
            f.write(OUT_KERNEL)
        out = os.path.join(net.dir, "out.bin")
        job = ["--kernel", src, "--entry", "spread", "--global",
               str(size // 4), "--arg", f"in:{seed}", "--arg",
               f"out:{size}:{out}"]
        wall, rc, _, err, rss = timed([nstest.BIN, "run", *job,
                                       "--timeout-ms", "300000"])
        if rc != 0:
            sys.exit(f"run failed: {err.decode()[-500:]}")
        want = sha256_file(out)
        os.unlink(out)
        print(f"{'run':9s} {wall:7.2f} s  (reference, no network)  peak RSS "
              f"{rss / 1024:.1f} MiB  output {mib} MiB", flush=True)
        p = net.node("p").init()
        req = net.node("req").init()
        g = net.genesis([p, req])
        for n in (p, req):
            nstest.cli_ok("init", "--datadir", n.datadir, "--genesis", g)
        p.start(extra=("--set", "node.stake=100000"))
        time.sleep(1)
        for r in range(a.rounds):
            for tag, binary in (("old", a.old_bin), ("streaming", nstest.BIN)):
                wall, rc, err, m, pre, base, peak = submit_watched(
                    binary, ["--datadir", req.datadir, "--bootstrap", p.addr,
                             *job, "--max-price", "1000", "--no-wait",
                             "--deadline-s", "300", "--timeout-s", "400"])
                if rc != 0:
                    sys.exit(f"{tag}: submit failed: {err[-500:]}")
                same = sha256_file(out) == want
                os.unlink(out)
                fetch = m["outputs received"] - m["result committed"]
                check = m["settled"] - m["outputs received"]
                print(f"{tag:9s} {wall:6.2f} s  fetch {fetch:5.2f} s  "
                      f"check+write {check:5.2f} s  submit RSS: peak before "
                      f"the escrow {pre / 1024:6.1f} MiB, at the escrow "
                      f"{base / 1024:5.1f}, peak after {peak / 1024:6.1f} "
                      f"(+{(peak - base) / 1024:6.1f})  output identical "
                      f"to run's: {same}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=256, help="input MiB")
    ap.add_argument("--output-mib", type=int, default=0,
                    help="measure a large output instead (MiB)")
    ap.add_argument("--old-bin", help="with --output-mib: the earlier "
                    "nightshift to compare with")
    ap.add_argument("--rounds", type=int, default=2,
                    help="with --output-mib: old/new pairs")
    a = ap.parse_args()
    if a.output_mib:
        if not a.old_bin:
            sys.exit("--output-mib needs --old-bin")
        outputs(a)
        return
    size = a.mib << 20
    with nstest.Net("bench-transfer-files") as files:
        x = os.path.join(files.dir, "x.bin")
        with open(x, "wb") as f:
            for _ in range(a.mib):
                f.write(os.urandom(1 << 20))
        src = os.path.join(files.dir, "pick.cl")
        with open(src, "w") as f:
            f.write(KERNEL)
        n = size // STRIDE
        job = ["--kernel", src, "--entry", "pick", "--global", str(n),
               "--arg", f"in:{x}", "--arg",
               f"out:{n}:{os.path.join(files.dir, 'out.bin')}",
               "--arg", f"u32:{STRIDE}"]
        wall, rc, _, err, rss = timed([nstest.BIN, "run", *job,
                                       "--timeout-ms", "300000"])
        if rc != 0:
            sys.exit(f"run failed: {err.decode()[-500:]}")
        print(f"{'run':7s} {wall:7.2f} s  (reference, no network)  peak RSS "
              f"{rss / 1024:.1f} MiB  input {a.mib} MiB", flush=True)
        network("stream", a.mib, job, ())
        network("heap", a.mib, job,
                ("--set", f"node.input_cache_bytes={max(size // 2, 1 << 20)}"))


if __name__ == "__main__":
    main()
