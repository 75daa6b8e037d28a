#!/usr/bin/env python3
"""An interrupted output transfer resumes (issue 10, item 4).

The requester receives each output into PATH.<job>.part beside its
destination as the chunks arrive, and marks which RESULT those bytes are
of (PATH.<job>.part.from). One provider p, one requester (a light peer,
`submit`), a job whose output is 128 MiB (64 MiB in the sanitizer
build):

  1. the requester is killed (SIGKILL) while the output streams in, part
     of it in its part file;
  2. `submit --resume JOB` takes the part file up: it says how many bytes
     it already had, fetches the rest, the job settles, the output is
     byte-identical to `nightshift run`'s, and no part or mark file is
     left;
  3. a second job, killed the same way, whose part file is then damaged
     (a disk that lost a write): the resumed fetch does not match the
     commitment, so the requester fetches the output whole once more
     (event=outputs_refetched) instead of blaming the provider, and the
     job settles with the right output, nobody slashed or cancelled.
"""
import glob
import os
import re
import subprocess

import nstest
from nstest import check, check_eq, log

# work-items, 4 bytes each: a 128 MiB output (64 MiB in the sanitizer
# build, whose kernels and copies run many times slower)
N = (16 if os.environ.get("NS_BUILD_TYPE") == "Debug" else 32) << 20

KERNEL = """
kernel void fill(global uint *out, uint salt)
{
    uint i = (uint)get_global_id(0);
    out[i] = i * 2654435761u ^ salt;
}
"""


def parts(d, name):
    return sorted(glob.glob(os.path.join(d, name + ".*.part")))


def test(net):
    p = net.node("p").init()
    req = net.node("req").init()
    g = net.genesis([p, req])
    for n in (p, req):
        nstest.cli_ok("init", "--datadir", n.datadir, "--genesis", g)
    p.start(extra=("--set", "node.stake=100000"))
    d = net.dir
    src = os.path.join(d, "fill.cl")
    with open(src, "w") as f:
        f.write(KERNEL)

    def flags(out, salt):
        # --work: a price that does not hang on the pre-flight's timing of
        # one-item units on a loaded (sanitizer) machine, which once put
        # this job over its budget; what is tested is the resume
        return ["--kernel", src, "--entry", "fill", "--global", str(N),
                "--arg", f"out:{4 * N}:{os.path.join(d, out)}",
                "--arg", f"u32:{salt}", "--work", str(10 * N)]

    def submit(*args):
        sub = subprocess.Popen(
            [nstest.BIN, "submit", "--datadir", req.datadir, "--bootstrap",
             p.addr, *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            stdin=subprocess.DEVNULL)
        net.at_exit(sub.kill)
        return sub

    def cut(out, salt):
        """Submit, kill once part of the output is in its part file;
        the job id and the part file's path. A submit that ends before
        that is said and tried once more (what is tested is the resume)."""
        for attempt in (1, 2):
            sub = submit(*flags(out, salt), "--max-price", "20",
                         "--deadline-s", "120", "--timeout-s", "200")
            ended = {}

            def streaming():
                if sub.poll() is not None:
                    ended["why"] = (f"exit {sub.returncode}: "
                                    f"{sub.stderr.read()[-800:]}")
                    return True, "ended"
                got = parts(d, out)
                size = os.path.getsize(got[0]) if got else 0
                return 4 * N // 8 <= size < 4 * N, f"part file {size} bytes"
            nstest.wait_until(streaming, 200, f"{out}'s part file to fill",
                              interval=0.005)
            if not ended:
                break
            log(f"try {attempt}: submit ended before the cut "
                f"({ended['why']})")
            check(attempt == 1, f"submit ended twice before the cut: "
                                f"{ended['why']}")
            for f in parts(d, out):
                os.unlink(f)
        sub.kill()
        sub.wait()
        part = parts(d, out)[0]
        jobs = [j for j in os.listdir(os.path.join(req.datadir, "jobs"))
                if len(j) == 64]
        job = next(j for j in jobs if os.path.basename(part).split(".")[-2]
                   == j[:16])
        log(f"requester killed with {os.path.getsize(part)} of {4 * N} "
            f"output bytes in {os.path.basename(part)}")
        check(os.path.exists(part + ".from"), "the part file has no mark")
        return job, part

    def resume(job):
        """The receipt's "rounds" line and the progress (stderr)."""
        sub = submit("--resume", job, "--timeout-s", "200")
        out, err = sub.communicate(timeout=240)
        check(sub.returncode == 0, f"submit --resume failed (exit "
              f"{sub.returncode}: not settled): {err.strip()[-800:]}")
        rounds = re.search(r"rounds\s+\d+ \(slashed (\d+), cancelled (\d+)",
                           out)
        check(rounds is not None, f"no receipt: {out[-400:]}")
        return (int(rounds.group(1)), int(rounds.group(2))), err

    def same_as_run(out, salt):
        local = os.path.join(d, f"local{salt}.bin")
        nstest.cli_ok("run", "--kernel", src, "--entry", "fill", "--global",
                      str(N), "--arg", f"out:{4 * N}:{local}", "--arg",
                      f"u32:{salt}", timeout=200)
        with open(os.path.join(d, out), "rb") as f1, open(local, "rb") as f2:
            check(f1.read() == f2.read(),
                  f"{out} differs from `nightshift run`'s")
        os.unlink(local)

    # 1-2. cut, then resumed from the part file
    job, part = cut("y.bin", 7)
    _, err = resume(job)
    said = [ln for ln in err.splitlines() if "resuming the outputs" in ln]
    check(said, f"the resumed submit did not take the part up: {err[-800:]}")
    log(said[0].strip())
    check("fetching them whole again" not in err, "a good part was refetched")
    same_as_run("y.bin", 7)
    check_eq(parts(d, "y.bin"), [], "part files left")
    check(not glob.glob(os.path.join(d, "*.from")), "a mark file is left")
    log("2: resumed, settled, byte-identical to run")

    # 3. a damaged part file: fetched whole again, the provider not blamed
    job, part = cut("z.bin", 9)
    with open(part, "r+b") as f:
        f.seek(4096)
        b = f.read(1)
        f.seek(4096)
        f.write(bytes([b[0] ^ 0xFF]))
    (slashed, cancelled), err = resume(job)
    check("fetching them whole again" in err,
          f"a damaged part did not make the requester fetch whole again: "
          f"{err[-800:]}")
    check_eq(slashed, 0, "providers slashed")
    check_eq(cancelled, 0, "awards cancelled")
    same_as_run("z.bin", 9)
    check_eq(parts(d, "z.bin"), [], "part files left")
    log("3: a damaged part was fetched whole again; settled, p not blamed")


nstest.main(test, "output_resume")
