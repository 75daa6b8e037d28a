"""Behind a router: a provider in a "home" network namespace behind a
masquerading "router" namespace (nftables) joins a network whose nodes are
in a "pub" namespace, is listed, bids, runs a job and is paid, over
connections it opens itself (docs/PROTOCOL.md, "Behind a router").

  pub:   b (bootstrap, no slots), the requester (`submit --advertise`)
  home1: h (node.reachable=no, a provider with stake)

The router drops every connection from pub to the home (checked first),
so before held peers h never became live anywhere: b dialled h's endpoint
and never got an answer. Runs as root (CI); exits 77 with the reason
where namespaces cannot be made.
"""
import nstest
from nstest import check, check_eq, log

import natnet
import netns


def test(net):
    topo = natnet.setup(net, homes=1)
    b, h, r = natnet.make_nodes(net, topo, [
        ("b", topo.pub, natnet.PUB_PORT),
        ("h", topo.homes[0], natnet.PUB_PORT),
        ("r", topo.pub, natnet.PUB_PORT + 1)])
    b.start(extra=natnet.pub_args(natnet.PUB_PORT, "--set", "node.slots=0"))
    check(b.addr.endswith(f"@tcp://{netns.PUB_IP}:{natnet.PUB_PORT}"),
          f"node.addr does not carry the advertised endpoint: {b.addr}")
    h.start(bootstrap=[b], extra=["--set", "node.reachable=no", "--set",
                                  "node.stake=100000"])
    st = h.status()
    check_eq(st["reachable"], 0, "h's status.reachable")
    # "" until b's heartbeat names b a relay (node.relay is on by default)
    check(st["contact"] in ("", f"relay:{b.addr}"),
          f"h's contact: {st['contact']!r}")

    joined = natnet.wait_held(b, h)
    log(f"b lists h (behind the router) {joined:.2f} s after h answered")
    check(b.id in h.peer_ids(), "h does not list b")
    before = natnet.free_after_stake(b, h)

    # A requester in pub that advertises its address (--advertise).
    port = natnet.PUB_PORT + 1
    receipt, took, _ = natnet.submit(
        net, topo.pub, r, b.addr, "--listen", f"tcp://0.0.0.0:{port}",
        "--advertise", f"tcp://{netns.PUB_IP}:{port}")
    check_eq(receipt["status"], "settled", "the job's status")
    check_eq(receipt["provider"], h.id, "the job's provider")
    log(f"job settled by h (behind the router) in {took:.1f} s: "
        f"{receipt['timings_ms']}")
    natnet.wait_paid(b, h, before)
    # the provider counts it. (b, which relays by default, may carry a
    # copy of what h sent r while h's fresh dial to r had not answered
    # yet, and r's answers to a copy that came first: docs/PROTOCOL.md,
    # "How a direct message goes".)
    prov = h.status()["provider"]
    check(prov["results"] >= 1, f"h's provider results: {prov}")


nstest.main(test, "nat")
