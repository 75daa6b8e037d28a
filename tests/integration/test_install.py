#!/usr/bin/env python3
"""`cmake --install` into a temporary prefix (and with DESTDIR) puts the
binary, a man page per command, bash completion and the systemd unit with
its sysusers.d/tmpfiles.d files in their places, and the INSTALLED binary
works away from the source and build trees: version, init a datadir, run a
built-in kernel (kernels are embedded), start a node the way the unit
does (NIGHTSHIFT_DATADIR, no --datadir) and query `status --json`.

The man pages render with `man -l` without warnings (when man is
installed), each carries its command's --help text, the completion file
parses (`bash -n`) and completes commands and flags, and the unit passes
`systemd-analyze verify` (when systemd-analyze is there)."""
import json
import os
import re
import shutil
import signal
import struct
import subprocess

import nstest
from nstest import check, check_eq, log

BUILD = os.environ.get("NS_BUILD_DIR") or os.path.join(nstest.REPO, "build")


def run(args, env=None, cwd=None, timeout=120):
    return subprocess.run(args, capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=timeout, stdin=subprocess.DEVNULL)


def install(prefix, destdir=None):
    env = dict(os.environ)
    if destdir:
        env["DESTDIR"] = destdir
    r = run(["cmake", "--install", BUILD, "--prefix", prefix], env=env)
    check(r.returncode == 0, f"cmake --install failed: {r.stderr[-2000:]}")


def check_man(root, cmds, bin_path):
    man_dir = os.path.join(root, "share", "man", "man1")
    pages = sorted(os.listdir(man_dir))
    want = ["nightshift.1"] + [f"nightshift-{c}.1" for c in cmds]
    check(set(want) <= set(pages), f"man pages missing: "
                                   f"{sorted(set(want) - set(pages))}")
    have_man = shutil.which("man") is not None
    for c in cmds:
        path = os.path.join(man_dir, f"nightshift-{c}.1")
        with open(path) as f:
            src = f.read()
        check(src.startswith(".\\\"") and "\n.TH NIGHTSHIFT-" in src
              and "\n.SH NAME\n" in src and "\n.SH SYNOPSIS\n" in src,
              f"{path}: not a man page: {src[:200]!r}")
        if not have_man:
            continue
        r = run(["man", "--warnings", "-l", path],
                env={**os.environ, "MANWIDTH": "100", "MAN_KEEP_FORMATTING":
                     "0", "LC_ALL": "C.UTF-8", "MANPAGER": "cat",
                     "PAGER": "cat"})
        check(r.returncode == 0 and r.stderr.strip() == "",
              f"man -l {path}: {r.returncode} {r.stderr.strip()[:500]}")
        # the page says what --help says: each line of the help appears
        # in the rendered page (whitespace aside)
        help_text = run([bin_path, c, "--help"]).stdout
        page = " ".join(r.stdout.split())
        for line in help_text.splitlines():
            words = " ".join(line.replace("usage: ", "").split())
            check(words in page, f"nightshift-{c}(1) lacks the --help line "
                                 f"{line!r}")
    if not have_man:
        log("man not installed: pages checked for form only")
    return pages


def complete(comp_file, words):
    """What the completion offers for COMP_WORDS=words (the last being
    completed)."""
    script = (f"source {comp_file}\n"
              f"COMP_WORDS=({' '.join(repr(w) for w in words)})\n"
              f"COMP_CWORD={len(words) - 1}\n"
              "_nightshift\n"
              'printf "%s\\n" "${COMPREPLY[@]}"\n')
    r = run(["bash", "--norc", "-c", script])
    check(r.returncode == 0, f"completion of {words}: {r.stderr}")
    return set(r.stdout.split())


