"""A frame over the transport's cap cuts the link, and the cut is counted.

The transport takes frames up to 2 x NS_MAX_MSG (room for CURVE's
overhead and for oversized envelopes to reach ingest and be counted as
too_big); ZeroMQ cuts a connection whose frame is larger, and says
nothing about it. Over a real CURVE connection (tests/tools/flood.c) to
node t, with an honest peer a beside it:

  * an envelope of NS_MAX_MSG + 1 bytes is too_big, and no link is cut;
  * a connection that sends a few garbage frames and closes, and the
    honest peer a stopping, are not counted as cuts;
  * an envelope of 2 x NS_MAX_MSG + 4096 bytes cuts its link: status
    `messages.links_cut` and the metric nightshift_links_cut_total go up
    by one, too_big does not move, the log says so, and t stays up and
    keeps its peer.
"""
import time
import urllib.request

import nstest
from nstest import check, check_eq, log

NS_MAX_MSG = 256 * 1024
# S_CUT_GRACE_MS (1 s) and the maintenance timer's period and slack
GRACE_S = 2.5


def flood(target, *args):
    r = nstest.subprocess.run([nstest.FLOOD_BIN, target.addr,
                               *map(str, args)], capture_output=True,
                              text=True, timeout=60,
                              stdin=nstest.subprocess.DEVNULL)
    check(r.returncode == 0, f"ns_flood {' '.join(map(str, args))} exited "
                             f"{r.returncode}: {r.stderr.strip()}")
    log(f"ns_flood {' '.join(map(str, args))}: {r.stdout.splitlines()[-1]}")


def counters(t):
    st = t.status()
    return st["messages"]["links_cut"], st["dropped"]["too_big"]


def test(net):
    t, a = net.make_nodes(2)
    t.start(extra=["--set", "node.http=127.0.0.1:0"])
    a.start(bootstrap=[t])
    net.wait_mesh([t, a])
    network_id = t.status()["network_id"]
    check_eq(counters(t), (0, 0), "links_cut, too_big at the start")

    # just over NS_MAX_MSG: reaches ingest, too_big, the link stays
    flood(t, "--size", NS_MAX_MSG + 1, "--network", network_id)
    nstest.wait_until(lambda: (counters(t)[1] == 1, counters(t)), 10,
                      "an envelope of NS_MAX_MSG + 1 bytes to be too_big")
    # a link that sends a little and closes is no cut
    flood(t, "--garbage", 5, "--network", network_id)
    nstest.wait_until(lambda: (t.status()["dropped"]["total"] >= 6,
                               t.status()["dropped"]), 10,
                      "the garbage frames to be dropped")
    time.sleep(GRACE_S)  # a closed link is settled within the grace
    check_eq(counters(t)[0], 0, "links_cut after a frame within the cap "
                                "and a connection that closed")

    # over 2 x NS_MAX_MSG: ZeroMQ cuts the link; counted
    flood(t, "--size", 2 * NS_MAX_MSG + 4096, "--network", network_id)
    nstest.wait_until(lambda: (counters(t)[0] == 1, counters(t)), 10,
                      "a frame over 2 x NS_MAX_MSG to count as links_cut")
    check_eq(counters(t)[1], 1, "too_big after the cut (the frame never "
                                "reached ingest)")
    check("event=link_cut" in t.log_text(), "the log should say a link was "
                                            "cut")
    with open(t.datadir + "/node.http") as f:
        base = "http://" + f.read().strip().removeprefix("http://")
    body = urllib.request.urlopen(base + "/metrics", timeout=10).read()
    check(b"\nnightshift_links_cut_total 1\n" in body,
          "metrics should have nightshift_links_cut_total 1")
    check(t.running(), "t died")
    check(a.id in t.peer_ids(), "t lost its honest peer")

    # an honest peer going away is no cut
    a.stop()
    nstest.wait_until(lambda: a.id not in t.peer_ids(), 30,
                      "t to notice a is gone")
    time.sleep(GRACE_S)
    check_eq(counters(t)[0], 1, "links_cut after the honest peer stopped")
    log("a frame over the cap was counted as a cut link; a clean close, "
        "garbage and a stopped peer were not")


nstest.main(test, "link_cut")
