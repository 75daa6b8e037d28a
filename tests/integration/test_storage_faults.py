"""Storage faults never corrupt the ledger, on a real small filesystem.

Node s keeps its datadir on an 8 MiB tmpfs (mounted here: root only;
skipped with the reason elsewhere); node a is its healthy peer.

  * Disk full: a filler file takes the last byte. s's own append fails
    with the cause ("No space left on device") and is not reported
    stored; entries from a cannot be committed; `status` says the ledger
    cannot write (JSON and human), the log names the cause, and the
    provider advertises no free slot. Once the filler is gone, s resumes
    by itself (no new entry needed), catches up with a and appends again.
  (A read-only remount cannot be done to a tmpfs in use: the kernel
  refuses it while the node holds files open for writing.
  test_storage_eio.py fails a real ext4 disk under a running node:
  read-only after an error, and EIO.)
  * Long form only (NS_LONG=1 or --long; a developer starts it by hand):
    CYCLES (20) more times the disk fills and frees while both nodes keep
    appending transfers to each other; after each cycle s writes again by
    itself, every append reported stored so far is in s's ledger, read
    while s runs, and that ledger conserves.
  * Afterwards: every append that either node reported stored is in s's
    ledger after a restart, the ledger opens (conservation holds) and s
    agrees with a.
"""
import json
import os
import subprocess
import sys
import threading
import time

import nstest
from nstest import check, check_eq, cli, log

import ledgerutil as lu

LONG = os.environ.get("NS_LONG") == "1" or "--long" in sys.argv
CYCLES = 20


def mount_small(path, size="8m"):
    if os.geteuid() != 0:
        raise nstest.Skip("needs root to mount a small tmpfs")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}",
                        "tmpfs", path], capture_output=True, text=True)
    if r.returncode != 0:
        raise nstest.Skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")


def fill(path, name="filler"):
    """Take every free byte of the filesystem holding path."""
    filler = os.path.join(path, name)
    subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=4k"],
                   capture_output=True)
    st = os.statvfs(path)
    check_eq(st.f_bavail, 0, "free blocks after filling")
    return filler


def present(s, authors):
    """(author, entry id) of every entry in s's ledger by these authors,
    read from the datadir (s may be running); checks it conserves."""
    r = cli("ledger", "--datadir", s.datadir, "--json", "--limit", "1")
    check(r.returncode == 0, f"s's ledger does not open or does not "
                             f"conserve: {r.stderr.strip()} {r.stdout[:300]}")
    check(json.loads(r.stdout).get("conserved") is True,
          f"s's ledger does not conserve: {r.stdout[:300]}")
    have = set()
    for author in authors:
        r = cli("ledger", "--datadir", s.datadir, "--author", author,
                "--json", "--limit", "100000", timeout=60)
        check(r.returncode == 0, f"ledger --author: {r.stderr}")
        have |= {(author, e["id"]) for e in json.loads(r.stdout)["list"]}
    return have


def transfer(node, to, amount):
    return cli("transfer", "--datadir", node.datadir, "--to", to.id,
               str(amount), "--json", timeout=30)


