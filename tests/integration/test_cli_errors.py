#!/usr/bin/env python3
"""The command line fails cleanly: bad key files, unwritable datadirs, a
taken port, a second node on one datadir, queries with no node running,
unknown commands each give one error line on stderr and a non-zero exit;
--help works on every subcommand; SIGTERM/SIGINT stop a node with exit 0
and remove its control socket."""
import os
import re
import shutil
import signal
import socket
import subprocess
import time

import nstest
from nstest import check, check_eq, cli, log

# A line of the node's structured log (core/log.c), as opposed to the
# one-line message of ns_cli_error().
LOG_LINE = re.compile(r"^ts=\S+ level=\w+ mod=\w+ ")


def one_error(r, what, *needles, allow_log_lines=False):
    """r failed with exactly one error line on stderr containing every
    needle (case-insensitive). With allow_log_lines, structured log lines
    may come before it (a node that logs while failing)."""
    check(r.returncode != 0, f"{what}: exit status 0 (stderr: "
                             f"{r.stderr.strip()!r})")
    lines = nstest.error_lines(r.stderr)
    if allow_log_lines:
        lines = [l for l in lines if not LOG_LINE.match(l)]
    check(len(lines) == 1, f"{what}: expected one error line on stderr, "
                           f"got {len(lines)}: {r.stderr!r}")
    check(lines[0].startswith("nightshift"),
          f"{what}: error line does not name the program: {lines[0]!r}")
    for n in needles:
        check(n.lower() in lines[0].lower(),
              f"{what}: error line does not mention {n!r}: {lines[0]!r}")
    return lines[0]


