#!/usr/bin/env python3
"""The rough edges a first-time operator hit (issue 12), on a 2-node
testnet made by testnet/run.sh:

  * --flag=VALUE everywhere; a default datadir (NIGHTSHIFT_DATADIR, then
    $XDG_DATA_HOME/nightshift); `config` shows each setting, its default
    and its source.
  * init/id hand out ID@advertise; a wildcard listen gets a note.
  * genesis without --alloc is refused (2); genesis --json works.
  * submit on a missing datadir says it does not exist; stake --to is a
    usage error; an unstake beyond the stake names the stake.
  * 10-character short ids work as arguments when they match one known
    account; an unknown one is a clear usage error.
  * balance before the requester's first submit shows its genesis credits.
  * devices says whether its figures are fresh or cached, and when.
  * a light peer is listed by `peers` as a requester, with no price.
  * Ctrl-C (SIGINT) makes submit exit 130; progress lines appear once on a
    terminal.
  * <datadir>/jobs/ is pruned: finished jobs after the retention period
    or over the size cap, never a job still open; other files stay.
  * run.sh on a stopped testnet keeps its node logs and the user's files.
"""
import json
import os
import pty
import select
import signal
import struct
import subprocess
import time

import nstest
from nstest import check, check_eq, cli, log

N = 2
DAY_S = 86400


