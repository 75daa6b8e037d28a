#!/usr/bin/env python3
"""Rough edges of issue 12 that no other test covers, on two nodes:

  * `status` (human) shows the drops adding up to the total (the named
    reasons of --json, none hidden) and the ledger and provider sections;
  * `submit --max-price 0` is a usage error that says why (not
    "--max-price is required");
  * SIGHUP does not kill a node (without a log file it is a no-op: systemd's
    `reload` and a closed terminal used to stop it);
  * log.file: a setting relative to the datadir, `--log-file` relative to
    the working directory, as `config` shows and the node uses.
"""
import json
import os
import re
import signal
import time

import nstest
from nstest import check, check_eq, cli, log


def test(net):
    a, b = net.make_nodes(2)
    a.start()
    b.start(bootstrap=[a], extra=["--set", "log.file=logs-b.txt"])
    net.wait_mesh([a, b])

    # -- human status: drops add up; ledger and provider sections
    for n in (a, b):
        doc = n.status()
        r = cli("status", "--datadir", n.datadir)
        check_eq(r.returncode, 0, f"status on {n.name}")
        line = next((l for l in r.stdout.splitlines()
                     if l.startswith("dropped ")), None)
        check(line is not None, f"{n.name}: no dropped line: {r.stdout}")
        total = int(line.split()[1])
        named = {k: int(v) for k, v in re.findall(r" (\w+)=(\d+)", line)}
        check_eq(total, doc["dropped"]["total"], f"{n.name}: dropped total")
        check_eq(sum(named.values()), total,
                 f"{n.name}: the named drops {named} add up to the total")
        for section in ("ledger ", "provider "):
            check(any(l.startswith(section) for l in r.stdout.splitlines()),
                  f"{n.name}: human status has no {section.strip()} "
                  f"section:\n{r.stdout}")
    log("human status: drops add up; ledger and provider sections")

    # -- --max-price 0
    r = cli("submit", "--node", a.datadir, "--builtin", "vector_add",
            "--global", "4", "--arg", f"out:16:{os.path.join(net.dir, 'o')}",
            "--max-price", "0")
    lines = nstest.error_lines(r.stderr)
    check(r.returncode == 2 and len(lines) == 1 and
          "more than 0" in lines[0] and "required" not in lines[0],
          f"--max-price 0: {r.returncode} {r.stderr!r}")
    log(f"--max-price 0: {lines[0]}")

    # -- SIGHUP: the node lives (a log file or not)
    for n in (a, b):
        n.signal(signal.SIGHUP)
    time.sleep(0.5)
    for n in (a, b):
        check(n.running(), f"{n.name} died of SIGHUP: {n.log_tail(5)}")
        check_eq(n.status()["id"], n.id, f"{n.name} answers after SIGHUP")

    # -- log.file relative to the datadir; --log-file to the cwd
    b_file = os.path.join(b.datadir, "logs-b.txt")
    nstest.cli_ok("stake", "--datadir", b.datadir, "1")  # an event to log
    nstest.wait_until(lambda: "event=log_reopened" in
                      open(b_file).read(), 20,
                      "b to log its reopen into DATADIR/logs-b.txt")
    check("event=started" in open(b_file).read() and
          "event=stake amount=1 " in open(b_file).read() and
          "event=started" not in b.log_text(),
          "b's log.file does not hold its events")
    r = cli("config", "--datadir", b.datadir, "--json", "--log-file",
            "rel.log")
    check_eq(r.returncode, 0, "config --log-file")
    got = {s["section"] + "." + s["key"]: s for s in
           json.loads(r.stdout)["settings"]}["log.file"]
    check_eq((got["value"], got["source"]),
             (os.path.join(os.getcwd(), "rel.log"), "flag"),
             "config's log.file from --log-file")
    r = cli("config", "--datadir", b.datadir, "--json")
    got = {s["section"] + "." + s["key"]: s for s in
           json.loads(r.stdout)["settings"]}["log.file"]
    check_eq((got["value"], got["default"]), ("", ""),
             "log.file without a flag (the --set was not saved)")
    log("log.file: relative to the datadir; --log-file to the cwd")


nstest.main(test, "operator_cli")
