#!/usr/bin/env python3
"""Cross-device check: are the built-ins that their help calls exact
really equal bit for bit on another OpenCL device?

Runs one job per built-in (and a few user-kernel probes) with
`nightshift run --device N` on seeded inputs, and records each output's
SHA-256. On a second machine (a GPU, say) run it with --save and --keep,
bring the file and the folder back, and run it here with --compare and
--theirs: each output is compared with ours, and where bytes differ the
count of differing float32 words and the largest difference in units in
the last place is printed. Nothing passes or fails on time; the exit
status is 1 when an output that its built-in's help calls exact differs.

    bench/cross_device.py [--device N] [--work DIR]
                          [--save HASHES.json --keep OUTDIR]
                          [--compare HASHES.json --theirs OUTDIR]
"""
import argparse
import hashlib
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("NIGHTSHIFT_BIN") or os.path.join(ROOT, "build",
                                                       "nightshift")

# User-kernel probes: what a device does to plain float code that a user
# submits with the default (exact) tolerance.
PROBES = {
    "probe_contract": """
__kernel void probe_contract(__global const float *a, __global const float *b,
                             __global const float *c, __global float *o)
{ size_t i = get_global_id(0); o[i] = a[i] * b[i] + c[i]; }
""",
    "probe_div_sqrt": """
__kernel void probe_div_sqrt(__global const float *a, __global const float *b,
                             __global const float *c, __global float *o)
{ size_t i = get_global_id(0); o[i] = a[i] / b[i] + sqrt(fabs(c[i])); }
""",
    "probe_exp": """
__kernel void probe_exp(__global const float *a, __global const float *b,
                        __global const float *c, __global float *o)
{ size_t i = get_global_id(0); o[i] = exp(a[i]) + log(fabs(b[i]) + 1.0f); }
""",
    "probe_denorm": """
#pragma OPENCL FP_CONTRACT OFF
__kernel void probe_denorm(__global const float *a, __global const float *b,
                           __global const float *c, __global float *o)
{ size_t i = get_global_id(0); o[i] = (a[i] * 1e-38f) * b[i]; }
""",
}

# Built-ins whose help does not claim exactness across devices.
INEXACT = {"softmax"}


def floats(path, n, seed, lo=-1.0, hi=1.0):
    r = random.Random(seed)
    with open(path, "wb") as f:
        f.write(struct.pack(f"<{n}f", *(r.uniform(lo, hi) for _ in range(n))))
    return path


