"""Behind a router with the default settings (issue 24, problem 6): nodes
behind a masquerading router (nftables) that do not know it, advertising
addresses nobody can dial, and the cheapest provider must still win, run,
settle and be paid.

    test_nat_sides.py provider   h (home1) advertises its private address
                                 192.168.77.2; b, d and the requester in pub
    test_nat_sides.py requester  the requester (home1, a light peer, default
                                 --listen: it announces 127.0.0.1); b, d and
                                 the cheapest provider c in pub
    test_nat_sides.py both       h in home1 as above, the requester in home2
                                 as above: they meet only through b, which
                                 relays by default (node.relay=on)

d is a dialable provider in pub that asks more. Nobody sets
node.reachable or node.relay. Before the fix the requester's challenge and
award to h queued on a DEALER that never connected, and a requester behind
the router got no bid at all from providers that could not dial it.
Runs as root (CI); exits 77 with the reason where namespaces cannot be
made.
"""
import sys

import nstest
from nstest import check, check_eq, log

import natnet
import netns

CHEAP, DEAR = "500", "2000"


def test(net, side):
    topo = natnet.setup(net, homes=2 if side == "both" else 1)
    home_p = topo.homes[0]
    home_r = topo.homes[1] if side == "both" else topo.homes[0]
    port = natnet.PUB_PORT
    nat_provider = side in ("provider", "both")
    specs = [("b", topo.pub, port), ("d", topo.pub, port + 1),
             ("r", home_r if side != "provider" else topo.pub, port + 2)]
    specs.append(("h", home_p, port) if nat_provider
                 else ("h", topo.pub, port + 3))
    b, d, r, h = natnet.make_nodes(net, topo, specs)
    stake = ["--set", "node.stake=100000"]
    b.start(extra=natnet.pub_args(port, "--set", "node.slots=0"))
    d.start(bootstrap=[b], extra=natnet.pub_args(
        port + 1, *stake, "--set", f"node.price={DEAR}"))
    if nat_provider:
        h.start(bootstrap=[b], extra=[
            *stake, "--set", f"node.price={CHEAP}", "--set",
            f"node.advertise=tcp://{netns.HOME_IPS[0]}:{port}"])
        # b cannot dial h's address: it keeps h over h's own connection
        natnet.wait_held(b, h)
        check_eq(h.status()["reachable"], 1,
                 "h's reachable (it does not know it is behind a router)")
    else:
        h.start(bootstrap=[b], extra=natnet.pub_args(
            port + 3, *stake, "--set", f"node.price={CHEAP}"))
    before = natnet.free_after_stake(b, h)
    natnet.free_after_stake(b, d)

    flags = []
    if side == "provider":
        flags = ["--listen", f"tcp://0.0.0.0:{port + 2}", "--advertise",
                 f"tcp://{netns.PUB_IP}:{port + 2}"]
    relayed0 = b.status()["messages"]["relayed"]
    receipt, took, _ = natnet.submit(net, topo.pub if side == "provider"
                                     else home_r, r, b.addr, *flags)
    check_eq(receipt["status"], "settled", "the job's status")
    check_eq(receipt["provider"], h.id, "the job's provider (the cheapest)")
    if nat_provider:
        check("event=challenged" in h.log_text(),
              "h was never challenged (no event=challenged in its log)")
    relayed = b.status()["messages"]["relayed"] - relayed0
    log(f"NAT on the {side} side: job settled by the cheapest provider in "
        f"{took:.1f} s; b relayed {relayed} messages")
    if side == "both":
        check(relayed > 0, "b relayed nothing, yet h and r cannot reach "
                           "each other")
    natnet.wait_paid(b, h, before)


SIDE = sys.argv[1] if len(sys.argv) > 1 else "both"
nstest.main(lambda net: test(net, SIDE), f"nat_sides_{SIDE}")
