"""A provider others cannot dial (issue 24, problem 6) bids lowest and must
be challenged, win, run, settle and be paid:

    test_nat_undialable.py dead  it advertises a port where nothing
                                 listens, with the default settings
                                 (node.reachable=yes: it does not know)
    test_nat_undialable.py no    node.reachable=no (its contact is "" or
                                 names b, which relays by default)

Everything the requester sends it (challenge, award, chunk replies) has to
travel over the connection the provider opened to the requester (or
through b).

  b   bootstrap, no slots
  d   a dialable provider, the dearer one
  u   the undialable provider, the cheapest (dead: node.advertise names
      a port that is bound but never listened on, so a dial is refused)
  r   the requester: `submit` (a light peer) on loopback

Before the fix (dead) the requester sent its award to u's advertised
endpoint (u's entry there never became reachable, so the DEALER queued it
for ever) and d got the job; (no) the requester had never heard of u when
d's bid came, closed the auction on it and d got the job. In both u logged
no `challenged`. Loopback only: no namespaces.
"""
import socket
import sys

import nstest
from nstest import check, check_eq, log

import natnet


def test(net, mode):
    # A port that refuses every dial, held for the whole test so that
    # nothing else takes it.
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    net.at_exit(dead.close)
    dead_ep = f"tcp://127.0.0.1:{dead.getsockname()[1]}"

    b, d, u, r = net.named_nodes("b", "d", "u", "r")
    b.start(extra=["--set", "node.slots=0"])
    d.start(bootstrap=[b], extra=["--set", "node.stake=100000", "--set",
                                  "node.price=2000"])
    how = (["--set", f"node.advertise={dead_ep}"] if mode == "dead"
           else ["--set", "node.reachable=no"])
    u.start(bootstrap=[b], extra=["--set", "node.stake=100000", "--set",
                                  "node.price=500", *how])
    if mode == "dead":
        check(u.addr.endswith("@" + dead_ep), f"u's node.addr: {u.addr}")
    net.wait_mesh([b, d])
    # b keeps u over u's own connection once its endpoint has not answered
    natnet.wait_held(b, u)
    before = natnet.free_after_stake(b, u)
    natnet.free_after_stake(b, d)

    receipt, took, _ = natnet.submit(net, None, r, b.addr)
    check("event=challenged" in u.log_text(),
          "u was never challenged (its log has no event=challenged)")
    check_eq(receipt["status"], "settled", "the job's status")
    check_eq(receipt["provider"], u.id, "the job's provider (the cheapest)")
    log(f"job settled by u ({mode}) in {took:.1f} s")
    natnet.wait_paid(b, u, before)


MODE = sys.argv[1] if len(sys.argv) > 1 else "dead"
nstest.main(lambda net: test(net, MODE), f"nat_undialable_{MODE}")
