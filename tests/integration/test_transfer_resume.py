"""Streaming inputs: a provider receives an input into its blob store as
the chunks arrive; a requester that vanishes mid-transfer costs the
provider its slot only until the deadline; the next transfer of the same
input resumes from what the cut one left.

One provider p, one requester (a light peer, `submit`), jobs with one
large random input:

  1. job 1 (deadline 6 s): while p fetches the input, its bytes grow in
     <datadir>/blobs/<hash>.part (on disk, not in p's memory); the
     requester is killed (SIGKILL) once part of it is there;
  2. p asks the silent requester again (input_rewinds), gives up at the
     deadline with the reason and frees its slot; the node keeps running
     and the part file stays;
  3. job 2, the same input: p resumes from the part file (event=
     input_resumed, input_resumed_bytes), fewer bytes than the input's
     size cross the network, the job settles with the right output (one
     byte of every 4 KiB of the input), and the input is now a blob of
     the store, no .part left;
  4. job 3, a new input whose part file on p's disk holds a wrong prefix
     (a disk fault, or an earlier sender that lied): the whole does not
     hash right, p empties the part file and fetches the input whole once
     more (event=input_refetched), and the job settles.
"""
import glob
import hashlib
import json
import os
import subprocess

import nstest
from nstest import check, check_eq, log

SIZE = 96 << 20          # input bytes
STRIDE = 4096
CHUNK = 128 << 10        # NS_CHUNK_BYTES

KERNEL = """
kernel void pick(global const uchar *x, global uchar *out, uint stride)
{
    size_t i = get_global_id(0);
    out[i] = x[i * stride];
}
"""


def part_size(node):
    parts = glob.glob(os.path.join(node.datadir, "blobs", "*.part"))
    return (os.path.getsize(parts[0]), parts[0]) if parts else (0, None)