def check_completion(root, cmds):
    path = os.path.join(root, "share", "bash-completion", "completions",
                        "nightshift")
    check(os.path.isfile(path), f"no bash completion at {path}")
    r = run(["bash", "-n", path])
    check(r.returncode == 0, f"bash -n {path}: {r.stderr}")
    got = complete(path, ["nightshift", ""])
    check(set(cmds) <= got, f"commands completed: {sorted(got)}")
    check_eq(complete(path, ["nightshift", "ver"]), {"version"},
             "completion of 'ver'")
    got = complete(path, ["nightshift", "node", "--"])
    check({"--datadir", "--bootstrap", "--set", "--log-level",
           "--help"} <= got, f"node flags completed: {sorted(got)}")
    got = complete(path, ["nightshift", "submit", "--max"])
    check_eq(got, {"--max-price"}, "completion of submit --max")
    check_eq(complete(path, ["nightshift", "help", "sta"]),
             {"stake", "status"}, "completion of help sta")


def check_unit(root, bin_path):
    unit = os.path.join(root, "lib", "systemd", "system", "nightshift.service")
    with open(unit) as f:
        text = f.read()
    check(f"ExecStart={bin_path} node" in text,
          f"the unit does not start the installed binary {bin_path}")
    for want in ("User=nightshift", "StateDirectory=nightshift",
                 "Environment=NIGHTSHIFT_DATADIR=/var/lib/nightshift",
                 "NoNewPrivileges=yes", "ProtectSystem=strict",
                 "ProtectHome=yes", "PrivateTmp=yes",
                 "ExecReload=/bin/kill -HUP $MAINPID"):
        check(f"\n{want}\n" in text, f"the unit lacks {want}")
    for d, f in (("sysusers.d", "u nightshift "),
                 ("tmpfiles.d", "d /var/lib/nightshift 0700 nightshift")):
        with open(os.path.join(root, "lib", d, "nightshift.conf")) as fh:
            check(f in fh.read(), f"lib/{d}/nightshift.conf lacks {f!r}")
    if shutil.which("systemd-analyze"):
        r = run(["systemd-analyze", "verify", unit],
                env={**os.environ,
                     "MANPATH": os.path.join(root, "share", "man")})
        check(r.returncode == 0 and r.stderr.strip() == "",
              f"systemd-analyze verify: {r.returncode} {r.stderr.strip()}")
        log("systemd-analyze verify: clean")
    else:
        log("systemd-analyze not installed: unit checked by its text only")