def script(name, *args, timeout=90):
    env = {**os.environ, "NIGHTSHIFT_BIN": nstest.BIN}
    return subprocess.run([os.path.join(nstest.REPO, "testnet", name),
                           *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env, stdin=subprocess.DEVNULL)


def one_error(r, what, code, *needles):
    check_eq(r.returncode, code, f"{what}: exit status (stderr "
                                 f"{r.stderr.strip()!r})")
    lines = nstest.error_lines(r.stderr)
    check(len(lines) == 1, f"{what}: expected one error line, got "
                           f"{r.stderr!r}")
    for n in needles:
        check(n.lower() in lines[0].lower(),
              f"{what}: error does not mention {n!r}: {lines[0]!r}")


def env_with(**kv):
    env = {k: v for k, v in os.environ.items()
           if k not in ("NIGHTSHIFT_DATADIR", "XDG_DATA_HOME")}
    env.update(kv)
    return env


def check_conventions(net, tn):
    d = os.path.join(net.dir, "eq")
    r = cli(f"--datadir={d}", "init")  # a subcommand must come first
    check(r.returncode != 0, "`nightshift --datadir=D init` was accepted")
    nstest.cli_ok("init", f"--datadir={d}", "--listen=tcp://127.0.0.1:0",
                  "--set=node.region=eu-west")
    ident = nstest.cli_ok("id", f"--datadir={d}").splitlines()[0]
    check_eq(len(ident), 52, "id length after init --datadir=D")

    # NIGHTSHIFT_DATADIR, then XDG_DATA_HOME/nightshift.
    r = cli("id", env=env_with(NIGHTSHIFT_DATADIR=d))
    check(r.returncode == 0 and r.stdout.startswith(ident),
          f"id with NIGHTSHIFT_DATADIR: {r.returncode} {r.stderr!r}")
    node0 = os.path.join(tn, "node0")
    for cmd in ("status", "peers", "jobs", "balance", "ledger"):
        r = cli(cmd, "--json", env=env_with(NIGHTSHIFT_DATADIR=node0))
        check(r.returncode == 0 and r.stdout.lstrip()[:1] in "{[",
              f"`{cmd} --json` with NIGHTSHIFT_DATADIR: {r.returncode} "
              f"{r.stderr.strip()!r}")
    xdg = os.path.join(net.dir, "xdg")
    r = cli("id", env=env_with(XDG_DATA_HOME=xdg))
    one_error(r, "id with no datadir anywhere", 2, "does not exist",
              os.path.join(xdg, "nightshift"))
    r = cli("init", "--listen", "tcp://127.0.0.1:0",
            env=env_with(XDG_DATA_HOME=xdg))
    check(r.returncode == 0 and os.path.isfile(
        os.path.join(xdg, "nightshift", "node.key")),
        f"init without --datadir did not make $XDG_DATA_HOME/nightshift: "
        f"{r.stderr!r}")
    check("datadir  " + os.path.join(xdg, "nightshift") in r.stdout,
          f"init does not name the default datadir: {r.stdout!r}")
    nstest.cli_ok("id", "--datadir", os.path.join(xdg, "nightshift"))

    # config: every setting, its default and where it came from.
    r = cli("config", f"--datadir={d}", "--set=log.level=debug", "--json")
    check_eq(r.returncode, 0, f"config --json exit ({r.stderr.strip()})")
    doc = json.loads(r.stdout)
    by = {f"{s['section']}.{s['key']}": s for s in doc["settings"]}
    for key in ("node.listen", "node.advertise", "node.price", "node.slots",
                "log.level", "jobs.retention_days", "jobs.max_bytes",
                "ledger.map_size"):
        check(key in by, f"config lists no {key}: {sorted(by)}")
    check_eq((by["node.region"]["value"], by["node.region"]["source"],
              by["node.region"]["default"]),
             ("eu-west", "config.ini", "local"), "node.region in config")
    check_eq((by["log.level"]["value"], by["log.level"]["source"]),
             ("debug", "flag"), "log.level in config")
    check_eq((by["node.price"]["value"], by["node.price"]["source"]),
             (by["node.price"]["default"], "default"), "node.price")
    check_eq(by["jobs.retention_days"]["default"], "7",
             "jobs.retention_days default")
    text = nstest.cli_ok("config", "--datadir", d)
    check("SOURCE" in text and "node.region" in text and
          "eu-west" in text, f"config table: {text[:300]!r}")
    log("--flag=VALUE, default datadirs and config checked")


def check_addresses(net):
    adv = os.path.join(net.dir, "adv")
    r = cli("init", "--datadir", adv, "--listen", "tcp://0.0.0.0:0",
            "--set", "node.advertise=tcp://192.0.2.7:7946", "--json")
    check_eq(r.returncode, 0, f"init with advertise ({r.stderr.strip()})")
    doc = json.loads(r.stdout)
    check(doc["address"].endswith("@tcp://192.0.2.7:7946"),
          f"init hands out {doc['address']!r}, not the advertise address")
    check("note" not in doc, f"a note with advertise set: {doc}")
    out = nstest.cli_ok("id", "--datadir", adv).splitlines()
    check(out[1].endswith("@tcp://192.0.2.7:7946"),
          f"id hands out {out[1]!r}, not the advertise address")
    wild = os.path.join(net.dir, "wild")
    r = cli("init", "--datadir", wild, "--listen", "tcp://0.0.0.0:0")
    check(r.returncode == 0 and "0.0.0.0" in r.stdout and
          "advertise" in r.stdout.split("note", 1)[-1],
          f"init on 0.0.0.0 without advertise gives no note: {r.stdout!r}")
    r = cli("id", "--datadir", wild)
    check(r.returncode == 0 and "advertise" in r.stderr and
          len(r.stdout.splitlines()) == 2,
          f"id on 0.0.0.0: stdout {r.stdout!r} stderr {r.stderr!r}")
    log("init/id addresses checked")


def check_small_ones(net, tn, ids):
    node0 = os.path.join(tn, "node0")
    req = os.path.join(tn, "requester")
    g = os.path.join(net.dir, "g.ini")
    one_error(cli("genesis", "--out", g), "genesis without --alloc", 2,
              "--alloc")
    check(not os.path.exists(g), "genesis without --alloc wrote a file")
    r = cli("genesis", "--out", g, "--alloc", f"{ids['node0']}=5", "--json")
    check_eq(r.returncode, 0, f"genesis --json ({r.stderr.strip()})")
    doc = json.loads(r.stdout)
    check_eq((doc["accounts"], doc["total"], len(doc["network_id"])),
             (1, 5, 64), "genesis --json")

    missing = os.path.join(net.dir, "no-such-datadir")
    one_error(cli(*submit_args(net, missing, f"{ids['node0']}@tcp://"
                                             f"127.0.0.1:1",
                               os.path.join(net.dir, "never.out"))),
              "submit on a missing datadir", 2, "does not exist", missing)
    check(not os.path.exists(missing), "submit made the missing datadir")
    one_error(cli("stake", "--datadir", node0, "--to", ids["node1"], "5"),
              "stake --to", 2, "--to", "transfer only")
    one_error(cli("unstake", "--datadir", node0, "500001"),
              "unstake beyond the stake", 1, "only 500000 credits are staked",
              "0 locked as collateral")

    # Short ids.
    short = ids["node1"][:10]
    r = cli("balance", "--datadir", node0, short, "--json")
    check_eq(r.returncode, 0, f"balance SHORT ({r.stderr.strip()})")
    check_eq(json.loads(r.stdout)["id"], ids["node1"], "balance SHORT's id")
    r = cli("transfer", "--datadir", node0, "--to", ids["requester"][:10],
            "3", "--json")
    check_eq(r.returncode, 0, f"transfer --to SHORT ({r.stderr.strip()})")
    r = cli("ledger", "--datadir", node0, "--author", ids["node0"][:10],
            "--json")
    check_eq(r.returncode, 0, f"ledger --author SHORT ({r.stderr.strip()})")
    check(all(e["author"] == ids["node0"] for e in json.loads(r.stdout)
              ["list"]), "ledger --author SHORT lists other authors")
    nobody = "a" * 10 if not any(i.startswith("a" * 10)
                                 for i in ids.values()) else "b" * 10
    one_error(cli("balance", "--datadir", node0, nobody), "balance of an "
              "unknown short id", 2, "unknown")
    one_error(cli("transfer", "--datadir", node0, "--to", nobody, "1"),
              "transfer to an unknown short id", 2, "unknown")

    # Two accounts whose ids share their first 10 characters (the second
    # is the first with a middle character changed: still a valid id).
    x = ids["node1"]
    twin = x[:20] + ("a" if x[20] != "a" else "b") + x[21:]
    amb = os.path.join(net.dir, "amb")
    nstest.cli_ok("init", "--datadir", amb, "--listen", "tcp://127.0.0.1:0")
    ga = os.path.join(net.dir, "amb.ini")
    nstest.cli_ok("genesis", "--out", ga, "--alloc", f"{x}=1", "--alloc",
                  f"{twin}=2")
    nstest.cli_ok("init", "--datadir", amb, "--genesis", ga)
    one_error(cli("balance", "--datadir", amb, x[:10]), "balance of an "
              "ambiguous short id", 2, "ambiguous")
    r = cli("balance", "--datadir", amb, twin, "--json")
    check(r.returncode == 0 and json.loads(r.stdout)["free"] == 2,
          f"balance of the twin by its whole id: {r.stdout!r} {r.stderr!r}")

    # The requester before its first submit: its genesis allocation.
    r = cli("balance", "--datadir", req, "--json")
    check_eq(r.returncode, 0, f"requester balance before its first submit "
                              f"({r.stderr.strip()})")
    doc = json.loads(r.stdout)
    check_eq((doc["free"], doc["genesis_view"]), (1000000, True),
             "requester's balance before its first submit")

    # devices: fresh, then cached, and when.
    dd = os.path.join(net.dir, "dev")
    os.makedirs(dd)
    r = cli("devices", "--datadir", dd, "--json", timeout=120)
    if r.returncode != 0 or not json.loads(r.stdout) or \
            json.loads(r.stdout)[0]["gflops"] is None:
        log(f"devices: no device measured here, figures' source not "
            f"checked ({r.stderr.strip()})")
    elif True:
        first = json.loads(r.stdout)[0]
        if first["gflops"] is not None:
            check_eq(first["bench"], "measured", "first devices run")
            check(first["measured_at_ms"] > 0, f"no measured_at_ms: {first}")
            r = cli("devices", "--datadir", dd, timeout=120)
            check(r.returncode == 0 and "FIGURES" in r.stdout and
                  "cached, " in r.stdout and " ago" in r.stdout,
                  f"devices table does not say cached: {r.stdout!r}")
            again = json.loads(nstest.cli_ok("devices", "--datadir", dd,
                                             "--json", timeout=120))[0]
            check_eq((again["bench"], again["measured_at_ms"]),
                     ("cached", first["measured_at_ms"]),
                     "cached devices figures and their time")
    log("genesis, submit, stake, unstake, short ids, balance and devices "
        "checked")


def write_floats(path, n):
    with open(path, "wb") as f:
        f.write(struct.pack(f"{n}f", *([1.5] * n)))


def submit_args(net, req, boot, out):
    n = 1024
    a = os.path.join(net.dir, "a.bin")
    write_floats(a, n)
    return ["submit", "--datadir", req, "--bootstrap", boot, "--builtin",
            "vector_add", "--global", str(n), "--arg", f"in:{a}", "--arg",
            f"in:{a}", "--arg", f"out:{4 * n}:{out}", "--arg", f"u32:{n}",
            "--max-price", "10", "--json"]


def submit_ok(net, req, boot, name):
    r = cli(*submit_args(net, req, boot, os.path.join(net.dir, name)),
            timeout=120)
    check_eq(r.returncode, 0, f"submit {name} ({r.stderr.strip()})")
    doc = json.loads(r.stdout)
    check_eq(doc["status"], "settled", f"submit {name}")
    return doc["job"]


def age(path, days):
    t = time.time() - days * DAY_S
    for f in [path] + [os.path.join(path, x) for x in os.listdir(path)]:
        os.utime(f, (t, t))


def fake_jobdir(jobs, hexid, days):
    p = os.path.join(jobs, hexid)
    os.makedirs(p)
    with open(os.path.join(p, "job.msgpack"), "wb") as f:
        f.write(b"\x80")
    age(p, days)
    return p


def interrupted_submit(net, tn, req, boot, ids):
    """A slow job on a pseudo-terminal: the requester shows as a requester
    in node0's peers while it runs, every progress line comes once, and
    SIGINT once the job is accepted makes submit exit 130."""
    kernel = os.path.join(net.dir, "spin.cl")
    with open(kernel, "w") as f:
        f.write("__kernel void spin(__global float *out, uint n)\n{\n"
                "    float acc = (float)get_global_id(0);\n"
                "    for (uint k = 0; k < n; k++)\n"
                "        acc = acc * 0.9999999f + 1.0f;\n"
                "    out[get_global_id(0)] = acc;\n}\n")
    args = [nstest.BIN, "submit", "--datadir", req, "--bootstrap", boot,
            "--kernel", kernel, "--entry", "spin", "--global", "256",
            "--local", "1", "--arg",
            f"out:1024:{os.path.join(net.dir, 'spin.bin')}",
            "--arg", "u32:20000000", "--max-price", "100",
            "--timeout-s", "300"]
    master, slave = pty.openpty()
    p = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave,
                         preexec_fn=nstest._die_with_parent)
    os.close(slave)
    net.procs.append(p)
    out = b""
    role_seen = None
    sent = False
    deadline = time.monotonic() + 100
    while time.monotonic() < deadline:
        rl, _, _ = select.select([master], [], [], 0.2)
        if rl:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        if role_seen is None and b"joined" in out:
            r = cli("peers", "--datadir", os.path.join(tn, "node0"),
                    "--json")
            if r.returncode == 0:
                for peer in json.loads(r.stdout):
                    if peer["id"] == ids["requester"]:
                        role_seen = peer.get("role", "(none)")
                        table = nstest.cli_ok("peers", "--datadir",
                                              os.path.join(tn, "node0"))
                        row = [l for l in table.splitlines()
                               if l.startswith(ids["requester"][:10])]
                        check(len(row) == 1 and " requester " in row[0] and
                              " none " in row[0] and "1000" not in row[0],
                              f"the requester's peers row: {row}")
        if not sent and b"accepted:" in out:
            p.send_signal(signal.SIGINT)
            sent = True
        if p.poll() is not None and not rl:
            break
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        raise nstest.TestFailure(f"submit did not end after SIGINT: "
                                 f"{out.decode(errors='replace')[-500:]}")
    os.close(master)
    text = out.decode(errors="replace")
    check(sent, f"the slow job was never accepted: {text[-800:]}")
    check_eq(role_seen, "requester", "the light peer's role in node0's "
                                     "peers --json")
    check_eq(p.returncode, 130, f"submit's exit status after SIGINT "
                                f"(output {text[-600:]!r})")
    check("interrupted" in text, f"no word of the interruption: "
                                 f"{text[-400:]!r}")
    progress = [l for l in text.splitlines() if l.startswith("[")]
    bodies = [l.split("] ", 1)[1] for l in progress if "] " in l]
    dups = {b for b in bodies if bodies.count(b) > 1}
    check(not dups, f"progress lines printed more than once on a terminal: "
                    f"{sorted(dups)}")
    check(len(bodies) >= 4, f"too few progress lines: {progress}")
    job = [l for l in progress if "] job " in l][0].split("] job ")[1][:16]
    log(f"SIGINT -> 130 after {len(bodies)} progress lines, each once; "
        f"the requester listed as {role_seen}")
    return job


