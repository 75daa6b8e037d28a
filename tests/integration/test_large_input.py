"""Streaming inputs: the requester never holds an input file in its heap.
It copies each input into its blob store in 1 MiB pieces, hashing on the
way, and serves the provider's FETCHes, runs its pre-flight and its spot
check from a read-only mapping of the stored copy (file pages, not
anonymous memory). The copy is its own: the user editing the file while
the job runs changes nothing that is served or checked.

One provider p, a node n beside it, a light peer's datadir req. The job
reads one byte of every 4 KiB of an input of IN_MIB MiB (random bytes),
so its output is small and the time is the transfer's; the baseline job
is the same launch over a 4 MiB input (one byte of every 64). p keeps no
large input in its store, so each job fetches its input from the
requester's copy:

  1. `nightshift run` of the job: the reference output;
  2. the light peer (`submit --datadir req`), first with the baseline
     (the same kernel build, launch, runtime and network), then with the
     large one: the output is identical to run's, although the input file
     was overwritten in the middle once the escrow was locked; the input
     is in req's blob store under its hash; the submit process's peak
     RssAnon (sampled every 5 ms from /proc/PID/status) exceeds the
     baseline's by far less than the input (the old requester read every
     input whole into its heap);
     killed once the provider accepted, the light peer's job directory
     holds the input as a hard link to the stored blob, and `submit
     --resume` finishes the job from it (same output, same bound);
  3. `submit --node n`: the same two jobs through n's requester; output
     identical, n's peak RssAnon during the large job exceeds its peak
     during the small one by far less than the input, and so does the
     submitting CLI's (which only maps the file to hash it);
  4. the store cannot take the input (node.input_cache_bytes below its
     size): the light peer, and then the node n, fail with one line
     naming the file and the setting, before any credit moves.

`test_large_input.py --long` takes a 1 GiB input instead.
"""
import os
import subprocess
import sys

import nstest
from nstest import check, check_eq, log

LONG = "--long" in sys.argv
IN_MIB = 1024 if LONG else 256
SMALL_MIB = 4
STRIDE = 4096
# Growth allowed over the baseline: the copy's 1 MiB buffer, noise of the
# allocator. The old requester grew by the whole input. (A baseline of
# another launch size would not do: the runtime compiles a kernel for each
# work-group size it meets, about 110 MiB of LLVM the first time.)
MAX_GROWTH_MIB = 32

KERNEL = """
kernel void pick(global const uchar *x, global uchar *out, uint stride)
{
    size_t i = get_global_id(0);
    out[i] = x[i * stride + (i % stride)];
}
"""


def write_random(path, mib):
    with open(path, "wb") as f:
        for _ in range(mib):
            f.write(os.urandom(1 << 20))


def submit(args, on_line=None, watch=None):
    """`nightshift submit ARGS` to its end, each stderr line to
    on_line(proc, line); the peak RssAnon (KiB) of the submit process and of
    the pid watch (when given) while it ran. (rc, stderr, peak, peak of
    watch)."""
    p = subprocess.Popen([nstest.BIN, "submit", *args],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True)
    mine = nstest.PeakMem(p.pid)
    other = nstest.PeakMem(watch) if watch else None
    err = []
    for line in p.stderr:
        err.append(line)
        if on_line:
            on_line(p, line)
    p.wait()
    return (p.returncode, "".join(err), mine.stop(),
            other.stop() if other else 0)