def jobs(w):
    """name -> (flags, [output files]); inputs written under w."""
    n = 65536
    a = floats(f"{w}/a.bin", n, 1)
    b = floats(f"{w}/b.bin", n, 2)
    c = floats(f"{w}/c.bin", n, 3)
    m = 256
    ma = floats(f"{w}/ma.bin", m * m, 4)
    mb = floats(f"{w}/mb.bin", m * m, 5)
    img = floats(f"{w}/img.bin", m * m, 6, 0.0, 1.0)
    wts = floats(f"{w}/w9.bin", 9, 7)
    bodies = 1024
    pos = floats(f"{w}/pos.bin", 4 * bodies, 8, 0.0, 1.0)
    vel = floats(f"{w}/vel.bin", 4 * bodies, 9)
    with open(f"{w}/prefix.bin", "wb") as f:
        f.write(bytes(range(32)))
    rows, cols, k = 512, 128, 8
    x = floats(f"{w}/x.bin", rows * cols, 10, -4.0, 4.0)
    o = lambda name, nbytes: f"out:{nbytes}:{w}/{name}"
    j = {
        "vector_add": (["--builtin", "vector_add", "--global", str(n),
                        "--arg", f"in:{a}", "--arg", f"in:{b}",
                        "--arg", o("vadd.bin", 4 * n), "--arg", f"u32:{n}"],
                       ["vadd.bin"]),
        "saxpy": (["--builtin", "saxpy", "--global", str(n),
                   "--arg", f"in:{a}", "--arg", f"in:{b}",
                   "--arg", o("saxpy.bin", 4 * n), "--arg", "f32:1.7",
                   "--arg", f"u32:{n}"], ["saxpy.bin"]),
        "stencil2d": (["--builtin", "stencil2d", "--global", f"{m},{m}",
                       "--arg", f"in:{img}", "--arg", f"in:{wts}",
                       "--arg", o("stencil.bin", 4 * m * m),
                       "--arg", f"u32:{m}", "--arg", f"u32:{m}"],
                      ["stencil.bin"]),
        "nbody_step": (["--builtin", "nbody_step", "--global", str(bodies),
                        "--arg", f"in:{pos}", "--arg", f"in:{vel}",
                        "--arg", o("npos.bin", 16 * bodies),
                        "--arg", o("nvel.bin", 16 * bodies),
                        "--arg", f"u32:{bodies}", "--arg", "f32:0.01",
                        "--arg", "f32:0.01"], ["npos.bin", "nvel.bin"]),
        "mandelbrot": (["--builtin", "mandelbrot", "--global", f"{m},{m}",
                        "--arg", o("mandel.bin", 4 * m * m),
                        "--arg", f"u32:{m}", "--arg", f"u32:{m}",
                        "--arg", "f32:-2.0", "--arg", "f32:-1.5",
                        "--arg", f"f32:{3.0 / m}", "--arg", f"f32:{3.0 / m}",
                        "--arg", "u32:256"], ["mandel.bin"]),
        "montecarlo_pi": (["--builtin", "montecarlo_pi", "--global", "4096",
                           "--arg", o("pi.bin", 4 * 4096), "--arg", "u64:7",
                           "--arg", "u32:64"], ["pi.bin"]),
        "nonce_sha256": (["--builtin", "nonce_sha256", "--global", "65536",
                          "--arg", f"in:{w}/prefix.bin",
                          "--arg", o("sha.bin", 8 * 65536),
                          "--arg", "u64:0"], ["sha.bin"]),
        "reduce_sum": (["--builtin", "reduce_sum", "--global", str(n),
                        "--local", "256", "--arg", f"in:{a}",
                        "--arg", o("rsum.bin", 4 * (n // 256)),
                        "--arg", f"u32:{n}", "--arg", "local:1024"],
                       ["rsum.bin"]),
        "reduce_max": (["--builtin", "reduce_max", "--global", str(n),
                        "--local", "256", "--arg", f"in:{a}",
                        "--arg", o("rmax.bin", 4 * (n // 256)),
                        "--arg", f"u32:{n}", "--arg", "local:1024"],
                       ["rmax.bin"]),
        "prefix_sum": (["--builtin", "prefix_sum", "--global", str(n),
                        "--local", "256", "--arg", f"in:{a}",
                        "--arg", o("psum.bin", 4 * n),
                        "--arg", o("pblk.bin", 4 * (n // 256)),
                        "--arg", f"u32:{n}", "--arg", "local:1024"],
                       ["psum.bin", "pblk.bin"]),
        "topk": (["--builtin", "topk", "--global", str(rows),
                  "--arg", f"in:{x}", "--arg", o("tkv.bin", 4 * rows * k),
                  "--arg", o("tki.bin", 4 * rows * k), "--arg", f"u32:{cols}",
                  "--arg", f"u32:{k}", "--arg", f"u32:{rows}"],
                 ["tkv.bin", "tki.bin"]),
        "softmax": (["--builtin", "softmax", "--global", str(rows),
                     "--arg", f"in:{x}", "--arg", o("smax.bin", 4 * rows * cols),
                     "--arg", f"u32:{cols}", "--arg", f"u32:{rows}",
                     "--tolerance", "abs:1e-6"], ["smax.bin"]),
    }
    for name, local in (("sgemm", "1,64"), ("sgemm_gpu", "1,64")):
        j[name] = (["--builtin", name, "--global", f"{m // 64},{m}",
                    "--local", local, "--arg", f"in:{ma}", "--arg", f"in:{mb}",
                    "--arg", o(f"{name}.bin", 4 * m * m), "--arg", f"u32:{m}",
                    "--arg", f"u32:{m}", "--arg", f"u32:{m}"],
                   [f"{name}.bin"])
    for name, src in PROBES.items():
        path = f"{w}/{name}.cl"
        with open(path, "w") as f:
            f.write(src)
        j[name] = (["--kernel", path, "--entry", name, "--global", str(n),
                    "--arg", f"in:{a}",
                    "--arg", f"in:{b}", "--arg", f"in:{c}",
                    "--arg", o(f"{name}.bin", 4 * n)], [f"{name}.bin"])
    return j


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def ulp_diff(p, q):
    """(differing float32 words, largest |ulp| difference) of two files."""
    with open(p, "rb") as f:
        x = f.read()
    with open(q, "rb") as f:
        y = f.read()
    if len(x) != len(y) or len(x) % 4:
        return (None, None)
    ix = struct.unpack(f"<{len(x) // 4}i", x)
    iy = struct.unpack(f"<{len(y) // 4}i", y)
    # order float bit patterns so adjacent floats differ by 1
    key = lambda v: v if v >= 0 else -(v & 0x7FFFFFFF)
    d = [abs(key(u) - key(v)) for u, v in zip(ix, iy) if u != v]
    return (len(d), max(d) if d else 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--work")
    ap.add_argument("--save")
    ap.add_argument("--keep")
    ap.add_argument("--compare")
    ap.add_argument("--theirs")
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="ns-xdev-")
    os.makedirs(work, exist_ok=True)
    dev = subprocess.run([BIN, "devices"], capture_output=True, text=True)
    print(dev.stdout.strip())
    ours = {"devices": dev.stdout, "jobs": {}}
    for name, (flags, outs) in jobs(work).items():
        r = subprocess.run([BIN, "run", "--json", "--device",
                            str(args.device)] + flags,
                           capture_output=True, text=True)
        rec = {"rc": r.returncode}
        try:
            doc = json.loads(r.stdout)
            rec["run_ms"] = doc.get("timings_ms", {}).get("run")
            rec["error"] = doc.get("error")
        except ValueError:
            rec["error"] = (r.stderr or r.stdout).strip()[-300:]
        if r.returncode == 0:
            rec["outputs"] = {o: sha(f"{work}/{o}") for o in outs}
            if args.keep:
                os.makedirs(args.keep, exist_ok=True)
                for o in outs:
                    shutil.copy(f"{work}/{o}", f"{args.keep}/{o}")
        ours["jobs"][name] = rec
        print(f"{name:16s} rc={r.returncode} run_ms={rec.get('run_ms')}"
              + (f" error={rec['error']}" if r.returncode else ""))
    if args.save:
        with open(args.save, "w") as f:
            json.dump(ours, f, indent=1)
    if not args.compare:
        return 0
    with open(args.compare) as f:
        theirs = json.load(f)
    print("\nthe other machine's devices:\n" + theirs["devices"].strip())
    print(f"\n{'job':16s} {'output':18s} {'same':5s} {'words':>7s} "
          f"{'max ulp':>8s}  claim")
    bad = 0
    for name, rec in ours["jobs"].items():
        other = theirs["jobs"].get(name)
        if not other or other.get("rc") != 0 or rec.get("rc") != 0:
            print(f"{name:16s} (not run on both: ours rc={rec.get('rc')}, "
                  f"theirs {other and other.get('rc')} "
                  f"{other and other.get('error')})")
            continue
        claim = ("probe" if name.startswith("probe_") else
                 "inexact" if name in INEXACT else "exact")
        for o, h in rec["outputs"].items():
            same = other["outputs"].get(o) == h
            words, ulps = ("", "")
            if not same and args.theirs:
                words, ulps = ulp_diff(f"{work}/{o}", f"{args.theirs}/{o}")
            if not same and claim == "exact":
                bad += 1
            print(f"{name:16s} {o:18s} {str(same):5s} {str(words):>7s} "
                  f"{str(ulps):>8s}  {claim}")
    print(f"\n{bad} output(s) of built-ins called exact differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
