"""Behind a router, the limits: keys that cannot be dialled are held over
their own connections (docs/PROTOCOL.md, "Behind a router"), but a key
costs nothing and a connection from one address costs little, so at most
4 held peers come from one source address, only in inbound slots: ten
ns_flood processes on one address, each a fresh key introducing itself
as undiallable (HELLO and heartbeats with the contact "" over its own
connection), get 4 held peers at the target, and the honest peers stay.

Before held peers none of them became a peer at all (this test checks
that four do, which fails there too). Runs on loopback: no namespaces.
"""
import subprocess
import time

import nstest
from nstest import check, check_eq, log

FLOODERS = 10
PER_ADDR = 4  # S_HELD_PER_ADDR


def test(net):
    a, c = net.make_nodes(2)
    a.start()
    c.start(bootstrap=[a])
    net.wait_mesh([a, c])
    network = a.status()["network_id"]
    full0 = a.status()["messages"]["peer_table_full"]
    procs = []
    for _ in range(FLOODERS):
        p = subprocess.Popen(
            [nstest.FLOOD_BIN, a.addr, "--held", "8000", "--interval-ms",
             "500", "--network", network], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        net.at_exit(p.kill)
        procs.append(p)

    def held():
        peers = a.peers()
        h = [p for p in peers if p.get("held") == 1]
        return len(h) >= PER_ADDR, f"{len(h)} held"
    nstest.wait_until(held, 15, f"{PER_ADDR} undiallable keys to be held")
    time.sleep(2)  # the rest had time to try
    peers = a.peers()
    h = [p for p in peers if p.get("held") == 1]
    check_eq(len(h), PER_ADDR, "held peers from one address")
    check(all(p["direction"] == "in" for p in h),
          f"a held peer outside the inbound slots: {h}")
    check(c.id in {p["id"] for p in peers}, "the honest peer c was lost")
    full = a.status()["messages"]["peer_table_full"] - full0
    check(full >= FLOODERS - PER_ADDR,
          f"refusals counted: {full} (peer_table_full)")
    log(f"{FLOODERS} undiallable keys from one address: {len(h)} held, "
        f"{full} refused; c still a peer")
    for p in procs:
        p.wait(timeout=20)
        check_eq(p.returncode, 0, f"ns_flood exit ({p.stderr.read()[-200:]})")


nstest.main(test, "nat_held")
