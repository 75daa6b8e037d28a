"""node.http: /metrics, /status.json and the status page, checked against
the control socket's documents, and `nightshift jobs`.

    test_http_status.py            urllib: metrics, JSON, page, jobs
    test_http_status.py browser    the page in headless Chromium: a
                                   screenshot, and the rendered DOM holds
                                   the node id and the peer count (skipped,
                                   exit 77, where chromium is missing or
                                   cannot run; NS_BROWSER=1 ./setup.sh
                                   installs it)

Two nodes: node0 serves HTTP on 127.0.0.1:0 (the bound address is in
status --json "http" and DATADIR/node.http) and posts a job through
`submit --node`; node1 runs it.
"""
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request

import nstest
from nstest import check, check_eq, cli, log

SAMPLE = re.compile(r'^([a-z_:][a-z0-9_:]*)(\{[^}]*\})? (-?[0-9.e+-]+|\+Inf|NaN)$')


def get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read()


def parse_metrics(text):
    """{(name, labels): value}, checking the exposition's shape: every
    sample belongs to a family announced by HELP and TYPE lines."""
    samples, types, helps = {}, {}, set()
    for line in text.splitlines():
        if line.startswith("# HELP "):
            helps.add(line.split()[2])
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            check(name.startswith("nightshift_"), f"metric name {name}")
            check(kind in ("counter", "gauge", "histogram"), f"type {line}")
            check(kind != "counter" or name.endswith("_total"),
                  f"counter {name} does not end in _total")
            types[name] = kind
        else:
            m = SAMPLE.match(line)
            check(m is not None, f"malformed sample line {line!r}")
            name = m.group(1)
            family = re.sub(r"_(bucket|sum|count)$", "", name) \
                if name not in types else name
            check(family in types and family in helps,
                  f"{name}: no HELP/TYPE for its family")
            samples[(name, m.group(2) or "")] = float(m.group(3))
    return samples, types


def metric(samples, name, labels=""):
    check((name, labels) in samples, f"no sample {name}{labels}")
    return samples[(name, labels)]


def start_http_node(net):
    a, b = net.make_nodes(2)
    a.start(extra=["--set", "node.http=127.0.0.1:0"])
    b.start(bootstrap=[a], extra=["--set", "node.stake=100"])
    net.wait_mesh([a, b])
    st = a.status()
    check(st.get("http"), f"status has no http address: {st.get('http')!r}")
    with open(os.path.join(a.datadir, "node.http")) as f:
        check_eq(f.read().strip(), st["http"], "node.http file vs status")
    return a, b, "http://" + st["http"]


def test_refusals(net):
    c = net.node("public").init(
        genesis=os.path.join(net.dir, "node-genesis.ini"))
    for value, why in (("0.0.0.0:0", "not a loopback address"),
                       ("192.0.2.1:9464", "not a loopback address")):
        r = cli("node", "--datadir", c.datadir, "--set", f"node.http={value}",
                timeout=30)
        check(r.returncode != 0 and why in r.stderr,
              f"node.http={value} should be refused: {r.returncode} "
              f"{r.stderr[-300:]}")
    r = cli("node", "--datadir", c.datadir, "--set", "node.http=nohost",
            timeout=30)
    check(r.returncode != 0, "node.http=nohost should be refused")


def submit_job(net, a):
    n = 1024
    pa, pb = os.path.join(net.dir, "a.bin"), os.path.join(net.dir, "b.bin")
    for p in (pa, pb):
        with open(p, "wb") as f:
            f.write(struct.pack(f"{n}f", *[random.uniform(-1, 1)
                                           for _ in range(n)]))
    out = os.path.join(net.dir, "out.bin")
    r = cli("submit", "--node", a.datadir, "--builtin", "vector_add",
            "--global", str(n), "--arg", f"in:{pa}", "--arg", f"in:{pb}",
            "--arg", f"out:{4 * n}:{out}", "--arg", f"u32:{n}",
            "--max-price", 10, "--bid-window-ms", 100, timeout=120)
    check(r.returncode == 0, f"submit --node failed: {r.stderr[-800:]}")


