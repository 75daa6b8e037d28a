"""Behind a router without knowing it (issue 24, problem 6): a provider
whose advertised address cannot be dialled (here a port where nothing
listens) but that dials out fine, with the default settings
(node.reachable=yes), bids lowest and must win, run, settle and be paid.
Everything the requester sends it (challenge, award, chunk replies) has to
travel over the connection the provider opened to the requester.

  b   bootstrap, no slots
  d   a dialable provider, the dearer one
  u   the undialable provider, the cheapest (node.advertise names a port
      that is bound but never listened on, so a dial there is refused)
  r   the requester: `submit` (a light peer) on loopback

Before the fix the requester dialled u's advertised endpoint for its
challenge (u's entry there was not reachable yet, so the DEALER queued it
for ever): u logged no `challenged`, the round was given up and d got the
job. Loopback only: no namespaces.
"""
import socket

import nstest
from nstest import check, check_eq, log

import natnet


def test(net):
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
    u.start(bootstrap=[b], extra=["--set", "node.stake=100000", "--set",
                                  "node.price=500", "--set",
                                  f"node.advertise={dead_ep}"])
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
    log(f"job settled by u (advertising {dead_ep}) in {took:.1f} s")
    natnet.wait_paid(b, u, before)


nstest.main(test, "nat_undialable")
