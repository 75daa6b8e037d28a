"""Storage faults never corrupt the ledger, on a real small filesystem.

Node s keeps its datadir on an 8 MiB tmpfs (mounted here: root only;
skipped with the reason elsewhere); node a is its healthy peer.

  * Disk full: a filler file takes the last byte. s's own append fails
    with the cause ("No space left on device") and is not reported
    stored; entries from a cannot be committed; `status` says the ledger
    cannot write (JSON and human), the log names the cause, and the
    provider advertises no free slot. Once the filler is gone, s resumes
    by itself (no new entry needed), catches up with a and appends again.
  (A read-only remount cannot be tested this way: the kernel refuses it
  while the node holds files open for writing. A commit that fails with
  EROFS takes the same path as ENOSPC.)
  * Afterwards: every append that either node reported stored is in s's
    ledger after a restart, the ledger opens (conservation holds) and s
    agrees with a.
"""
import json
import os
import subprocess
import time

import nstest
from nstest import check, check_eq, cli, log


def mount_small(path, size="8m"):
    if os.geteuid() != 0:
        raise nstest.Skip("needs root to mount a small tmpfs")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}",
                        "tmpfs", path], capture_output=True, text=True)
    if r.returncode != 0:
        raise nstest.Skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")


def fill(path):
    """Take every free byte of the filesystem holding path."""
    filler = os.path.join(path, "filler")
    subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=4k"],
                   capture_output=True)
    st = os.statvfs(path)
    check_eq(st.f_bavail, 0, "free blocks after filling")
    return filler


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

    # 2. everything reported stored is stored, after a restart
    want = a.status()["ledger"]["digest"]
    s.stop()
    r = cli("ledger", "--datadir", s.datadir, "--json", "--limit", "1000")
    check(r.returncode == 0, f"s's ledger does not open: {r.stderr}")
    have = set()
    for author in (a.id, s.id):
        r = cli("ledger", "--datadir", s.datadir, "--author", author,
                "--json", "--limit", "1000")
        check(r.returncode == 0, f"ledger --author: {r.stderr}")
        have |= {(author, e["id"]) for e in json.loads(r.stdout)["list"]}
    lost = [x for x in stored if x not in have]
    check(not lost, f"{len(lost)} of {len(stored)} appends reported stored "
                    f"are missing from s's ledger")
    s.start(bootstrap=[a])
    check_eq(s.status()["ledger"]["digest"], want, "s's digest after restart")
    log(f"{len(stored)} appends reported stored, all present after restart")


nstest.main(test, "storage_faults")