def test(net):
    check(os.path.isfile(os.path.join(BUILD, "cmake_install.cmake")),
          f"no build tree at {BUILD} (set NS_BUILD_DIR)")
    if not shutil.which("cmake"):
        raise nstest.Skip("cmake is not on PATH")
    # -- DESTDIR: files land under DESTDIR/PREFIX, the unit names PREFIX
    stage = os.path.join(net.dir, "stage")
    install("/usr", destdir=stage)
    root = os.path.join(stage, "usr")
    check(os.access(os.path.join(root, "bin", "nightshift"), os.X_OK),
          "DESTDIR install: no usr/bin/nightshift")
    with open(os.path.join(root, "lib/systemd/system/nightshift.service")) as f:
        check("ExecStart=/usr/bin/nightshift node" in f.read(),
              "DESTDIR install: the unit does not name /usr/bin/nightshift")

    # -- --prefix P: the rest of the test uses this one
    prefix = os.path.join(net.dir, "prefix")
    install(prefix)
    bin_path = os.path.join(prefix, "bin", "nightshift")
    check_eq(sorted(os.listdir(os.path.join(prefix, "bin"))), ["nightshift"],
             "installed programs")
    nstest.BIN = bin_path  # every cli() below runs the installed binary
    away = os.path.join(net.dir, "elsewhere")  # neither source nor build
    os.makedirs(away)

    built = json.loads(run([os.path.join(BUILD, "nightshift"), "version",
                            "--json"]).stdout)
    r = run([bin_path, "version", "--json"], cwd=away)
    check_eq(r.returncode, 0, "installed `version` exit status")
    v = json.loads(r.stdout)
    check_eq((v["version"], v["revision"]), (built["version"],
                                             built["revision"]),
             "installed version and revision")
    log(f"installed: {bin_path} {v['version']} {v['revision']}")

    top = run([bin_path, "help"]).stdout
    cmds = [c for c in re.findall(r"^  (\w+) ", top.split("commands:", 1)[1],
                                  re.M) if c != "help"]
    pages = check_man(prefix, cmds, bin_path)
    log(f"{len(pages)} man pages render and match --help")
    check_completion(prefix, cmds)
    log("bash completion parses and completes commands and flags")
    check_unit(prefix, bin_path)

    # -- the installed binary runs a built-in kernel (embedded kernels)
    dev = run([bin_path, "devices", "--json", "--no-bench"], cwd=away)
    if dev.returncode == 0 and json.loads(dev.stdout):
        n = 256
        a, b = os.path.join(away, "a.bin"), os.path.join(away, "b.bin")
        with open(a, "wb") as f:
            f.write(struct.pack(f"<{n}f", *range(n)))
        with open(b, "wb") as f:
            f.write(struct.pack(f"<{n}f", *[2.0] * n))
        c = os.path.join(away, "c.bin")
        r = run([bin_path, "run", "--builtin", "vector_add", "--global",
                 str(n), "--arg", f"in:{a}", "--arg", f"in:{b}", "--arg",
                 f"out:{4 * n}:{c}", "--arg", f"u32:{n}"], cwd=away,
                env={**os.environ, "NIGHTSHIFT_CACHE":
                     os.path.join(net.dir, "cache")})
        check(r.returncode == 0, f"installed `run --builtin vector_add`: "
                                 f"{r.returncode} {r.stderr.strip()}")
        with open(c, "rb") as f:
            out = struct.unpack(f"<{n}f", f.read())
        check(out == tuple(i + 2.0 for i in range(n)), "vector_add output")
        log("installed binary ran the built-in vector_add")
    else:
        log(f"no OpenCL device: built-in kernel not run ({dev.stderr.strip()})")

    # -- init and start a node as the unit does: NIGHTSHIFT_DATADIR only
    datadir = os.path.join(net.dir, "var-lib-nightshift")
    env = {**os.environ, "NIGHTSHIFT_DATADIR": datadir}
    r = run([bin_path, "init", "--listen", "tcp://127.0.0.1:0"], env=env,
            cwd=away)
    check(r.returncode == 0, f"installed init: {r.stderr.strip()}")
    node_id = run([bin_path, "id"], env=env).stdout.split()[0]
    genesis = os.path.join(net.dir, "genesis.ini")
    r = run([bin_path, "genesis", "--out", genesis, "--alloc",
             f"{node_id}=1000"], cwd=away)
    check(r.returncode == 0, f"installed genesis: {r.stderr.strip()}")
    r = run([bin_path, "init", "--genesis", genesis], env=env, cwd=away)
    check(r.returncode == 0, f"installed init --genesis: {r.stderr.strip()}")
    logf = open(os.path.join(net.dir, "installed-node.log"), "wb")
    proc = subprocess.Popen([bin_path, "node"], env=env, cwd=away,
                            stdin=subprocess.DEVNULL, stdout=logf,
                            stderr=subprocess.STDOUT,
                            preexec_fn=nstest._die_with_parent)
    logf.close()
    net.procs.append(proc)

    def up():
        check(proc.poll() is None, f"installed node exited {proc.returncode}")
        r = run([bin_path, "status", "--json"], env=env, timeout=20)
        return (r.returncode == 0, r.stdout or r.stderr.strip())
    nstest.wait_until(up, 30, "the installed node to answer status")
    st = json.loads(run([bin_path, "status", "--json"], env=env).stdout)
    check_eq(st.get("id"), node_id, "status --json id of the installed node")
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=15)
    check(rc in (0, 143), f"installed node exited {rc} on SIGTERM")
    log(f"installed node {node_id[:10]} started, answered status, stopped")


nstest.main(test, "install")
