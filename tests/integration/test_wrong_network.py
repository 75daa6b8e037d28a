#!/usr/bin/env python3
"""A node of another network (another genesis) that bootstraps into a
3-node network is refused: it never appears in their peer lists, the node
it contacted counts dropped.wrong_network and logs the refusal (a few
lines, not one per attempt), and the 3-node network is undisturbed."""
import time

import nstest
from nstest import check, log

HB_MS = 500
OBSERVE_S = 4.0  # 8 heartbeat intervals of the intruder


def test(net):
    nodes = net.make_nodes(3)
    net.start_all(nodes)
    net.wait_mesh(nodes)
    entry = nodes[0]
    net_id = entry.status()["network_id"]

    # Same software, same loopback, but its own genesis.
    [intruder] = net.make_nodes(1, prefix="intruder",
                                genesis_name="another-network")
    check(nstest.cli_ok("id", "--datadir", intruder.datadir).split()[0]
          not in {n.id for n in nodes}, "intruder reuses an id")
    intruder.start(bootstrap=[entry])
    check(intruder.status()["network_id"] != net_id,
          "the intruder's genesis has the same network id")
    log(f"intruder {intruder.id[:10]} bootstrapping to {entry.name}")

    # Watch every node for a while: the intruder must never be listed.
    t_end = time.monotonic() + OBSERVE_S
    rounds = 0
    while time.monotonic() < t_end:
        for n in nodes:
            check(intruder.id not in n.peer_ids(),
                  f"{n.name} lists the node of another network as a peer")
        check(len(intruder.peers()) == 0,
              f"the intruder lists peers of another network: "
              f"{[p['id'][:10] for p in intruder.peers()]}")
        rounds += 1
        time.sleep(0.1)
    log(f"never listed in {rounds} polling rounds over {OBSERVE_S}s")

    dropped = entry.status()["dropped"]
    check(dropped["wrong_network"] > 0,
          f"{entry.name}: dropped.wrong_network = 0 after the intruder's "
          f"attempts (dropped: {dropped})")
    check(dropped["total"] >= dropped["wrong_network"],
          f"dropped.total {dropped['total']} < wrong_network")
    log(f"{entry.name}: dropped.wrong_network = {dropped['wrong_network']}")

    refused = [l for l in entry.log_text().splitlines()
               if "event=peer_refused" in l and "reason=wrong_network" in l]
    check(refused, f"{entry.name} logged no peer_refused/wrong_network line")
    check(any(f"id={intruder.id}" in l for l in refused),
          f"the refusal lines do not name the intruder: {refused}")
    check(all("level=warn" in l for l in refused),
          f"refusals not logged as warnings: {refused}")
    # Counted every time, logged a few times a minute per link.
    check(len(refused) <= 4,
          f"{len(refused)} refusal lines in {OBSERVE_S}s: the warning is "
          f"not rate-limited")

    # The others were never contacted by it and stay meshed.
    for n in nodes:
        check(n.running(), f"{n.name} died: {n.log_tail(5)}")
        ids = n.peer_ids()
        want = {o.id for o in nodes} - {n.id}
        check(ids == want, f"{n.name} sees {sorted(x[:10] for x in ids)}, "
                           f"expected the 2 others")
    check(intruder.running(), "the refused node crashed instead of "
                              "staying up alone")
    check(intruder.status()["peers"] == 0,
          "the intruder counts live peers")


nstest.main(test, "wrong_network")
