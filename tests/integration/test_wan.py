"""bench/bench_wan.py's machinery, CI-sized: 6 real nodes in network
namespaces over the emulated WAN (regions, rate-limited uplinks, loss, 2
behind a carrier-grade NAT), jobs for 20 s; every job posted settles and
the JSON has every key of nightshift-sim --json. Root only: exit 77 where
namespaces cannot be made (as the NAT tests). Figures are not judged."""
import json
import os
import subprocess
import sys

import nstest
from nstest import check, log

KEYS = {
    "nodes": None, "sim_seconds": None, "wall_seconds": None,
    "heartbeat_reach_ms": ("p50", "p99"), "entry_reach_ms": ("p50", "p99"),
    "confirm_ms": ("p50", "p99"), "match_ms": ("p50", "p99"),
    "bytes_per_node_s": ("mean", "max"), "msgs_per_node_s": ("mean", "max"),
    "verifies_per_node_s": ("mean", "max"), "jobs": ("posted", "settled"),
    "ledger_bytes_per_node": None,
}


def test(net):
    if os.geteuid() != 0:
        raise nstest.Skip("network namespaces need root")
    bench = os.path.join(nstest.REPO, "bench", "bench_wan.py")
    p = subprocess.Popen([sys.executable, "-B", bench, "--nodes", "6",
                          "--minutes", str(20 / 60), "--jobs-per-s", "0.3",
                          "--nat-share", "0.34", "--seed", "7",
                          "--form-timeout", "60", "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, stdin=subprocess.DEVNULL,
                         env={**os.environ, "NIGHTSHIFT_BIN": nstest.BIN})
    net.at_exit(lambda: p.poll() is None and p.terminate())
    stdout, stderr = p.communicate(timeout=280)
    r = subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr)
    # its namespaces are named w<its pid>...: none may be left
    left = [n for n in subprocess.run(["ip", "netns", "list"],
                                      capture_output=True, text=True
                                      ).stdout.split()
            if n == f"w{p.pid}r" or n.startswith(f"w{p.pid}n")]
    print(r.stderr[-3000:], flush=True)
    if r.returncode == 77:
        raise nstest.Skip(f"no emulated WAN here: {r.stderr.strip()[-300:]}")
    check(r.returncode == 0, f"bench_wan.py exited {r.returncode}")
    doc = json.loads(r.stdout)
    log(json.dumps({k: doc[k] for k in KEYS if k in doc}))
    for k, sub in KEYS.items():
        check(k in doc, f"the JSON lacks {k}")
        for s in sub or ():
            check(isinstance(doc[k], dict) and s in doc[k],
                  f"the JSON lacks {k}.{s}")
    check(doc["nodes"] == 6, f"nodes {doc['nodes']}")
    check(doc["emulation"]["nat_nodes"] == 2,
          f"{doc['emulation']['nat_nodes']} nodes behind NAT, not 2")
    jobs = doc["jobs"]
    check(jobs["posted"] >= 1, "no job was posted")
    check(jobs["settled"] == jobs["posted"],
          f"{jobs['settled']} of {jobs['posted']} jobs settled: "
          f"{doc['detail']['jobs_failed']}")
    check(doc["match_ms"]["p50"] is not None, "no match time")
    check(doc["entry_reach_ms"]["p50"] is not None,
          "no entry reach (no event=entry_stored in the logs)")
    check(doc["confirm_ms"]["p50"] is not None,
          "no confirmation (no event=entry_confirmed in the logs)")
    check(doc["verifies_per_node_s"] is not None,
          "no messages.sig_verifies in status")
    check(not left, f"bench_wan.py left namespaces behind: {left}")


nstest.main(test, "wan")