def test_urllib(net):
    a, b, base = start_http_node(net)
    test_refusals(net)

    # the page: embedded, no external assets, fetches status.json
    code, ctype, body = get(base + "/")
    html = body.decode()
    check_eq(code, 200, "GET /")
    check(ctype.startswith("text/html"), f"/ content type {ctype}")
    check("status.json" in html and "<script>" in html, "page without JS")
    check(not re.search(r'(src|href)\s*=\s*"(https?:)?//', html),
          "the page loads something from elsewhere")
    try:
        get(base + "/nope")
        check(False, "GET /nope answered 2xx")
    except urllib.error.HTTPError as e:
        check_eq(e.code, 404, "GET /nope")
    try:
        urllib.request.urlopen(urllib.request.Request(
            base + "/metrics", data=b"x", method="POST"), timeout=10)
        check(False, "POST /metrics answered 2xx")
    except urllib.error.HTTPError as e:
        check_eq(e.code, 405, "POST /metrics")

    # a job through node0, run by node1 once its stake shows
    nstest.wait_until(lambda: (any(p["id"] == b.id and p["stake"] >= 100
                                   for p in a.peers()), "no stake yet"),
                      30, "node1's stake to reach node0")
    submit_job(net, a)

    # jobs: node0 lists its hosted job, done, run by node1
    jobs = a.query("jobs")
    mine = [j for j in jobs if j["role"] == "requester"]
    check_eq(len(mine), 1, f"node0's requester jobs: {jobs}")
    job = mine[0]
    check_eq(job["phase"], "done", "hosted job phase")
    check_eq(job["peer"], b.id, "hosted job's provider")
    check(0 < job["price"] <= 10, f"hosted job price {job['price']}")
    check(job["finished"] is True, "hosted job not finished")
    served = [j for j in b.query("jobs") if j["id"] == job["id"]]
    check(len(served) == 1 and served[0]["role"] == "provider" and
          served[0]["peer"] == a.id, f"node1's jobs lack the job: {served}")
    r = cli("jobs", "--datadir", a.datadir, job["id"][:8])
    check(r.returncode == 0 and job["id"] in r.stdout and
          "receipt   done" in r.stdout, f"jobs ID detail: {r.stdout}{r.stderr}")
    r = cli("jobs", "--datadir", a.datadir)
    check(r.returncode == 0 and "1 jobs" in r.stdout and
          job["id"][:10] in r.stdout and "requester" in r.stdout,
          f"jobs table: {r.stdout}{r.stderr}")
    r = cli("jobs", "--datadir", a.datadir, "ffffffffffff")
    check(r.returncode == 1 and "no job" in r.stderr, f"unknown id: {r.stderr}")
    p = subprocess.Popen([nstest.BIN, "jobs", "--datadir", a.datadir,
                          "--watch"], stdout=subprocess.PIPE, text=True)
    time.sleep(2.5)
    p.terminate()
    out, _ = p.communicate(timeout=10)
    check(out.count("1 jobs") >= 2, f"--watch printed once: {out!r}")

    # /metrics against status --json and peers --json, taken around it
    before = a.status()
    code, ctype, body = get(base + "/metrics")
    after = a.status()
    check_eq(code, 200, "GET /metrics")
    check(ctype.startswith("text/plain; version=0.0.4"), f"type {ctype}")
    samples, types = parse_metrics(body.decode())
    log(f"/metrics: {len(types)} families, {len(samples)} samples")
    info = [k for k in samples if k[0] == "nightshift_node_info"]
    check(len(info) == 1 and f'id="{a.id}"' in info[0][1], f"info {info}")
    check_eq(metric(samples, "nightshift_peers"), len(a.peers()), "peers")

    def between(name, path, labels=""):
        v, lo, hi = metric(samples, name, labels), before, after
        for k in path:
            lo, hi = lo[k], hi[k]
        check(float(lo) <= v <= float(hi), f"{name}{labels} = {v}, status "
                                           f"said {lo} then {hi}")
    between("nightshift_messages_received_total", ["messages", "rx"])
    between("nightshift_ledger_entries", ["ledger", "entries"])
    between("nightshift_messages_dropped_total", ["dropped", "bad_sig"],
            '{reason="bad_sig"}')
    between("nightshift_ledger_entries_rejected_total",
            ["ledger", "rejected", "bad_prev"], '{reason="bad_prev"}')
    check_eq(metric(samples, "nightshift_ledger_writable"), 1, "writable")
    check_eq(metric(samples, "nightshift_ledger_conserved"), 1, "conserved")
    check_eq(metric(samples, "nightshift_requester_jobs_finished_total",
                    '{outcome="done"}'), 1, "jobs done")
    check_eq(metric(samples, "nightshift_requester_match_seconds_count"), 1,
             "match histogram count")
    check_eq(metric(samples, "nightshift_requester_match_seconds_bucket",
                    '{le="+Inf"}'), 1, "match histogram +Inf")
    check_eq(metric(samples, "nightshift_account_free_credits"),
             after["account"]["free"], "account free")
    for name in ("nightshift_provider_bids_won_total",
                 "nightshift_provider_bids_lost_total",
                 "nightshift_device_utilisation_ratio",
                 "nightshift_provider_run_seconds",
                 "nightshift_ledger_staked_credits",
                 "nightshift_requester_verifications_total"):
        check(name in types, f"no family {name}")

    # node1 ran it: a bid won and a run time in its histogram (status)
    bst = b.status()["provider"]
    check(bst["awards"] >= 1 and bst["run_seconds"]["count"] >= 1,
          f"node1 provider status: {bst}")

    # /status.json: the same documents as the control socket's
    code, ctype, body = get(base + "/status.json")
    check(ctype.startswith("application/json"), f"type {ctype}")
    doc = json.loads(body)
    check_eq(doc["status"]["id"], a.id, "status.json id")
    check_eq({p["id"] for p in doc["peers"]}, a.peer_ids(), "status.json peers")
    check_eq([j["id"] for j in doc["jobs"] if j["role"] == "requester"],
             [job["id"]], "status.json jobs")
    led = doc["ledger"]
    check(led["conserved"] is True, f"ledger summary {led}")
    check_eq(led["accounts"], after["ledger"]["accounts"], "accounts")
    check(abs(led["free"] + led["staked"] + led["escrow"] + led["collateral"]
              + led["burned"] + led["pending_credit"] - led["total"]) < 1e-6,
          f"the summary's sums do not add up: {led}")

    # a scrape's cost, for the record
    t0 = time.monotonic()
    for _ in range(20):
        get(base + "/metrics")
    log(f"a scrape takes {(time.monotonic() - t0) / 20 * 1000:.2f} ms")