def job_dirs(req):
    jobs = os.path.join(req, "jobs")
    return set(os.listdir(jobs)) if os.path.isdir(jobs) else set()


def check_prune(net, tn, boot, ids):
    req = os.path.join(tn, "requester")
    jobs = os.path.join(req, "jobs")
    a = submit_ok(net, req, boot, "a.out")
    check(a in job_dirs(req), "no job directory for a settled job")
    age(os.path.join(jobs, a), 8)
    unposted_old = fake_jobdir(jobs, "1" * 64, 8)
    unposted_new = fake_jobdir(jobs, "2" * 64, 0)
    notes = os.path.join(jobs, "notes")
    os.makedirs(notes)
    age(notes, 30)

    # The next submit's light peer prunes when it opens.
    b = submit_ok(net, req, boot, "b.out")
    left = job_dirs(req)
    check(a not in left, "a settled job older than 7 days was kept")
    check(os.path.basename(unposted_old) not in left,
          "a never-posted job older than 7 days was kept")
    check({os.path.basename(unposted_new), "notes", b} <= left,
          f"pruned too much: {sorted(left)}")

    c = interrupted_submit(net, tn, req, boot, ids)
    c_dirs = [d for d in job_dirs(req) if d.startswith(c)]
    check_eq(len(c_dirs), 1, f"the interrupted job's directory ({c})")
    led = json.loads(nstest.cli_ok("ledger", "--datadir", req, "--author",
                                   ids["requester"], "--json", "--limit",
                                   "1000"))
    c_closed = any(e["type"] in ("cancel", "settle") and c in e["summary"]
                   for e in led["list"])

    # A size cap of 1 byte: every finished job goes whatever its age, an
    # open one stays.
    nstest.cli_ok("init", "--datadir", req, "--set", "jobs.max_bytes=1")
    d = submit_ok(net, req, boot, "d.out")
    left = job_dirs(req)
    check(b not in left, "a settled job over the size cap was kept")
    check(d in left, "the job just submitted was pruned")
    check({os.path.basename(unposted_new), "notes"} <= left,
          f"the cap pruned a never-posted fresh job or a foreign dir: "
          f"{sorted(left)}")
    check((c_dirs[0] in left) != c_closed,
          f"the interrupted job (closed in the ledger: {c_closed}) was "
          f"{'kept' if c_dirs[0] in left else 'pruned'}")
    log(f"job directories pruned by age and size; the interrupted job "
        f"({'closed' if c_closed else 'open'}) handled accordingly")


