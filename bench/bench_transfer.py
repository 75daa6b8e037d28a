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

With --input-mib N, a large INPUT on the requester's side: the job above
(one byte of every 4 KiB of an N MiB input) through one testnet (one
provider p, a node n beside it, a light peer's datadir), each line with
its wall time: `nightshift run` of the job (the reference: its peak
RssAnon holds the whole input), then submitted by the light peer and
through `submit --node n`, each after the same launch over a 4 MiB input
(the baseline: same kernel build, work-group size, runtime and network;
one byte of every N/4 bytes). Memory is the peak
RssAnon (heap and other private memory, sampled every 5 ms from
/proc/PID/status; the input's copy is mapped from the blob store and
counts as RssFile, shown beside it) of the requester: the submit process
for the light peer, the node n for --node (and the submitting CLI's).
Growth = peak with the N MiB input - peak with the 4 MiB one. The
provider keeps no large input in its store (it takes it in its heap), so
every job fetches its input from the requester. A light
submit of both jobs first warms the runtime's caches and the provider
(not shown). With --old-bin, the same light-peer and --node jobs with an
earlier build (its own node beside n) in the same testnet, after this
build's, --rounds times.

    bench/bench_transfer.py --input-mib 1024 [--old-bin OLD/build/nightshift]
"""
import argparse
import json
import os
import subprocess
import sys
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
        idle = nstest.proc_kib(p.pid, "RssAnon")
        peak = nstest.PeakMem(p.pid)
        wall, rc, out, err, sub_rss = timed(
            [nstest.BIN, "submit", "--datadir", req.datadir, "--bootstrap",
             p.addr, *job_args, "--max-price", "100", "--deadline-s", "300",
             "--json"])
        if rc != 0:
            sys.exit(f"{tag}: submit failed: {err.decode()[-500:]}")
        doc = json.loads(out)
        peak.stop()
        node_hwm = nstest.proc_kib(p.pid, "VmHWM")
        worker_hwm = max([nstest.proc_kib(c, "VmHWM") for c in children(p.pid)] or [0])
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
            pre = nstest.proc_kib(p.pid, "VmHWM")
            with open(f"/proc/{p.pid}/clear_refs", "w") as f:
                f.write("5")
            base = nstest.proc_kib(p.pid, "VmHWM")
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
        want = nstest.file_digest(out)
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
                same = nstest.file_digest(out) == want
                os.unlink(out)
                fetch = m["outputs received"] - m["result committed"]
                check = m["settled"] - m["outputs received"]
                print(f"{tag:9s} {wall:6.2f} s  fetch {fetch:5.2f} s  "
                      f"check+write {check:5.2f} s  submit RSS: peak before "
                      f"the escrow {pre / 1024:6.1f} MiB, at the escrow "
                      f"{base / 1024:5.1f}, peak after {peak / 1024:6.1f} "
                      f"(+{(peak - base) / 1024:6.1f})  output identical "
                      f"to run's: {same}", flush=True)


# one byte of every stride, a different one in each stride (a stride of
# 64 over 4 MiB is the same launch as 4096 over 256 MiB)
PICK2 = """
kernel void pick2(global const uchar *x, global uchar *out, uint stride)
{
    size_t i = get_global_id(0);
    out[i] = x[i * stride + (i % stride)];
}
"""


def submit_sampled(binary, args, watch=None):
    """`BINARY submit ARGS` to its end: (wall s, rc, stderr, seconds to
    the escrow line, Peak of the submit process, Peak of watch or None)."""
    t = time.monotonic()
    p = subprocess.Popen([binary, "submit", *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         text=True)
    mine, other = nstest.PeakMem(p.pid), nstest.PeakMem(watch) if watch else None
    err, escrow = [], 0.0
    for line in p.stderr:
        err.append(line)
        if "escrow of" in line and not escrow:
            escrow = time.monotonic() - t
    p.wait()
    p.stdout.read()
    wall = time.monotonic() - t
    mine.stop()
    if other:
        other.stop()
    return wall, p.returncode, "".join(err), escrow, mine, other


def inputs(a):
    mib, small_mib = a.input_mib, 4
    with nstest.Net("bench-transfer-in") as net:
        src = os.path.join(net.dir, "pick2.cl")
        with open(src, "w") as f:
            f.write(PICK2)
        files = {}
        for m in (small_mib, mib):
            files[m] = os.path.join(net.dir, f"x{m}.bin")
            with open(files[m], "wb") as f:
                for _ in range(m):
                    f.write(os.urandom(1 << 20))
        out = os.path.join(net.dir, "out.bin")

        items = (mib << 20) // STRIDE

        def job(m):  # the same launch for both sizes, at another stride
            return ["--kernel", src, "--entry", "pick2", "--global",
                    str(items), "--arg", f"in:{files[m]}", "--arg",
                    f"out:{items}:{out}", "--arg",
                    f"u32:{(m << 20) // items}"]

        t = time.monotonic()
        p = subprocess.Popen([nstest.BIN, "run", *job(mib), "--timeout-ms",
                              "600000"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        peak = nstest.PeakMem(p.pid)
        err = p.communicate()[1]
        peak.stop()
        if p.returncode != 0:
            sys.exit(f"run failed: {err.decode()[-500:]}")
        want = nstest.file_digest(out)
        os.unlink(out)
        print(f"{'run':16s} {time.monotonic() - t:7.2f} s  (reference, no "
              f"network)  peak RssAnon {peak.anon / 1024:7.1f} MiB  input "
              f"{mib} MiB", flush=True)

        cap = ("--set", f"node.input_cache_bytes={(mib + 64) << 20}")
        bins = [("", nstest.BIN)] + ([("old ", a.old_bin)] if a.old_bin
                                     else [])
        names = ["p", "req"] + [f"n{tag.strip()}" for tag, _ in bins]
        nodes = dict(zip(names, net.named_nodes(*names)))
        with open(os.path.join(nodes["req"].datadir, "config.ini"), "a") as f:
            f.write(f"\n[node]\ninput_cache_bytes = {(mib + 64) << 20}\n")
        # the provider keeps no large input: each job fetches its input
        # from the requester (the transfer is in each wall time)
        nodes["p"].start(extra=("--set", "node.stake=100000", "--set",
                                f"node.input_cache_bytes={2 * small_mib << 20}"))
        for tag, binary in bins:
            saved, nstest.BIN = nstest.BIN, binary
            try:  # the node of that build
                nodes[f"n{tag.strip()}"].start(bootstrap=[nodes["p"]],
                                               extra=cap)
            finally:
                nstest.BIN = saved
        time.sleep(1)
        terms = ["--max-price", "1000", "--no-wait", "--deadline-s", "500",
                 "--timeout-s", "600"]
        # warm-up, not shown: the kernel compiled for both sizes (PoCL's
        # cache), the provider's worker started
        for m in (small_mib, mib):
            r = submit_sampled(nstest.BIN, ["--datadir", nodes["req"].datadir,
                                            "--bootstrap", nodes["p"].addr,
                                            *job(m), *terms])
            if r[1] != 0:
                sys.exit(f"warm-up: submit failed: {r[2][-500:]}")
        for tag, binary in bins * a.rounds:
            for via in ("light", "node"):
                n = nodes[f"n{tag.strip()}"]
                where = (["--node", n.datadir] if via == "node" else
                         ["--datadir", nodes["req"].datadir, "--bootstrap",
                          nodes["p"].addr])
                watch = n.pid if via == "node" else None
                runs = []
                for m in (small_mib, mib):
                    r = submit_sampled(binary, [*where, *job(m), *terms],
                                       watch)
                    if r[1] != 0:  # shown, and the others go on
                        last = r[2].strip().splitlines() or [""]
                        print(f"{tag + via:16s} {m} MiB: submit failed "
                              f"({r[1]}): {last[-1][:300]}", flush=True)
                        break
                    runs.append(r)
                if len(runs) < 2:
                    continue
                same = nstest.file_digest(out) == want
                os.unlink(out)
                (_, _, _, _, b_mine, b_other), \
                    (wall, _, _, escrow, mine, other) = runs
                who, base = (other, b_other) if via == "node" else \
                    (mine, b_mine)
                line = (f"{tag + via:16s} {wall:7.2f} s  (escrow at "
                        f"{escrow:5.2f} s)  requester peak RssAnon "
                        f"{who.anon / 1024:7.1f} MiB (+{(who.anon - base.anon) / 1024:6.1f} "
                        f"over the {small_mib} MiB input), RssFile "
                        f"{who.file / 1024:6.1f} MiB")
                if via == "node":
                    line += (f";  CLI peak RssAnon {mine.anon / 1024:6.1f} "
                             f"MiB (+{(mine.anon - b_mine.anon) / 1024:6.1f})")
                print(f"{line};  output identical to run's: {same}",
                      flush=True)
        for x in nodes.values():  # an earlier build may still be copying
            x.stop(timeout=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=256, help="input MiB")
    ap.add_argument("--output-mib", type=int, default=0,
                    help="measure a large output instead (MiB)")
    ap.add_argument("--input-mib", type=int, default=0,
                    help="measure the requester's side of a large input "
                    "instead (MiB)")
    ap.add_argument("--old-bin", help="with --output-mib or --input-mib: "
                    "the earlier nightshift to compare with")
    ap.add_argument("--rounds", type=int, default=2,
                    help="with --output-mib or --input-mib: new/old pairs")
    a = ap.parse_args()
    if a.input_mib:
        inputs(a)
        return
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
