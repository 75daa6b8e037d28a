"""A provider that cannot bid says why, and what to do (FIRST-USE M6;
issue 28, item 5), on a 3-node network:

  * p stakes (node.stake) and runs the job; q has credits but no stake;
  * q logs `event=not_bidding` at start, naming the stake and the command
    that fixes it; `status` says "bidding   NO: no stake ..." and
    `status --json` carries provider.not_bidding;
  * after a light peer's job (which p wins), q counts the announcement
    it passed over as provider.not_bid.no_stake, and /metrics shows
    nightshift_provider_not_bid_total{reason="no_stake"};
  * p, staked, says nothing of the kind.
"""
import json
import os
import random
import struct
import urllib.request

import nstest
from nstest import check, cli, log


def test(net):
    p, q, req = net.named_nodes("p", "q", "req")
    p.start(extra=("--set", "node.stake=100000"))
    q.start(bootstrap=[p], extra=("--set", "node.stake=0", "--set",
                                  "node.http=127.0.0.1:0"))

    with open(q.log_path) as f:
        started = f.read()
    check("event=not_bidding" in started and "no stake" in started and
          "nightshift stake" in started,
          f"q's log does not say it will not bid:\n{started[-800:]}")
    r = cli("status", "--datadir", q.datadir)
    check(r.returncode == 0 and "bidding   NO: no stake" in r.stdout,
          f"q's status: {r.stdout}")
    r = cli("status", "--datadir", p.datadir, "--json")
    check(json.loads(r.stdout)["provider"]["not_bidding"] is None,
          "p, staked, says it does not bid")

    n = 1024
    a = os.path.join(net.dir, "a.bin")
    with open(a, "wb") as f:
        f.write(struct.pack(f"<{n}f", *(random.uniform(-1, 1)
                                        for _ in range(n))))
    out = os.path.join(net.dir, "out.bin")
    r = cli("submit", "--datadir", req.datadir, "--bootstrap", p.addr,
            "--builtin", "vector_add", "--global", n, "--arg", f"in:{a}",
            "--arg", f"in:{a}", "--arg", f"out:{4 * n}:{out}", "--arg",
            f"u32:{n}", "--max-price", 10, "--timeout-s", 60, timeout=90)
    check(r.returncode == 0, f"the job failed: {r.stderr[-600:]}")

    def no_stake_count():
        r = cli("status", "--datadir", q.datadir, "--json")
        return json.loads(r.stdout)["provider"]["not_bid"]["no_stake"]
    nstest.wait_until(lambda: no_stake_count() >= 1, 10,
                      "q to count the job it passed over")
    with open(os.path.join(q.datadir, "node.http")) as f:
        host = f.read().strip()
    with urllib.request.urlopen(f"http://{host}/metrics", timeout=5) as resp:
        metrics = resp.read().decode()
    line = [m for m in metrics.splitlines()
            if m.startswith('nightshift_provider_not_bid_total{reason="no_'
                            'stake"}')]
    log(f"q: {line}")
    check(line and float(line[0].split()[-1]) >= 1,
          "the metric of announcements passed over for want of stake")


if __name__ == "__main__":
    nstest.main(test, "not_bidding")