def test(net):
    p = net.node("p").init()
    req = net.node("req").init()
    g = net.genesis([p, req])
    for n in (p, req):
        nstest.cli_ok("init", "--datadir", n.datadir, "--genesis", g)
    extra = ("--set", "node.stake=100000")
    p.start(extra=extra)
    data = os.urandom(SIZE)
    x = os.path.join(net.dir, "x.bin")
    with open(x, "wb") as f:
        f.write(data)
    src = os.path.join(net.dir, "pick.cl")
    with open(src, "w") as f:
        f.write(KERNEL)
    n_out = SIZE // STRIDE
    out = os.path.join(net.dir, "out.bin")

    def submit(deadline_s):
        sub = subprocess.Popen(
            [nstest.BIN, "submit", "--datadir", req.datadir, "--bootstrap",
             p.addr, "--kernel", src, "--entry", "pick", "--global",
             str(n_out), "--arg", f"in:{x}", "--arg", f"out:{n_out}:{out}",
             "--arg", f"u32:{STRIDE}", "--max-price", "10", "--deadline-s",
             str(deadline_s), "--timeout-s", "100", "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            stdin=subprocess.DEVNULL)
        net.at_exit(sub.kill)
        return sub

    # 1. the requester vanishes once a slice of the input is on p's disk
    sub = submit(6)

    def partly_there():
        size, _ = part_size(p)
        if sub.poll() is not None:
            raise nstest.TestFailure(f"submit ended: {sub.stderr.read()}")
        return SIZE // 8 <= size < SIZE, f"part file {size} bytes"
    nstest.wait_until(partly_there, 60, "part of the input on p's disk",
                      interval=0.005)
    sub.kill()
    sub.wait()
    had, path = part_size(p)
    log(f"requester killed with {had} of {SIZE} input bytes in p's "
        f"{os.path.basename(path)}")
    check(had < SIZE, "the input was complete before the requester died")

    # 2. p gives up at the deadline, frees the slot, keeps the part file
    def slot_free():
        prov = p.status()["provider"]
        return prov["jobs"]["fetch"] == 0, json.dumps(prov)
    nstest.wait_until(slot_free, 20, "p to free the slot of the dead job")
    check("deadline passed while fetching inputs" in p.log_text(),
          "p's log does not say why it dropped the job")
    prov = p.status()["provider"]
    first = prov["input_bytes"]
    log(f"p freed the slot at the deadline after {prov['input_rewinds']} "
        f"rewind(s); {first} input bytes fetched")
    kept, _ = part_size(p)
    check(kept >= had, f"the part file shrank to {kept} bytes")

    # 3. the same input again: resumed, not fetched whole
    sub = submit(60)
    r_out, r_err = sub.communicate(timeout=120)
    check(sub.returncode == 0,
          f"submit failed ({sub.returncode}): {r_err.strip()[-800:]} "
          f"{r_out.strip()[-800:]}")
    check_eq(json.loads(r_out)["status"], "settled", "job 2's status")
    prov = p.status()["provider"]
    resumed, fetched = prov["input_resumed_bytes"], prov["input_bytes"] - first
    log(f"job 2: resumed {resumed} bytes from the part file, fetched "
        f"{fetched} (input {SIZE})")
    check(resumed > 0 and resumed >= kept - (kept % CHUNK) - CHUNK,
          f"resumed {resumed} bytes, the part file had {kept}")
    check_eq(fetched, SIZE - resumed, "bytes fetched for job 2")
    check("event=input_resumed" in p.log_text(), "no input_resumed in p's log")
    with open(out, "rb") as f:
        got = f.read()
    check(got == data[::STRIDE][:n_out], "the output is not the input's picks")
    blob = os.path.join(p.datadir, "blobs",
                        hashlib.blake2b(data, digest_size=32).hexdigest())
    check(os.path.exists(blob), "the input is not in p's blob store")
    check_eq(part_size(p)[0], 0, "part file left")
    log("job 2 settled with the right output; the input is in the store")

    # 4. a wrong prefix in a part file: refetched whole, not failed
    small = 8 << 20
    data3 = os.urandom(small)
    with open(x, "wb") as f:
        f.write(data3)
    h3 = hashlib.blake2b(data3, digest_size=32).hexdigest()
    with open(os.path.join(p.datadir, "blobs", h3 + ".part"), "wb") as f:
        f.write(bytes(4 << 20))
    before = p.status()["provider"]
    n3 = small // STRIDE
    sub = subprocess.Popen(
        [nstest.BIN, "submit", "--datadir", req.datadir, "--bootstrap",
         p.addr, "--kernel", src, "--entry", "pick", "--global", str(n3),
         "--arg", f"in:{x}", "--arg", f"out:{n3}:{out}", "--arg",
         f"u32:{STRIDE}", "--max-price", "10", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        stdin=subprocess.DEVNULL)
    net.at_exit(sub.kill)
    r_out, r_err = sub.communicate(timeout=120)
    check(sub.returncode == 0, f"job 3: submit failed: {r_err[-600:]} "
          f"{r_out[-600:]}")
    check_eq(json.loads(r_out)["status"], "settled", "job 3's status")
    after = p.status()["provider"]
    check_eq(after["input_refetched"] - before["input_refetched"], 1,
             "inputs refetched whole")
    check_eq(after["input_resumed_bytes"] - before["input_resumed_bytes"],
             4 << 20, "bytes resumed from the wrong part file")
    check_eq(after["input_bytes"] - before["input_bytes"],
             small - (4 << 20) + small, "bytes fetched for job 3")
    check("event=input_refetched" in p.log_text(),
          "no input_refetched in p's log")
    with open(out, "rb") as f:
        check(f.read() == data3[::STRIDE][:n3],
              "job 3: the output is not the input's picks")
    check(os.path.exists(os.path.join(p.datadir, "blobs", h3)),
          "job 3's input is not in p's blob store")
    log("job 3: the wrong part file was caught, the input fetched whole "
        "again, the job settled")


nstest.main(test, "transfer_resume")
