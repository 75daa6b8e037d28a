"""A datadir whose disk fails while the node runs: read-only, then EIO.

Node s keeps its datadir on ext4 in an image file attached to a loop
device (a real block device and filesystem, mounted errors=remount-ro;
root only, skipped with the reason elsewhere); node a is its healthy
peer. Both keep appending transfers to each other while the disk fails
under s, twice:

  * read-only: an ext4 error (the filesystem's own fault trigger,
    /sys/fs/ext4/DEV/trigger_fs_error) remounts it read-only, as a failed
    metadata write does with errors=remount-ro: writes fail with EROFS;
  * EIO: the filesystem is shut down (EXT4_IOC_SHUTDOWN, as xfstests'
    godown does: the journal is not flushed): every write fails with EIO.

Each time: s refuses its own append with the cause and "not stored",
`status` (JSON and human) says the ledger cannot write and why, the log
names the cause, the provider advertises no free slot (no new work), and
s keeps running. Then the fault is removed the only way it can be on a
real disk: s stops, the filesystem is unmounted, checked (e2fsck) and
mounted again, and s starts on it. Its ledger opens and conserves before
it starts, every append that s reported stored is in it, and once s has
caught up with a every append either node reported stored is present and
the digests agree.

(A kernel with device-mapper could instead swap the table to the `error`
target and back while mounted; not every container has it, the loop
device and ext4 are enough to fail the disk under a running node.)
"""
import fcntl
import json
import os
import shutil
import struct
import subprocess
import threading
import time

import nstest
from nstest import check, check_eq, cli, log

import ledgerutil as lu

EXT4_IOC_SHUTDOWN = 0x8004587D  # _IOR('X', 125, __u32)
EXT4_GOING_FLAGS_NOLOGFLUSH = 2


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True)


class Disk:
    """ext4 in an image file on a loop device, mounted on `path`."""

    def __init__(self, net, path, size_mb=64):
        if os.geteuid() != 0:
            raise nstest.Skip("needs root to attach a loop device and "
                              "mount ext4")
        for tool in ("losetup", "mkfs.ext4", "e2fsck", "mount", "umount"):
            if not shutil.which(tool):
                raise nstest.Skip(f"{tool} is not installed")
        if not os.path.exists("/dev/loop-control"):
            raise nstest.Skip("no loop devices here (/dev/loop-control)")
        self.path = path
        self.img = os.path.join(net.dir, "disk.img")
        with open(self.img, "wb") as f:
            f.truncate(size_mb << 20)
        r = run("losetup", "--find", "--show", self.img)
        if r.returncode != 0:
            raise nstest.Skip(f"cannot attach a loop device: "
                              f"{r.stderr.strip()}")
        self.dev = r.stdout.strip()
        net.at_exit(lambda: run("losetup", "-d", self.dev))
        r = run("mkfs.ext4", "-q", "-F", self.dev)
        check(r.returncode == 0, f"mkfs.ext4: {r.stderr.strip()}")
        self.mounted = False
        r = self.mount()
        if r.returncode != 0:
            raise nstest.Skip(f"cannot mount ext4 on {self.dev}: "
                              f"{r.stderr.strip()}")
        net.at_exit(lambda: run("umount", "-l", self.path)
                    if self.mounted else None)
        self.sysfs = os.path.join("/sys/fs/ext4", os.path.basename(self.dev))

    def mount(self):
        r = run("mount", "-t", "ext4", "-o", "errors=remount-ro", self.dev,
                self.path)
        self.mounted = r.returncode == 0
        return r

    def options(self):
        with open("/proc/mounts") as f:
            for line in f:
                p = line.split()
                if p[1] == self.path:
                    return p[3].split(",")
        return []

    def turn_read_only(self):
        """An ext4 error: with errors=remount-ro the kernel remounts the
        filesystem read-only, as after a failed metadata write."""
        with open(os.path.join(self.sysfs, "trigger_fs_error"), "w") as f:
            f.write("nightshift test: disk fails\n")
        # "ro", or "emergency_ro" on kernels that keep the mount rw; the
        # kernel may take a moment
        probe = os.path.join(self.path, "probe")

        def read_only():
            try:
                open(probe, "w").close()
                os.unlink(probe)
                return False, self.options()
            except OSError as e:
                check_eq(e.strerror, "Read-only file system",
                         "a write after the ext4 error")
                return True
        nstest.wait_until(read_only, 5, f"{self.path} to turn read-only "
                                        f"after an ext4 error")

    def shut_down(self):
        """Every I/O on the filesystem fails with EIO from now on."""
        fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN,
                        struct.pack("I", EXT4_GOING_FLAGS_NOLOGFLUSH))
        finally:
            os.close(fd)

    def repair(self):
        """Unmount, check and mount again: the fault is gone."""
        r = run("umount", self.path)
        check(r.returncode == 0, f"umount: {r.stderr.strip()}")
        self.mounted = False
        r = run("e2fsck", "-f", "-y", self.dev)
        # 0: clean, 1: errors corrected (the error record, an orphan
        # list): anything above means the filesystem itself was damaged
        check(r.returncode in (0, 1), f"e2fsck exit {r.returncode}: "
                                      f"{r.stdout[-500:]}")
        r = self.mount()
        check(r.returncode == 0, f"mount: {r.stderr.strip()}")


