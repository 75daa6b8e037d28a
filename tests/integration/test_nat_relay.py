"""Behind a router, both ends: a requester in one home namespace and a
provider in another, both behind a masquerading router (nftables) and
both node.reachable=no, complete a job through a public peer that relays
for them (node.relay=on): bids, award, inputs, outputs and the challenge
all travel as RELAY messages through b (docs/PROTOCOL.md, "Behind a
router"). Neither home can reach the other, nor be dialled from pub.

Before relays, the provider saw the job but could not reach a requester
that announced no endpoint: no bid, and the submit failed. Exits 77 with
the reason where namespaces cannot be made.
"""
import nstest
from nstest import check, check_eq, log

import natnet
import netns


def test(net):
    topo = natnet.setup(net, homes=2)
    check(topo.tcp_probe(topo.homes[1], topo.homes[0],
                         netns.HOME_IPS[0]) is None,
          "one home reached the other directly")
    b, h, r = natnet.make_nodes(net, topo, [
        ("b", topo.pub, natnet.PUB_PORT),
        ("h", topo.homes[0], natnet.PUB_PORT),
        ("r", topo.homes[1], natnet.PUB_PORT)])
    b.start(extra=natnet.pub_args(natnet.PUB_PORT, "--set", "node.slots=0",
                                  "--set", "node.relay=on"))
    h.start(bootstrap=[b], extra=["--set", "node.reachable=no", "--set",
                                  "node.stake=100000"])
    natnet.wait_held(b, h)
    # h names b as its relay once it hears b's heartbeat
    want = f"relay:{b.addr}"
    nstest.wait_until(lambda: (h.status()["contact"] == want,
                               h.status()["contact"]), 10,
                      "h's contact to name its relay")
    before = natnet.free_after_stake(b, h)

    receipt, took, err = natnet.submit(net, topo.homes[1], r, b.addr,
                                       "--reachable", "no")
    check_eq(receipt["status"], "settled", "the job's status")
    check_eq(receipt["provider"], h.id, "the job's provider")
    log(f"job settled through the relay in {took:.1f} s: "
        f"{receipt['timings_ms']}")
    natnet.wait_paid(b, h, before)
    sb, sh = b.status()["messages"], h.status()["messages"]
    check(sb["relayed"] > 0, f"b relayed nothing: {sb}")
    check(sh["via_relay"] > 0, f"nothing reached h by a relay: {sh}")
    log(f"b relayed {sb['relayed']} messages ({sb['relayed_bytes']} bytes); "
        f"{sh['via_relay']} reached h that way")


nstest.main(test, "nat_relay")
