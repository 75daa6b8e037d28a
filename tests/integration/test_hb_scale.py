#!/usr/bin/env python3
"""The heartbeat interval grows with the peers (node.heartbeat_peers): with
heartbeat_peers = 1 and 4 reachable peers, 5 nodes announce (and keep)
4 x the configured interval, stay meshed, and a node killed with SIGKILL
is dropped by the others after three of those longer intervals (not after
three configured ones, not much later). With heartbeat_peers = 0 the
interval stays the configured one."""
import time

import nstest
from nstest import check, log

N = 5
HB_MS = 300
SCALED_MS = 4 * HB_MS  # 4 peers > 1, > 2, <= 4: doubled twice
SWEEP = 1.0  # the table is swept once a second (p2p/peers.c)
SLACK = 1.5  # loaded CI machines


def start(nodes, extra):
    boot = [nodes[0], nodes[1]]
    nodes[0].start(extra=extra)
    nodes[1].start(bootstrap=[nodes[0]], extra=extra)
    for n in nodes[2:]:
        n.start(bootstrap=boot, extra=extra, wait=False)
    for n in nodes[2:]:
        n.wait_started()


def intervals(node):
    return {p["id"]: p["interval_ms"] for p in node.peers()}


def test(net):
    net.heartbeat_ms = HB_MS
    nodes = net.make_nodes(N)
    start(nodes, ["--set", "node.heartbeat_peers=1"])
    net.wait_mesh(nodes)

    # Every node heard the others announce the scaled interval (the step
    # is taken at the heartbeat after the peers became reachable).
    def scaled():
        odd = {n.name: v for n in nodes for v in intervals(n).values()
               if v != SCALED_MS}
        return (not odd, f"intervals other than {SCALED_MS}: {odd}")
    nstest.wait_until(scaled, 20, f"every peer at {SCALED_MS} ms")
    log(f"all {N} nodes announce {SCALED_MS} ms (configured {HB_MS})")

    # Several configured expiry periods pass: nobody is dropped.
    time.sleep(3 * 3 * HB_MS / 1000)
    for n in nodes:
        st = n.status()
        check(st["messages"]["peers_expired"] == 0,
              f"{n.name} expired {st['messages']['peers_expired']} peers "
              f"at the scaled interval")
    net.wait_mesh(nodes, timeout=5)

    victim = nodes[3]
    others = [n for n in nodes if n is not victim]
    t_kill = time.monotonic()
    victim.kill()
    log(f"killed {victim.name}")
    # Three configured intervals (and a sweep) later it must still be
    # listed: the others expire it by its own, longer interval.
    time.sleep(max(0.0, t_kill + 3 * HB_MS / 1000 + SWEEP -
                   time.monotonic()))
    for n in others:
        check(victim.id in n.peer_ids(),
              f"{n.name} dropped {victim.name} within "
              f"{time.monotonic() - t_kill:.2f}s: by the configured "
              f"interval, not the {SCALED_MS} ms it announced")
    dropped_at = {}

    def all_dropped():
        now = time.monotonic() - t_kill
        for n in others:
            if n.name not in dropped_at and victim.id not in n.peer_ids():
                dropped_at[n.name] = now
        waiting = [n.name for n in others if n.name not in dropped_at]
        return (not waiting, f"still listed by {waiting}")
    nstest.wait_until(all_dropped, 3 * SCALED_MS / 1000 + SWEEP + SLACK,
                      f"all survivors to drop {victim.name}", interval=0.05)
    log("dropped at " + ", ".join(f"{k} +{v:.2f}s"
                                  for k, v in sorted(dropped_at.items())))
    for n in others:
        n.stop()

    # heartbeat_peers = 0: the configured interval, whatever the peers.
    fixed = net.make_nodes(3, prefix="fixed")
    start(fixed, ["--set", "node.heartbeat_peers=0"])
    net.wait_mesh(fixed)
    for n in fixed:
        got = set(intervals(n).values())
        check(got == {HB_MS}, f"{n.name}: peers announce {got}, expected "
                              f"{HB_MS} with heartbeat_peers = 0")
    log(f"heartbeat_peers = 0: {HB_MS} ms")


nstest.main(test, "hb_scale")