def test_browser(net):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        raise nstest.Skip("chromium is not installed (NS_BROWSER=1 "
                          "./setup.sh installs it)")
    probe = subprocess.run([chromium, "--headless", "--no-sandbox",
                            "--disable-gpu", "--dump-dom", "about:blank"],
                           capture_output=True, text=True, timeout=60)
    if probe.returncode != 0 or "<html" not in probe.stdout:
        raise nstest.Skip(f"chromium cannot run headless here: "
                          f"{probe.stderr.strip()[-200:]}")
    a, b, base = start_http_node(net)
    peers = len(a.peers())
    args = [chromium, "--headless", "--no-sandbox", "--disable-gpu",
            "--user-data-dir=" + os.path.join(net.dir, "chromium"),
            "--virtual-time-budget=5000"]
    shot = os.path.join(net.dir, "status.png")
    t0 = time.monotonic()
    r = subprocess.run(args + ["--window-size=1280,900",
                               "--screenshot=" + shot, base + "/"],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, f"screenshot failed: {r.stderr[-300:]}")
    with open(shot, "rb") as f:
        png = f.read()
    check(png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000,
          f"not a screenshot: {len(png)} bytes")
    r = subprocess.run(args + ["--dump-dom", base + "/"],
                       capture_output=True, text=True, timeout=60)
    log(f"chromium: screenshot ({len(png)} bytes) and DOM in "
        f"{time.monotonic() - t0:.1f}s")
    dom = r.stdout
    check(f'<code id="node-id">{a.id}</code>' in dom,
          f"the rendered page lacks the node id: {dom[:600]}")
    check(f'<b id="peer-count">{peers}</b>' in dom,
          f"the rendered page lacks the peer count {peers}")
    check(b.id[:10] in dom, "the peers table lacks node1")
    check('<span id="err"></span>' in dom, "the page could not fetch")


if __name__ == "__main__":
    if sys.argv[1:] == ["browser"]:
        nstest.main(test_browser, "status_page_browser")
    else:
        nstest.main(test_urllib, "http_status")