def test(net):
    a = net.node("a").init()
    s = net.node("s")
    mount_small(s.datadir)
    net.at_exit(lambda: subprocess.run(["umount", "-l", s.datadir]))
    s.init()
    s.log_path = os.path.join(net.dir, "s.log")  # not on the full disk
    g = net.genesis([a, s])
    for n in (a, s):
        nstest.cli_ok("init", "--datadir", n.datadir, "--genesis", g)
    a.start()
    s.start(bootstrap=[a])
    net.wait_mesh([a, s])

    stored = []  # (author, entry id) of every append reported stored

    def ok(node, to, amount, what):
        r = transfer(node, to, amount)
        check(r.returncode == 0, f"{what}: {r.stderr.strip()}")
        stored.append((node.id, json.loads(r.stdout)["entry"]))

    def refused(what, cause):
        # LMDB reuses the pages it freed: a few appends may still fit. Each
        # one reported stored must be stored; one must fail, with the cause.
        for i in range(300):
            r = transfer(s, a, 1)
            if r.returncode != 0:
                break
            stored.append((s.id, json.loads(r.stdout)["entry"]))
        log(f"{what}: exit {r.returncode} after {i} stored: "
            f"{r.stderr.strip()}")
        check_eq(r.returncode, 1, f"exit status of an append ({what})")
        check(cause in r.stderr and "not stored" in r.stderr,
              f"the error should give the cause ({cause}): {r.stderr}")

    def cannot_write(cause):
        def state():
            led = s.status()["ledger"]
            se = led.get("storage_error") or {}
            return (led["writable"] is False and cause in se.get("detail", ""),
                    json.dumps(se))
        nstest.wait_until(state, 10, f"status to say the ledger cannot "
                                     f"write ({cause})")
        human = cli("status", "--datadir", s.datadir).stdout
        check("CANNOT WRITE" in human and cause in human,
              f"human status should show the fault: {human}")
        nstest.wait_until(
            lambda: any(p["id"] == s.id and p.get("free_slots") == 0
                        for p in a.peers()), 10,
            "a to see s advertise no free slot")

    def recovers(what):
        t0 = time.monotonic()
        nstest.wait_until(lambda: s.status()["ledger"]["writable"], 10,
                          f"s to write again after {what}")
        log(f"s writes again {time.monotonic() - t0:.2f}s after {what}")
        nstest.wait_until(
            lambda: s.status()["ledger"]["digest"] ==
            a.status()["ledger"]["digest"], 20,
            f"s to catch up with a after {what}")
        ok(s, a, 2, f"an append by s after {what}")

    for i in range(3):
        ok(s, a, 1, "an append by s before the fault")
        ok(a, s, 1, "an append by a before the fault")

    # 1. disk full
    filler = fill(s.datadir)
    refused("append by s on a full disk", "No space left on device")
    for i in range(5):
        ok(a, s, 1, "an append by a while s's disk is full")
    cannot_write("No space left on device")
    os.unlink(filler)
    recovers("the disk had space again")

    with open(s.log_path) as f:
        text = f.read()
    check("event=commit_failed" in text and "No space left on device" in text,
          "the log should name the cause of the failed commits")
    check("event=storage_recovered" in text,
          "the log should say when s could write again")

    if LONG:
        cycles(s, a, stored)

    # 2. everything reported stored is stored, after a restart. First a
    #    quiet ledger: both nodes took every credit in, so no claim tick
    #    appends between reading a's digest and s's restart.
    want = lu.wait_converged([a, s], 30, "a and s to take every credit in",
                             pending=0)[1]
    s.stop()
    have = present(s, (a.id, s.id))
    lost = [x for x in stored if x not in have]
    check(not lost, f"{len(lost)} of {len(stored)} appends reported stored "
                    f"are missing from s's ledger")
    s.start(bootstrap=[a])
    check_eq(s.status()["ledger"]["digest"], want, "s's digest after restart")
    log(f"{len(stored)} appends reported stored, all present after restart")


def cycles(s, a, stored):
    """Long form: the disk fills and frees CYCLES times while a and s keep
    appending to each other (refusals expected, and reported stored only
    what is stored)."""
    lock = threading.Lock()
    stop = threading.Event()
    counts = {"ok": 0, "refused": 0}

    def writer(src, dst):
        while not stop.is_set():
            r = transfer(src, dst, 1)
            with lock:
                if r.returncode == 0:
                    stored.append((src.id, json.loads(r.stdout)["entry"]))
                    counts["ok"] += 1
                else:
                    counts["refused"] += 1
            time.sleep(0.02)

    threads = [threading.Thread(target=writer, args=pair, daemon=True)
               for pair in ((s, a), (a, s))]
    for t in threads:
        t.start()
    try:
        for c in range(CYCLES):
            time.sleep(0.5)
            filler = fill(s.datadir, f"filler{c}")
            nstest.wait_until(
                lambda: (s.status()["ledger"]["writable"] is False,
                         s.status()["ledger"]),
                20, f"s to find its disk full (cycle {c + 1})")
            time.sleep(0.5)  # appends go on against the full disk
            os.unlink(filler)
            nstest.wait_until(lambda: s.status()["ledger"]["writable"], 20,
                              f"s to write again (cycle {c + 1})")
            with lock:
                want = list(stored)
            have = present(s, (a.id, s.id))
            # a's appends reach s by gossip or sync: give them time
            late = [x for x in want if x not in have and x[0] == a.id]
            if late:
                nstest.wait_until(
                    lambda: (not [x for x in late if x not in
                                  present(s, (a.id,))], len(late)),
                    30, f"a's appends to reach s (cycle {c + 1})")
            lost = [x for x in want if x[0] == s.id and x not in have]
            check(not lost, f"cycle {c + 1}: {len(lost)} of s's appends "
                            f"reported stored are missing")
            with lock:
                log(f"cycle {c + 1}/{CYCLES}: {counts['ok']} appends stored, "
                    f"{counts['refused']} refused so far; all present, "
                    f"conserved")
    finally:
        stop.set()
        for t in threads:
            t.join()
    nstest.wait_until(
        lambda: s.status()["ledger"]["digest"] ==
        a.status()["ledger"]["digest"], 30, "s to agree with a after the "
                                            "cycles")
    check(counts["refused"] > 0, "no append was refused: the disk never "
                                 "filled under the writers")


nstest.main(test, "storage_faults")
