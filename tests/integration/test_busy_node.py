"""A node stays responsive while its device works for a hosted job.

The requester's pre-flight (5 timed launches of one slow unit, then the
sample's 16 while the auction and the run go on) and its spot check run
on a thread of their own, not in the node's loop: on a 3-node testnet, a
job of 4 work-items that spin for about 0.4 s each is submitted with
`submit --node`; from the hand-over until the outputs arrive (about 8 s
of device time on the node), `nightshift status` of that node answers
each time, far inside that length, and no peer drops the node for missed
heartbeats (interval 500 ms). The job then settles and its output
equals `nightshift run`'s.
"""
import json
import os
import subprocess
import threading
import time

import nstest
from nstest import check, check_eq, cli, log

SPIN = """
kernel void spin(global float *o, uint iters)
{
    size_t i = get_global_id(0);
    float x = (float)i;
    for (uint k = 0; k < iters; k++)
        x = x * 0.999999f + 1.0f;
    o[i] = x;
}
"""


def test(net):
    src = os.path.join(net.dir, "spin.cl")
    with open(src, "w") as f:
        f.write(SPIN)

    def job(out, items, iters):
        return ["--kernel", src, "--entry", "spin", "--global", str(items),
                "--arg", f"out:{4 * items}:{out}", "--arg", f"u32:{iters}"]

    # one unit of about 0.4 s on this machine's device
    probe = 20_000_000
    r = nstest.cli_ok("run", *job(os.path.join(net.dir, "p.bin"), 1, probe),
                      "--json", timeout=60)
    ms = max(json.loads(r)["timings_ms"]["run"], 1.0)
    iters = min(int(probe * 400 / ms), 4_000_000_000)
    log(f"{probe} iterations: {ms:.1f} ms; a unit of {iters}")
    ref = os.path.join(net.dir, "ref.bin")
    nstest.cli_ok("run", *job(ref, 4, iters), timeout=120)

    tn, _ = nstest.testnet(net, 3)
    node0 = os.path.join(tn, "node0")
    out = os.path.join(net.dir, "out.bin")
    p = subprocess.Popen([nstest.BIN, "submit", "--node", node0,
                          *job(out, 4, iters), "--max-price", "10",
                          "--bid-window-ms", "50"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         text=True)
    lines = []
    t = threading.Thread(target=lambda: lines.extend(p.stderr), daemon=True)
    t.start()
    # while the pre-flight runs: handed over, outputs not yet received
    deadline = time.monotonic() + 60
    while not any("handed to the node" in x for x in lines):
        check(time.monotonic() < deadline and p.poll() is None,
              f"submit never handed the job over: {lines}")
        time.sleep(0.05)
    t0 = time.monotonic()
    answers = []
    while not any("outputs received" in x for x in lines) and \
            p.poll() is None:
        s = time.monotonic()
        r = cli("status", "--datadir", node0, timeout=30)
        answers.append((time.monotonic() - s, r.returncode))
        time.sleep(0.2)
    took = time.monotonic() - t0
    log(f"pre-flight about {took:.1f} s; status answered {len(answers)} times,"
        f" slowest {max((a for a, _ in answers), default=0):.2f} s")
    check(took > 2.0, f"the pre-flight took {took:.1f} s: too short to tell")
    check(len(answers) >= 3, f"status asked {len(answers)} times only")
    check(all(rc == 0 for _, rc in answers), f"status failed: {answers}")
    slowest = max((a for a, _ in answers), default=0)
    check(slowest < took / 2, f"status took {slowest:.2f} s while the "
          f"pre-flight ran {took:.1f} s: the node's loop waited for it")
    try:
        p.wait(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    t.join(timeout=5)
    check_eq(p.returncode, 0, f"submit --node: {''.join(lines)[-800:]}")
    with open(out, "rb") as f, open(ref, "rb") as g:
        check(f.read() == g.read(), "output differs from run's")
    for i in (1, 2):
        with open(os.path.join(tn, f"node{i}", "node.log")) as f:
            dropped = [x for x in f if "missed_3_heartbeats" in x]
        check(not dropped, f"node{i} dropped a peer meanwhile: {dropped}")


nstest.main(test, "busy_node")
