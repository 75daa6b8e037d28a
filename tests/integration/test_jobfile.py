"""Job files (`run --job FILE.json`): the JSON job of docs/JOBS.md runs
exactly as the JOB-FLAGS it stands for, and a bad file is refused with
one line that names the key (or line and column) at fault, exit 2.

  * a user kernel with two input files, an output, an f32 and a u32
    scalar, a local size and a tolerance; relative paths are relative to
    the job file, whatever the working directory: the output equals
    `nightshift run` with the same job as flags;
  * a built-in with its default entry point;
  * bad files: malformed JSON, an unknown key, a duplicate key, an
    argument naming no buffer, a buffer no step uses, an intermediate
    buffer no later step reads, too many steps, scalars of the wrong type,
    a missing file;
  * a pipeline of two steps whose first takes one file as two buffers:
    one job, its steps in --json, the output computed here.
"""
import json
import os
import struct

import nstest
from nstest import check, check_eq, cli, log

SAXPY = """
kernel void saxpy(global const float *x, global const float *y,
                  global float *out, float a, uint n)
{
    uint i = get_global_id(0);
    if (i < n)
        out[i] = a * x[i] + y[i];
}
"""


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def test(net):
    d = os.path.join(net.dir, "job")
    os.makedirs(d)
    n = 1000  # not a multiple of the local size: the kernel checks i < n
    with open(os.path.join(d, "x.bin"), "wb") as f:
        f.write(struct.pack(f"{n}f", *[i * 0.25 for i in range(n)]))
    with open(os.path.join(d, "y.bin"), "wb") as f:
        f.write(struct.pack(f"{n}f", *[1.0 - i for i in range(n)]))
    write(os.path.join(d, "saxpy.cl"), SAXPY)
    job = os.path.join(d, "saxpy.json")
    write(job, """{
  "source": "saxpy.cl",
  "buffers": {
    "x":   {"file": "x.bin"},
    "y":   {"file": "y.bin"},
    "out": {"bytes": 4096, "out": "out.bin", "item_bytes": 4}
  },
  "steps": [
    {"entry": "saxpy", "global": [1024], "local": [64],
     "args": ["x", "y", "out", {"f32": 2.5}, {"u32": 1000}]}
  ],
  "tolerance": "abs:1e-4",
  "checks": 8,
  "shards": 1
}
""")
    # from another working directory: paths follow the job file
    r = cli("run", "--job", job, "--json", timeout=60)
    check(r.returncode == 0, f"run --job failed: {r.stderr}")
    flags = os.path.join(d, "flags.bin")
    r = cli("run", "--kernel", os.path.join(d, "saxpy.cl"), "--entry",
            "saxpy", "--global", "1024", "--local", "64", "--arg",
            f"in:{d}/x.bin", "--arg", f"in:{d}/y.bin", "--arg",
            f"out:4096:{flags}:4", "--arg", "f32:2.5", "--arg", "u32:1000",
            "--tolerance", "abs:1e-4", timeout=60)
    check(r.returncode == 0, f"run with flags failed: {r.stderr}")
    with open(os.path.join(d, "out.bin"), "rb") as f, open(flags, "rb") as g:
        got = f.read()
        check(got == g.read(), "run --job and run with flags differ")
    v = struct.unpack(f"{n}f", got[:4 * n])
    check(abs(v[3] - (2.5 * 0.75 + 1.0 - 3)) < 1e-5, f"saxpy[3] = {v[3]}")

    # a built-in, its default entry point
    with open(os.path.join(d, "ones.bin"), "wb") as f:
        f.write(struct.pack("256f", *[1.0] * 256))
    write(os.path.join(d, "vadd.json"), """{
  "builtin": "vector_add",
  "buffers": {"a": {"file": "ones.bin"}, "b": {"file": "ones.bin"},
              "c": {"bytes": 1024, "out": "twos.bin"}},
  "steps": [{"global": [256], "args": ["a", "b", "c", {"u32": 256}]}]
}
""")
    r = cli("run", "--job", os.path.join(d, "vadd.json"), timeout=60)
    check(r.returncode == 0, f"run --job (builtin) failed: {r.stderr}")
    with open(os.path.join(d, "twos.bin"), "rb") as f:
        check_eq(set(struct.unpack("256f", f.read())), {2.0},
                 "vector_add of ones")

    step = '"steps": [{"global": [4], "args": [%s]}]'
    bad = [
        ('{"builtin": "vector_add",', "1:"),
        ('{"builtin": "vector_add", "colour": 1, ' + step % "" + "}",
         'unknown key "colour"'),
        ('{"builtin": "a", "builtin": "b"}', "duplicate"),
        ('{"builtin": "vector_add", ' + step % '"nope"' + "}",
         'no buffer named "nope"'),
        ('{"builtin": "vector_add", "buffers": {"u": {"file": "x.bin"}}, ' +
         step % "" + "}", "buffers.u: no step uses it"),
        ('{"builtin": "vector_add", "buffers": {"h": {"bytes": 16}}, ' +
         step % '"h"' + "}", "intermediate"),
        ('{"builtin": "vector_add", "steps": [' +
         ", ".join(['{"global": [4], "args": []}'] * 17) + "]}",
         "1 to 16 steps"),
        ('{"builtin": "vector_add", "shards": 65, ' + step % "" + "}",
         "shards: 65: at most 64"),
        ('{"builtin": "vector_add", "shards": 0, ' + step % "" + "}",
         "shards: a positive integer"),
        ('{"builtin": "vector_add", ' + step % '{"u32": 1.5}' + "}",
         "an integer"),
        ('{"builtin": "vector_add", ' + step % '{"u16": 1}' + "}",
         'unknown kind "u16"'),
        ('[1, 2]', "a JSON object"),
    ]
    for i, (text, want) in enumerate(bad):
        p = os.path.join(d, f"bad{i}.json")
        write(p, text)
        r = cli("run", "--job", p)
        lines = nstest.error_lines(r.stderr)
        check_eq(r.returncode, 2, f"exit status of bad job file {i} ({want})")
        check(len(lines) == 1 and want in lines[0] and f"bad{i}.json" in
              lines[0], f"bad job file {i}: want one line with {want!r} and "
              f"the file name, got {lines}")
    r = cli("run", "--job", os.path.join(d, "missing.json"))
    check(r.returncode == 1 and "missing.json" in r.stderr,
          f"a missing job file: {r.returncode} {r.stderr!r}")
    log(f"{len(bad)} bad job files refused with the key at fault")

    # a pipeline whose first step takes one file as two buffers, and whose
    # second step reads that file again beside the intermediate: one job
    # (the steps' entries in --json), y = (x + x) * x
    write(os.path.join(d, "two.cl"), """
kernel void add(global const float *a, global const float *b,
                global float *h)
{ size_t i = get_global_id(0); h[i] = a[i] + b[i]; }
kernel void mul(global const float *h, global const float *a,
                global float *y)
{ size_t i = get_global_id(0); y[i] = h[i] * a[i]; }
""")
    write(os.path.join(d, "two.json"), """{
  "source": "two.cl",
  "buffers": {"a": {"file": "x.bin"}, "b": {"file": "x.bin"},
              "h": {"bytes": %d}, "y": {"bytes": %d, "out": "two.bin"}},
  "steps": [{"entry": "add", "global": [%d], "args": ["a", "b", "h"]},
            {"entry": "mul", "global": [%d], "args": ["h", "a", "y"]}]
}""" % (4 * n, 4 * n, n, n))
    r = cli("run", "--job", os.path.join(d, "two.json"), "--json",
            timeout=120)
    check(r.returncode == 0, f"the pipeline failed: {r.stderr.strip()}")
    doc = json.loads(r.stdout)
    check_eq(doc.get("steps"), ["add", "mul"], "the pipeline's steps")
    x = struct.unpack(f"{n}f", struct.pack(f"{n}f",
                                           *[i * 0.25 for i in range(n)]))
    want = struct.pack(f"{n}f", *[(v + v) * v for v in x])
    with open(os.path.join(d, "two.bin"), "rb") as f:
        check(f.read() == want, "the pipeline's y is not (x + x) * x")
    log("a pipeline reading one file as two buffers: one job, right output")


nstest.main(test, "jobfile")
