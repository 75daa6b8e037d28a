"""`run` and `submit` remember what an input file hashed to (cli/jobspec.c,
"input hashes remembered"): one record per file in <cache>/input-hashes,
trusted while the file's device, inode, size and mtime are as they were
and that mtime is 2 s older than the hash.

With NIGHTSHIFT_CACHE set to the test's own directory, `nightshift run`
of a vector add whose input file was last written 10 s ago:

  1. writes a record holding the file's BLAKE2b-256;
  2. takes the hash from that record: a record forged with another hash
     (its checksum made right) changes the job id `run` prints;
  3. hashes again once the file changes: touched (mtime now, racy),
     then rewritten with other bytes of the same size and an old mtime
     of its own: each job id is the one an empty cache gives;
  4. a cache file of garbage is no record: the id is right;
  5. a cache that cannot be made (its place is under a regular file) or
     whose records file cannot be opened (a directory in its place): the
     input is hashed and `run` works.
"""
import hashlib
import json
import os
import struct
import time

import nstest
from nstest import check, check_eq, log

N = 4096
RECORD = 128


def test(net):
    cache = os.path.join(net.dir, "cache")
    empty = os.path.join(net.dir, "empty")
    os.makedirs(cache)
    os.makedirs(empty)
    a = os.path.join(net.dir, "a.bin")
    out = os.path.join(net.dir, "out.bin")
    records = os.path.join(cache, "input-hashes")

    def job_id(cache_dir):
        r = nstest.cli("run", "--builtin", "vector_add", "--global", N,
                       "--arg", f"in:{a}", "--arg", f"in:{a}", "--arg",
                       f"out:{4 * N}:{out}", "--arg", f"u32:{N}", "--json",
                       timeout=60,
                       env={**os.environ, "NIGHTSHIFT_CACHE": cache_dir})
        check(r.returncode == 0, f"run: {r.stderr.strip()}")
        return json.loads(r.stdout)["job"]

    def write(data, age_s):
        with open(a, "wb") as f:
            f.write(data)
        t = time.time_ns() - age_s * 10**9
        os.utime(a, ns=(t, t))

    def find_record():
        """(offset, record bytes) of a.bin's record, or None."""
        st = os.stat(a)
        with open(records, "rb") as f:
            blob = f.read()
        for off in range(0, len(blob) - RECORD + 1, RECORD):
            rec = blob[off:off + RECORD]
            if rec[:8] != b"nsihash1":
                continue
            dev, ino = struct.unpack_from("<QQ", rec, 8)
            if dev == st.st_dev and ino == st.st_ino:
                return off, rec
        return None

    data = os.urandom(4 * N)
    write(data, 10)

    # 1. the record
    want = job_id(empty)
    check_eq(job_id(cache), want, "first run's job id")
    found = find_record()
    check(found is not None, "no record for the input file")
    off, rec = found
    check_eq(rec[48:80], hashlib.blake2b(data, digest_size=32).digest(),
             "the record's hash")

    # 2. used: forged, with a checksum that checks
    forged = bytearray(rec)
    forged[48:80] = hashlib.blake2b(b"other", digest_size=32).digest()
    forged[112:128] = hashlib.blake2b(bytes(forged[:112]),
                                      digest_size=16).digest()
    with open(records, "r+b") as f:
        f.seek(off)
        f.write(forged)
    got = job_id(cache)
    check(got != want, "the forged record was not read: the file was hashed")
    log(f"a forged record changes the job id: {got[:16]} vs {want[:16]}")

    # 3. a change moves the mtime: hashed again
    os.utime(a)  # now: racy, so hashed (and not recorded)
    check_eq(job_id(cache), want, "job id once the file was touched")
    other = os.urandom(4 * N)
    write(other, 20)
    want2 = job_id(empty)
    check(want2 != want, "other bytes, same job id")
    check_eq(job_id(cache), want2, "job id after the file changed")
    check_eq(job_id(cache), want2, "job id from the new record")

    # 4. garbage is no record
    with open(records, "wb") as f:
        f.write(os.urandom(RECORD * 1024))
    check_eq(job_id(cache), want2, "job id with a garbage cache file")

    # 5. no cache to be had
    blocker = os.path.join(net.dir, "a-file")
    with open(blocker, "w") as f:
        f.write("x")
    check_eq(job_id(os.path.join(blocker, "cache")), want2,
             "job id with a cache that cannot be made")
    os.unlink(records)
    os.makedirs(records)  # a directory where the records file goes
    check_eq(job_id(cache), want2, "job id with an unopenable records file")


nstest.main(test, "input_hashes")
