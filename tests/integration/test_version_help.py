#!/usr/bin/env python3
"""`nightshift version` names the version, the source revision and build
type baked in at build time, and the libraries loaded at run time;
`nightshift help CMD` prints exactly what `CMD --help` does, and `help`
alone lists the commands."""
import json
import os
import re
import subprocess

import nstest
from nstest import check, check_eq, cli, log


def test(net):
    r = cli("version")
    check_eq(r.returncode, 0, "`version` exit status")
    lines = r.stdout.splitlines()
    check(re.match(r"^nightshift \d+\.\d+\.\d+$", lines[0]),
          f"first line of `version`: {lines[0]!r}")
    r = cli("version", "--json")
    check_eq(r.returncode, 0, "`version --json` exit status")
    v = json.loads(r.stdout)
    check(lines[0] == f"nightshift {v['version']}",
          f"text and json versions differ: {lines[0]!r} {v['version']!r}")
    want_type = os.environ.get("NS_BUILD_TYPE")
    if want_type:
        check_eq(v["build_type"], want_type, "build type")
    # the revision is a commit of this checkout: HEAD, or one before it
    # when commits were made after the build
    rev = v["revision"]
    check(re.match(r"^([0-9a-f]{12}(-dirty)?|unknown)$", rev),
          f"revision {rev!r}")
    git = subprocess.run(["git", "-C", nstest.REPO, "rev-parse", "HEAD"],
                         capture_output=True, text=True)
    if git.returncode == 0:
        r = subprocess.run(["git", "-C", nstest.REPO, "merge-base",
                            "--is-ancestor", rev.split("-")[0], "HEAD"],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"revision {rev!r} is not HEAD "
                                 f"({git.stdout.strip()[:12]}) or before it")
    else:
        log("not a git checkout: revision not compared")
    libs = v["libraries"]
    for name in ("libzmq", "libsodium", "lmdb", "msgpack-c", "opencl-icd"):
        check(re.match(r"^\d+\.\d+", libs.get(name, "")),
              f"library {name}: {libs.get(name)!r}")
    log(f"version: {v['version']} {v['revision']} {v['build_type']} {libs}")
    r = cli("--version")
    check(r.returncode == 0 and r.stdout.startswith(
        f"nightshift {v['version']} ({v['revision']}, "), f"--version: "
          f"{r.stdout!r}")
    r = cli("version", "--bogus")
    check(r.returncode == 2 and "--bogus" in r.stderr,
          f"version --bogus: {r.returncode} {r.stderr!r}")

    # help alone, help CMD, help with an unknown command
    r = cli("help")
    check_eq(r.returncode, 0, "`help` exit status")
    check_eq(r.stdout, cli("--help").stdout, "`help` and `--help`")
    cmds = re.findall(r"^  (\w+) ", r.stdout.split("commands:", 1)[1], re.M)
    check({"init", "node", "version", "help", "config"} <= set(cmds),
          f"`help` lists {cmds}")
    for c in cmds:
        h = cli("help", c)
        d = cli(c, "--help")
        check_eq(h.returncode, 0, f"`help {c}` exit status")
        check(h.stdout == d.stdout and h.stdout.startswith(
            f"usage: nightshift {c}"), f"`help {c}` is not `{c} --help`: "
              f"{h.stdout[:80]!r} vs {d.stdout[:80]!r}")
    r = cli("help", "frobnicate")
    check(r.returncode == 2 and "frobnicate" in r.stderr,
          f"help frobnicate: {r.returncode} {r.stderr!r}")
    log(f"help CMD == CMD --help for {len(cmds)} commands")


nstest.main(test, "version_help")
