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
"""
import argparse
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=256, help="input MiB")
    a = ap.parse_args()
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