def transfer(node, to, amount):
    return cli("transfer", "--datadir", node.datadir, "--to", to.id,
               str(amount), "--json", timeout=30)


def present(datadir, authors):
    """(author, entry id) of every entry by these authors in the ledger on
    datadir; the ledger must open and conserve."""
    r = cli("ledger", "--datadir", datadir, "--json", "--limit", "1")
    check(r.returncode == 0 and json.loads(r.stdout).get("conserved"),
          f"the ledger on {datadir} does not open or does not conserve: "
          f"exit {r.returncode} {r.stderr.strip()} {r.stdout[:300]}")
    have = set()
    for author in authors:
        r = cli("ledger", "--datadir", datadir, "--author", author, "--json",
                "--limit", "100000", timeout=60)
        check(r.returncode == 0, f"ledger --author: {r.stderr.strip()}")
        have |= {(author, e["id"]) for e in json.loads(r.stdout)["list"]}
    return have


def test(net):
    s = net.node("s")
    disk = Disk(net, s.datadir)  # or skip, before anything starts
    a = net.node("a").init()
    net.at_exit(lambda: s.proc and s.proc.poll() is None and s.kill())
    s.init()
    s.log_path = os.path.join(net.dir, "s.log")  # not on the failing disk
    g = net.genesis([a, s])
    for n in (a, s):
        nstest.cli_ok("init", "--datadir", n.datadir, "--genesis", g)
    a.start()
    s.start(bootstrap=[a])
    net.wait_mesh([a, s])

    stored = []  # (author, entry id) of every append reported stored
    lock = threading.Lock()

    def writers(stop):
        def loop(src, dst):
            while not stop.is_set():
                r = transfer(src, dst, 1)
                if r.returncode == 0:
                    with lock:
                        stored.append((src.id, json.loads(r.stdout)["entry"]))
                time.sleep(0.05)
        ts = [threading.Thread(target=loop, args=p, daemon=True)
              for p in ((s, a), (a, s))]
        for t in ts:
            t.start()
        return ts

    def phase(what, inject, cause):
        nstest.wait_until(
            lambda: s.status()["ledger"]["digest"] ==
            a.status()["ledger"]["digest"], 20, f"s to agree with a "
                                                f"before {what}")
        stop = threading.Event()
        ts = writers(stop)
        time.sleep(1.0)
        log_mark = os.path.getsize(s.log_path)
        inject()
        log(f"{what}: injected")

        def state():
            led = s.status()["ledger"]
            se = led.get("storage_error") or {}
            return (led["writable"] is False and cause in se.get("detail", ""),
                    json.dumps(se))
        nstest.wait_until(state, 15, f"status to say s's ledger cannot "
                                     f"write ({cause})")
        r = transfer(s, a, 1)
        check_eq(r.returncode, 1, f"exit status of an append by s ({what})")
        check(cause in r.stderr and "not stored" in r.stderr,
              f"the refusal should give the cause ({cause}): {r.stderr}")
        human = cli("status", "--datadir", s.datadir).stdout
        check("CANNOT WRITE" in human and cause in human,
              f"human status should show the fault: {human}")
        nstest.wait_until(
            lambda: any(p["id"] == s.id and p.get("free_slots") == 0
                        for p in a.peers()), 10,
            "a to see s advertise no free slot")
        time.sleep(1.0)  # appends go on against the failed disk
        stop.set()
        for t in ts:
            t.join()
        check(s.proc.poll() is None, f"s died on {what}: "
                                     f"{s.log_tail(10)}")
        with open(s.log_path) as f:
            f.seek(log_mark)
            text = f.read()
        check("event=commit_failed" in text and cause in text,
              f"the log should name the cause ({cause}) of the failed "
              f"commits")
        with lock:
            mine = [x for x in stored if x[0] == s.id]
        log(f"{what}: refused with the cause; {len(stored)} appends "
            f"reported stored so far, {len(mine)} by s")

        # the fault is removed: s stops, the disk is repaired, s starts
        rc = s.stop()
        with open(s.log_path) as f:
            f.seek(log_mark)
            lines = [l for l in f if "level=error" in l or "level=warn" in l]
        log(f"{what}: s stopped with exit {rc}; {len(lines)} warnings and "
            f"errors in its log, the first: "
            f"{lines[0].strip() if lines else None}; the last: "
            f"{lines[-1].strip() if lines else None}")
        disk.repair()
        have = present(s.datadir, (s.id,))
        lost = [x for x in mine if x not in have]
        check(not lost, f"after {what}: {len(lost)} of s's {len(mine)} "
                        f"appends reported stored are missing")
        s.start(bootstrap=[a])
        nstest.wait_until(lambda: s.status()["ledger"]["writable"], 10,
                          f"s to write on the repaired disk ({what})")
        nstest.wait_until(
            lambda: s.status()["ledger"]["digest"] ==
            a.status()["ledger"]["digest"], 30,
            f"s to catch up with a after {what}")
        r = transfer(s, a, 2)
        check(r.returncode == 0, f"an append by s after {what}: "
                                 f"{r.stderr.strip()}")
        stored.append((s.id, json.loads(r.stdout)["entry"]))
        log(f"{what}: s writes again on the repaired disk and agrees with a")

    for i in range(3):
        for src, dst in ((s, a), (a, s)):
            r = transfer(src, dst, 1)
            check(r.returncode == 0, f"an append before the faults: "
                                     f"{r.stderr.strip()}")
            stored.append((src.id, json.loads(r.stdout)["entry"]))

    trigger = os.path.join(disk.sysfs, "trigger_fs_error")
    if not os.path.exists(trigger):
        log(f"no {trigger} on this kernel: the read-only phase is left out")
    elif os.statvfs(trigger).f_flag & os.ST_RDONLY:
        log(f"{trigger} is on a read-only sysfs (a container?): the "
            f"read-only phase is left out")
    else:
        phase("a read-only remount", disk.turn_read_only,
              "Read-only file system")
    phase("EIO (filesystem shut down)", disk.shut_down, "Input/output error")

    # everything reported stored is stored, after a last restart; first a
    # quiet ledger (every credit taken in: no claim tick appends between
    # reading a's digest and s's restart)
    want = lu.wait_converged([a, s], 30, "a and s to take every credit in",
                             pending=0)[1]
    s.stop()
    have = present(s.datadir, (a.id, s.id))
    lost = [x for x in stored if x not in have]
    check(not lost, f"{len(lost)} of {len(stored)} appends reported stored "
                    f"are missing from s's ledger")
    s.start(bootstrap=[a])
    check_eq(s.status()["ledger"]["digest"], want, "s's digest after restart")
    log(f"{len(stored)} appends reported stored, all present after restart")


nstest.main(test, "storage_eio")