def test(net):
    # In a sanitizer build, freed buffers wait in ASan's quarantine (256 MiB
    # by default): each 128 KiB chunk served would count as held. None for
    # the processes measured here (the nodes and every submit; ignored by
    # a build without ASan).
    asan = os.environ.get("ASAN_OPTIONS", "")
    os.environ["ASAN_OPTIONS"] = ((asan + ":") if asan else "") + \
        "quarantine_size_mb=0:thread_local_quarantine_size_kb=0"
    p, n, req = net.named_nodes("p", "n", "req")
    # inputs of 1 GiB (--long) must fit the requesters' stores; the
    # provider keeps none (it takes them in its heap), so that every job
    # fetches its input from the requester, which serves it from its copy
    cap = ("--set", f"node.input_cache_bytes={(IN_MIB + 64) << 20}")
    p.start(extra=("--set", "node.stake=100000", "--set",
                   f"node.input_cache_bytes={2 * SMALL_MIB << 20}"))
    n.start(bootstrap=[p], extra=cap)
    conf = os.path.join(req.datadir, "config.ini")
    with open(conf) as f:
        conf_text = f.read()

    def req_store_cap(nbytes):
        with open(conf, "w") as f:
            f.write(f"{conf_text}\n[node]\ninput_cache_bytes = {nbytes}\n")
    req_store_cap((IN_MIB + 64) << 20)

    src = os.path.join(net.dir, "pick.cl")
    with open(src, "w") as f:
        f.write(KERNEL)
    big = os.path.join(net.dir, "x.bin")
    small = os.path.join(net.dir, "small.bin")
    write_random(big, IN_MIB)
    write_random(small, SMALL_MIB)
    original = nstest.file_digest(big)

    # the baseline is the same launch (items, work-group size: the same
    # kernel build and the same runtime memory) over a smaller input, each
    # item picking from it at a smaller stride
    items = (IN_MIB << 20) // STRIDE

    def job(x, mib, out):
        stride = (mib << 20) // items
        return ["--kernel", src, "--entry", "pick", "--global", str(items),
                "--arg", f"in:{x}", "--arg", f"out:{items}:{out}",
                "--arg", f"u32:{stride}"]

    terms = ["--max-price", "1000", "--no-wait", "--deadline-s", "240",
             "--timeout-s", "280"]
    light = ["--datadir", req.datadir, "--bootstrap", p.addr]

    # 1. the reference
    ref = os.path.join(net.dir, "run.bin")
    r = nstest.cli("run", *job(big, IN_MIB, ref), "--timeout-ms", "300000",
                   timeout=300)
    check(r.returncode == 0, f"run: {r.stderr.strip()[-500:]}")
    want = nstest.file_digest(ref)

    # 2. the light peer: baseline, then the large input, overwritten in
    # the middle once the escrow is locked (before the provider fetches)
    out = os.path.join(net.dir, "light.bin")
    rc, err, base, _ = submit([*light, *job(small, SMALL_MIB, out), *terms])
    check(rc == 0, f"small submit failed ({rc}): {err.strip()[-800:]}")
    edited = []

    def edit(_, line):
        if "escrow of" in line and not edited:
            with open(big, "r+b") as f:
                f.seek((IN_MIB << 20) // 2)
                f.write(b"\0" * (4 << 20))
            edited.append(1)

    rc, err, peak, _ = submit([*light, *job(big, IN_MIB, out), *terms], edit)
    check(rc == 0, f"submit failed ({rc}): {err.strip()[-800:]}")
    check(edited, f"no escrow line: {err[-400:]}")
    check_eq(nstest.file_digest(out), want, "the light peer's output vs run's (the "
             "input file was edited while the job ran)")
    grew = (peak - base) >> 10
    log(f"light peer: {IN_MIB} MiB input, output identical to run's; "
        f"submit peak RssAnon {peak >> 10} MiB, {base >> 10} MiB with a "
        f"{SMALL_MIB} MiB input (+{grew} MiB, bound +{MAX_GROWTH_MIB} MiB)")
    check(grew < MAX_GROWTH_MIB,
          f"submit's RssAnon grew by {grew} MiB for a {IN_MIB} MiB input: "
          f"the input was held in its heap")
    # the stored copy holds the bytes as submitted, named by their
    # BLAKE2b-256; put them back into the file for step 3
    store = os.path.join(req.datadir, "blobs")
    blobs = [b for b in os.listdir(store) if len(b) == 64 and
             os.path.getsize(os.path.join(store, b)) == IN_MIB << 20]
    check(len(blobs) == 1, f"no {IN_MIB} MiB input in req's blob store: "
          f"{os.listdir(store)}")
    blob = os.path.join(store, blobs[0])
    check_eq(nstest.file_digest(blob, "blake2b"), blobs[0], "the stored input's hash")
    check_eq(nstest.file_digest(blob), original, "the stored input vs the file as it "
             "was submitted")
    with open(blob, "rb") as s, open(big, "wb") as d:
        while True:
            b = s.read(1 << 20)
            if not b:
                break
            d.write(b)
    os.unlink(out)

    # 2b. the light peer killed once the provider accepted its job: its
    # job directory holds the input as a link to the stored blob (no
    # copy), and `submit --resume` continues the job from the store (the
    # spot check re-runs units on the stored input). Killed any earlier,
    # the resume depends on what the dead process got out: an AWARDED
    # message still queued is lost with it, and a job resumed before its
    # award is not announced again (both the requester's, not the
    # inputs').
    jobs = os.path.join(req.datadir, "jobs")
    before = set(os.listdir(jobs))
    rc, err, _, _ = submit(
        [*light, *job(big, IN_MIB, out), *terms],
        lambda proc, line: proc.kill() if "accepted:" in line else None)
    check(rc == -9, f"the submit was not killed ({rc}): {err[-400:]}")
    new = set(os.listdir(jobs)) - before
    check(len(new) == 1, f"no job directory for the killed submit: {new}")
    job_id = new.pop()
    saved = os.path.join(jobs, job_id, "in0.bin")
    check(os.stat(saved).st_ino == os.stat(blob).st_ino,
          "the job directory's input is not a link to the stored blob")
    rc, err, peak, _ = submit([*light, "--resume", job_id])
    check(rc == 0, f"submit --resume failed ({rc}): {err.strip()[-800:]}")
    check_eq(nstest.file_digest(out), want, "the resumed job's output vs run's")
    grew = (peak - base) >> 10
    log(f"resumed after a kill: output identical to run's; peak RssAnon "
        f"{peak >> 10} MiB (+{grew} MiB over the {SMALL_MIB} MiB baseline)")
    check(grew < MAX_GROWTH_MIB,
          f"submit --resume's RssAnon grew by {grew} MiB for a {IN_MIB} MiB "
          f"input")
    os.unlink(out)

    # 3. through the node n
    via = os.path.join(net.dir, "node.bin")
    rc, err, cli_base, n_base = submit(
        ["--node", n.datadir, *job(small, SMALL_MIB, via), *terms],
        watch=n.pid)
    check(rc == 0, f"small submit --node failed ({rc}): {err.strip()[-800:]}")
    rc, err, cli_peak, n_peak = submit(
        ["--node", n.datadir, *job(big, IN_MIB, via), *terms], watch=n.pid)
    check(rc == 0, f"submit --node failed ({rc}): {err.strip()[-800:]}")
    check_eq(nstest.file_digest(via), want, "submit --node's output vs run's")
    n_grew, cli_grew = (n_peak - n_base) >> 10, (cli_peak - cli_base) >> 10
    log(f"submit --node: output identical to run's; n's peak RssAnon "
        f"{n_peak >> 10} MiB, {n_base >> 10} MiB with the {SMALL_MIB} MiB "
        f"input (+{n_grew} MiB); the submitting CLI's {cli_peak >> 10} MiB, "
        f"{cli_base >> 10} MiB (+{cli_grew} MiB); bound +{MAX_GROWTH_MIB} "
        f"MiB")
    check(n_grew < MAX_GROWTH_MIB,
          f"n's RssAnon grew by {n_grew} MiB for a {IN_MIB} MiB input")
    check(cli_grew < MAX_GROWTH_MIB,
          f"the submitting CLI's RssAnon grew by {cli_grew} MiB for a "
          f"{IN_MIB} MiB input")
    os.unlink(via)

    # 4. a store too small for the input: one line, no credit moved
    req_store_cap(SMALL_MIB << 20)
    out = os.path.join(net.dir, "small-store.bin")
    rc, err, _, _ = submit([*light, *job(big, IN_MIB, out), *terms])
    check(rc != 0, "a submit whose input does not fit the store succeeded")
    check("escrow of" not in err, f"credits moved: {err.strip()[-400:]}")
    last = err.strip().splitlines()[-1] if err.strip() else ""
    check("node.input_cache_bytes" in last and big in last,
          f"the error does not name the file and the setting: {last}")
    log(f"store too small: {last}")
    # two inputs that fit one by one but not together (one would evict the
    # other from the store while the job needs both)
    a, b = (os.path.join(net.dir, f"{t}.bin") for t in "ab")
    for x in (a, b):
        write_random(x, 3)
    floats = (3 << 20) // 4
    rc, err, _, _ = submit([*light, "--builtin", "vector_add", "--global",
                            str(floats), "--arg", f"in:{a}", "--arg",
                            f"in:{b}", "--arg", f"out:{3 << 20}:{out}",
                            "--arg", f"u32:{floats}", *terms])
    last = err.strip().splitlines()[-1] if err.strip() else ""
    check(rc != 0 and "do not fit" in last and "escrow of" not in err,
          f"two inputs too large together: {err.strip()[-400:]}")
    log(f"two inputs too large together: {last}")

    # ... and the same through the node n (restarted with a small store):
    # the node refuses the job with the cause, nothing is posted
    check_eq(n.stop(), 0, "n's exit status")
    n.start(bootstrap=[p], extra=("--set",
                                  f"node.input_cache_bytes={SMALL_MIB << 20}"))
    rc, err, _, _ = submit(["--node", n.datadir, *job(big, IN_MIB, via),
                            *terms])
    check(rc != 0, "submit --node of an input its store cannot take "
          "succeeded")
    last = err.strip().splitlines()[-1] if err.strip() else ""
    check("node.input_cache_bytes" in last and big in last and
          "escrow of" not in err,
          f"the node's refusal does not name the file and the setting: "
          f"{err.strip()[-400:]}")
    log(f"node's store too small: {last}")


nstest.main(test, "large_input")