def check_run_sh_again(tn, base):
    r = script("stop.sh", "-d", tn, timeout=60)
    check_eq(r.returncode, 0, f"stop.sh ({r.stderr.strip()})")
    with open(os.path.join(tn, "node0", "node.log")) as f:
        old_log = f.read()
    mine = os.path.join(tn, "my-datadir")
    os.makedirs(mine)
    with open(os.path.join(mine, "keep.txt"), "w") as f:
        f.write("mine")
    r = script("run.sh", "-n", N, "-d", tn, "-p", base, "-i", 500, "-t", 60)
    check(r.returncode == 0, f"run.sh on a stopped testnet with a "
                             f"directory of the user's: {r.stdout}\n"
                             f"{r.stderr}")
    check(os.path.isfile(os.path.join(mine, "keep.txt")),
          "run.sh removed the user's directory")
    logs = os.path.join(tn, "logs")
    kept = [os.path.join(logs, s, "node0.log") for s in os.listdir(logs)]
    check(len(kept) == 1 and open(kept[0]).read() == old_log,
          f"the stopped testnet's node0 log was not kept: {kept}")
    log("run.sh keeps the old logs and the user's files")


def test(net):
    tn = os.path.join(net.dir, "tn")
    base, port_lock = nstest.reserve_ports(N)
    net.at_exit(port_lock.close)
    net.at_exit(lambda: script("stop.sh", "-d", tn, timeout=30))
    r = script("run.sh", "-n", N, "-d", tn, "-p", base, "-i", 500, "-t", 60)
    check(r.returncode == 0, f"run.sh: {r.stdout}\n{r.stderr}")
    with open(os.path.join(tn, "bootstrap")) as f:
        boot = f.read().strip()
    ids = {name: nstest.cli_ok("id", "--datadir",
                               os.path.join(tn, name)).splitlines()[0]
           for name in ("node0", "node1", "requester")}
    check_conventions(net, tn)
    check_addresses(net)
    check_small_ones(net, tn, ids)
    check_prune(net, tn, boot, ids)
    check_run_sh_again(tn, base)


nstest.main(test, "first_use")