def node_run(datadir, *extra, timeout=10):
    """Run `nightshift node` expecting it to fail fast; a node that starts
    after all is killed when the timeout expires and the test fails."""
    try:
        return cli("node", "--datadir", datadir, *extra, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise nstest.TestFailure(
            f"`nightshift node --datadir {datadir} {' '.join(extra)}` was "
            f"still running after {timeout}s instead of failing")


def test(net):
    # -- help, version, unknown commands -------------------------------
    r = cli("--help")
    check_eq(r.returncode, 0, "`nightshift --help` exit status")
    listed = re.findall(r"^  (\w+) ", r.stdout.split("commands:", 1)[1],
                        re.M)
    subcommands = sorted(set(listed) | {"init", "node", "id", "peers",
                                        "status", "genesis", "devices"})
    check(set(listed) >= {"init", "node", "id", "peers", "status",
                          "genesis", "devices"},
          f"`nightshift --help` lists {listed}")
    for cmd in subcommands:
        for flag in ("--help", "-h"):
            r = cli(cmd, flag)
            check(r.returncode == 0, f"`nightshift {cmd} {flag}` exited "
                                     f"{r.returncode}: {r.stderr.strip()}")
            check(r.stdout.startswith(f"usage: nightshift {cmd}"),
                  f"`nightshift {cmd} {flag}` prints no usage on stdout: "
                  f"{r.stdout[:80]!r}")
            check(r.stderr == "", f"`nightshift {cmd} {flag}` wrote to "
                                  f"stderr: {r.stderr!r}")
    log(f"--help works on {len(subcommands)} subcommands: {subcommands}")
    r = cli("--version")
    check(r.returncode == 0 and r.stdout.startswith("nightshift "),
          f"--version: {r.returncode} {r.stdout!r}")
    r = cli("frobnicate")
    check(r.returncode != 0, "an unknown subcommand exited 0")
    check("frobnicate" in r.stderr, f"unknown command not named: {r.stderr}")
    r = cli()
    check(r.returncode != 0, "`nightshift` without a command exited 0")
    r = cli("peers", "--datadir", net.dir, "--bogus")
    one_error(r, "peers with an unknown flag", "--bogus")
    r = cli("peers")
    one_error(r, "peers without --datadir", "--datadir")

    # -- a healthy pair of datadirs to break in different ways -----------
    good, spare = net.make_nodes(2)

    def fresh_copy(name):
        """A copy of `spare` (valid key, genesis, config) to damage."""
        d = os.path.join(net.dir, name)
        shutil.copytree(spare.datadir, d)
        return d

    # Missing key.
    d = fresh_copy("nokey")
    os.unlink(os.path.join(d, "node.key"))
    one_error(node_run(d), "node without node.key", "node.key", "not found")
    # Corrupt key (right mode, wrong content).
    d = fresh_copy("corrupt")
    with open(os.path.join(d, "node.key"), "w") as f:
        f.write("this is not a key\n")
    os.chmod(os.path.join(d, "node.key"), 0o600)
    one_error(node_run(d), "node with a corrupt node.key", "node.key",
              "corrupt")
    # Key readable by others: refused like ssh does.
    d = fresh_copy("open")
    os.chmod(os.path.join(d, "node.key"), 0o644)
    one_error(node_run(d), "node with node.key mode 0644", "node.key",
              "permission")
    one_error(cli("id", "--datadir", d), "id with node.key mode 0644",
              "permission")
    one_error(cli("init", "--datadir", d), "init over node.key mode 0644",
              "permission")
    check_eq(os.stat(os.path.join(d, "node.key")).st_mode & 0o777, 0o644,
             "mode of the refused key (init must not silently fix or "
             "replace it)")
    # A datadir that cannot be created or written (a path under a regular
    # file: fails even for root).
    blocker = os.path.join(net.dir, "a-file")
    open(blocker, "w").close()
    bad = os.path.join(blocker, "datadir")
    one_error(cli("init", "--datadir", bad), "init under a regular file", bad)
    one_error(node_run(bad), "node under a regular file", bad)
    check(not os.path.isdir(bad), "a datadir appeared under a file")
    # Missing genesis.
    d = fresh_copy("nogenesis")
    os.unlink(os.path.join(d, "genesis.ini"))
    one_error(node_run(d), "node without genesis.ini", "genesis")
    # Bad settings.
    one_error(node_run(spare.datadir, "--set", "node.no_such_key=1"),
              "node with an unknown --set key", "no_such_key")
    one_error(node_run(spare.datadir, "--listen", "udp://1.2.3.4"),
              "node with a bad --listen")

    # -- queries with no node running ---------------------------------------
    for q in ("peers", "status"):
        one_error(cli(q, "--datadir", good.datadir), f"{q} with no node",
                  "no node is running")

    # -- a port that is taken ----------------------------------------------------
    good.start()
    port = int(good.endpoint.rsplit(":", 1)[1])
    t = time.monotonic()
    r = node_run(spare.datadir, "--listen", f"tcp://127.0.0.1:{port}")
    line = one_error(r, "second node on a taken port", str(port),
                     "in use", allow_log_lines=True)
    extra = [l for l in nstest.error_lines(r.stderr) if LOG_LINE.match(l)]
    if extra:
        log(f"note: besides the error, stderr had {len(extra)} log "
            f"line(s): {extra}")
    log(f"taken port refused in {time.monotonic() - t:.2f}s: {line}")
    check(not os.path.exists(os.path.join(spare.datadir, "control.sock")),
          "the refused node left a control.sock")
    # A port held by something that is not a node.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    other_port = s.getsockname()[1]
    try:
        one_error(node_run(spare.datadir, "--listen",
                           f"tcp://127.0.0.1:{other_port}"),
                  "node on a port held by another program", "in use",
                  allow_log_lines=True)
    finally:
        s.close()

    # -- a second node on a running datadir ------------------------------------
    one_error(node_run(good.datadir, "--listen", "tcp://127.0.0.1:0"),
              "second node on the same datadir", "already running")
    check(good.running(), "the first node died when a second one tried its "
                          "datadir")
    check(good.status()["pid"] == good.pid, "status answered by another pid")

    # -- signals: clean exit 0, control socket removed ----------------------------
    ctl = os.path.join(good.datadir, "control.sock")
    check(os.path.exists(ctl), "a running node has no control.sock")
    for sig in (signal.SIGTERM, signal.SIGINT):
        if not good.running():
            good.start()
        t = time.monotonic()
        good.signal(sig)
        try:
            rc = good.proc.wait(timeout=10)
        except Exception:
            raise nstest.TestFailure(f"node still running 10s after "
                                     f"{sig.name}")
        check_eq(rc, 0, f"exit status after {sig.name}")
        check(not os.path.exists(ctl), f"control.sock left after {sig.name}")
        log(f"{sig.name}: exit 0 in {time.monotonic() - t:.2f}s, "
            f"control.sock removed")
    one_error(cli("status", "--datadir", good.datadir),
              "status after the node stopped", "no node is running")

    # -- a crashed node's leftover control.sock: a clear error, not a hang -----
    good.start()
    good.kill()
    check(os.path.exists(ctl), "SIGKILL removed control.sock (can't test the "
                               "stale case)")
    t = time.monotonic()
    r = cli("peers", "--datadir", good.datadir, timeout=30)
    one_error(r, "peers on a crashed node's datadir", "stale control.sock")
    took = time.monotonic() - t
    check(took < 2.0, f"stale control.sock took {took:.1f}s to report")
    log(f"stale control.sock reported in {took:.1f}s")
    # and the next node on that datadir starts fine over it
    good.start()
    check(good.status()["pid"] == good.pid, "restart over a stale socket")


nstest.main(test, "cli_errors")
