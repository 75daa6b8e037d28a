#!/usr/bin/env python3
"""Real nodes over an emulated WAN (issue 27, part 3): N `nightshift node`
processes on this machine, each in a network namespace of its own, joined
by a router namespace (tests/integration/wannet.py): regions as bridges,
round trips between regions from published AWS inter-region pings (netem,
where the kernel has it), home uplinks of 1-10 MB/s and downlinks 4x that
(tbf), a little loss (nftables), and a share of the nodes behind a
carrier-grade NAT (SNAT, nothing gets in; those nodes run with
node.reachable=no). One genesis funds every node and every node stakes.
Jobs (a vector_add of --items floats) are submitted through the nodes
(`nightshift submit --node`, a node drawn in turn, NAT ones included) at
--jobs-per-s for --minutes; then ONE JSON document with the keys of
nightshift-sim --json (docs/DESIGN.md) is printed. Figures only: nothing
passes or fails.

    sudo bench/bench_wan.py --nodes N --minutes M --jobs-per-s J
                            [--nat-share F] [--seed S] [--regions K]
                            [--loss P] [--heartbeat-ms MS] [--json]

How each figure is had (the window is the --minutes of jobs; the nodes'
clocks are this machine's, so times of different nodes compare):
  heartbeat_reach_ms  the nodes' own propagation samples: on each
                      heartbeat from a live peer, now - its origin's send
                      time (the `latency` control query, via
                      build/bench/bench_ctl, read every 20 s).
  entry_reach_ms      per ledger entry made in the window and per node
                      that stored it (the author, the first to store it,
                      left out): the node's log time of event=entry_stored
                      (log.debug=ledger) - the entry's timestamp_ms.
  confirm_ms          per entry and node: the log time of
                      event=entry_confirmed (the vote quorum reached there)
                      - the entry's timestamp_ms.
  match_ms            timings_ms.match of the submit receipts.
  bytes_per_node_s,   (rx + tx) from `status --json` messages.{rx,tx}_bytes
  msgs_per_node_s     and .{rx,tx}, per node, between its readings at the
                      window's start and end (each over its own span:
                      reading 100 loaded nodes takes a while).
  verifies_per_node_s messages.sig_verifies (every ns_sig_verify call of
                      the node process), likewise.
  jobs                posted: submits started; settled: receipts with
                      status settled.
  ledger_bytes_per_node  the mean allocated size of DATADIR/ledger (LMDB)
                      at the end.
  sim_seconds         the window, wall_seconds the whole run (set-up and
                      tear-down included).
"emulation" says what the WAN was (and why delays are off where netem is
missing), "detail" the rest (rx/tx split, entries seen, jobs failed).

Every namespace and process made is removed at the end, on Ctrl-C and on
error (try/finally, atexit, PR_SET_PDEATHSIG on the nodes).
"""
import argparse
import atexit
import concurrent.futures
import ctypes
import json
import os
import random
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import netns  # noqa: E402
import wannet  # noqa: E402

BIN = os.environ.get("NIGHTSHIFT_BIN") or os.path.join(ROOT, "build",
                                                       "nightshift")
CTL = os.path.join(os.path.dirname(BIN), "bench", "bench_ctl")
CREDITS = 1000000
_libc = ctypes.CDLL(None, use_errno=True)


def _pdeathsig():
    _libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def say(msg):
    print(f"bench_wan: {msg}", file=sys.stderr, flush=True)


def cli(*args, timeout=60):
    r = subprocess.run([BIN, *map(str, args)], capture_output=True,
                       text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise RuntimeError(f"nightshift {' '.join(map(str, args[:2]))}: "
                           f"{r.stderr.strip()[-500:]}")
    return r.stdout


def status(datadir):
    try:
        r = subprocess.run([BIN, "status", "--datadir", datadir, "--json"],
                           capture_output=True, text=True, timeout=20)
        return json.loads(r.stdout) if r.returncode == 0 else None
    except (subprocess.SubprocessError, ValueError):
        return None


def statuses(dirs):
    """{datadir: (monotonic time, status doc or None)}, 8 at a time: on a
    loaded machine one `status` can take seconds."""
    def one(d):
        t0 = time.monotonic()
        doc = status(d)
        return d, ((t0 + time.monotonic()) / 2, doc)
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        return dict(ex.map(one, dirs))


def pct(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))], 1)


def p50_99(xs):
    return {"p50": pct(xs, .5), "p99": pct(xs, .99)}


def mean_max(xs):
    if not xs:
        return {"mean": None, "max": None}
    return {"mean": round(statistics.mean(xs), 1), "max": round(max(xs), 1)}


def disk_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.stat(os.path.join(root, f)).st_blocks * 512
            except OSError:
                pass
    return total


LOG_RE = re.compile(r"^ts=(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)\.(\d{3})Z"
                    r" .*?event=entry_(stored|confirmed) id=([0-9a-f]+)"
                    r"(?: type=\d+ author_ms=(\d+))?")


def log_events(path):
    """[(wall ms, 'stored'|'confirmed', id, author_ms or None)] of a node
    log."""
    import calendar
    out = []
    try:
        f = open(path, errors="replace")
    except OSError:
        return out
    with f:
        for line in f:
            if "event=entry_" not in line:
                continue
            m = LOG_RE.match(line)
            if not m:
                continue
            y, mo, d, h, mi, s, ms = map(int, m.groups()[:7])
            t = calendar.timegm((y, mo, d, h, mi, s)) * 1000 + ms
            out.append((t, m.group(8), m.group(9),
                        int(m.group(10)) if m.group(10) else None))
    return out


class Bench:
    def __init__(self, args):
        self.args = args
        self.procs = []
        self.work = tempfile.mkdtemp(prefix="bench-wan-")
        self.wan = None
        self.closed = False
        atexit.register(self.close)

    # -- the network --------------------------------------------------------

    def build(self):
        a = self.args
        t0 = time.monotonic()
        self.wan = wannet.Wan(a.nodes, nat_share=a.nat_share, seed=a.seed,
                              regions=a.regions, loss=a.loss)
        say(f"{len(self.wan.hosts)} namespaces in "
            f"{time.monotonic() - t0:.1f} s; "
            f"{self.wan.describe()['nat_nodes']} behind NAT; delays: "
            f"{self.wan.delay or 'on'}")
        self.dirs = [os.path.join(self.work, f"node{h.i}")
                     for h in self.wan.hosts]

        def init(d):
            cli("init", "--datadir", d, "--listen",
                f"tcp://0.0.0.0:{wannet.PORT}", "--set",
                f"node.stake={CREDITS // 2}", "--set",
                f"node.heartbeat_interval_ms={a.heartbeat_ms}")
            return cli("id", "--datadir", d).split()[0]
        with concurrent.futures.ThreadPoolExecutor(4) as ex:
            self.ids = list(ex.map(init, self.dirs))
        genesis = os.path.join(self.work, "genesis.ini")
        alloc = []
        for i in self.ids:
            alloc += ["--alloc", f"{i}={CREDITS}"]
        cli("genesis", "--out", genesis, "--name", f"wan-{os.getpid()}",
            *alloc)
        with concurrent.futures.ThreadPoolExecutor(4) as ex:
            list(ex.map(lambda d: cli("init", "--datadir", d, "--genesis",
                                      genesis), self.dirs))
        # one device benchmark shared by all (as testnet/run.sh does): N
        # nodes measuring at once would measure the contention
        try:
            cli("devices", "--datadir", self.dirs[0], "--json", timeout=300)
            src = os.path.join(self.dirs[0], "devbench.msgpack")
            for d in self.dirs[1:]:
                shutil.copy(src, d)
        except (RuntimeError, OSError, subprocess.SubprocessError) as e:
            say(f"no shared device benchmark ({e}); each node measures")

    def start(self):
        a = self.args
        hosts = self.wan.hosts
        boot = [f"{self.ids[i]}@tcp://{hosts[i].ip}:{wannet.PORT}"
                for i in range(min(2, len(hosts)))]
        for h, d in zip(hosts, self.dirs):
            args = self.wan.exec_args(h) + [
                BIN, "node", "--datadir", d, "--set",
                f"node.region={h.region_name}", "--set", "log.debug=ledger"]
            if h.nat:
                args += ["--set", "node.reachable=no"]
            else:
                args += ["--set",
                         f"node.advertise=tcp://{h.ip}:{wannet.PORT}"]
            for b in boot:
                if not b.startswith(self.ids[h.i]):
                    args += ["--bootstrap", b]
            log = open(os.path.join(d, "node.log"), "ab")
            try:
                self.procs.append(subprocess.Popen(
                    args, stdin=subprocess.DEVNULL, stdout=log,
                    stderr=subprocess.STDOUT, preexec_fn=_pdeathsig))
            finally:
                log.close()
            time.sleep(0.1)  # each starts with a self-check of its device
            if h.i == 0:
                self._wait(lambda: status(d) is not None, 60,
                           "node 0 to answer")
        t0 = time.monotonic()
        # a NAT node can reach the public ones only (nothing gets in to
        # another NAT node); formed when each lists 8 it can reach (or all)
        n_pub = sum(not h.nat for h in hosts)
        want = [min(8, n_pub if h.nat else a.nodes - 1) for h in hosts]

        def formed():
            st = statuses(self.dirs)
            self.peer_counts = [st[d][1]["peers"] if st[d][1] else -1
                                for d in self.dirs]
            return all(c >= w for c, w in zip(self.peer_counts, want))
        ok = self._wait(formed, a.form_timeout, "the network to form",
                        fatal=False)
        self.formed_s = time.monotonic() - t0
        say(f"network {'formed' if ok else 'NOT fully formed'} in "
            f"{self.formed_s:.0f} s (live peers: min "
            f"{min(self.peer_counts)}, median "
            f"{statistics.median(self.peer_counts)})")

        # every node's stake on node 0's ledger before jobs start
        def staked():
            s = status(self.dirs[0])
            try:
                return s["votes"]["staked_accounts"] >= a.nodes
            except (TypeError, KeyError):
                r = subprocess.run([BIN, "ledger", "--datadir", self.dirs[0],
                                    "--json", "--limit", "0"],
                                   capture_output=True, text=True)
                try:
                    return json.loads(r.stdout)["entries"] >= a.nodes
                except ValueError:
                    return False
        self._wait(staked, a.form_timeout, "the stakes to spread",
                   fatal=False)

    def _wait(self, fn, timeout, what, fatal=True):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"a node exited ({p.returncode}) "
                                       f"while waiting for {what}: "
                                       f"{' '.join(p.args[-8:])}")
            if fn():
                return True
            time.sleep(1)
        if fatal:
            raise RuntimeError(f"timed out waiting for {what}")
        say(f"timed out waiting for {what}; going on")
        return False

    # -- the window -----------------------------------------------------------

    def latency(self):
        """Drain every node's heartbeat propagation ring (us)."""
        def one(d):
            try:
                r = subprocess.run([CTL, d, "latency"], capture_output=True,
                                   text=True, timeout=30)
                return json.loads(r.stdout)
            except (OSError, ValueError, subprocess.SubprocessError):
                return []
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            return [x for xs in ex.map(one, self.dirs) for x in xs]

    def jobs(self, until):
        a = self.args
        rnd = random.Random(a.seed)
        n = a.items
        pa, pb = (os.path.join(self.work, x) for x in ("a.bin", "b.bin"))
        for p in (pa, pb):
            with open(p, "wb") as f:
                f.write(struct.pack(f"{n}f", *[rnd.uniform(-1, 1)
                                               for _ in range(n)]))
        order = list(range(a.nodes))
        rnd.shuffle(order)
        receipts, threads = [], []
        lock = threading.Lock()
        k = 0

        def one(k, d):
            out = os.path.join(self.work, f"out{k}.bin")
            t0 = time.monotonic()
            try:
                r = subprocess.run(
                    [BIN, "submit", "--node", d, "--builtin", "vector_add",
                     "--global", str(n), "--arg", f"in:{pa}", "--arg",
                     f"in:{pb}", "--arg", f"out:{4 * n}:{out}", "--arg",
                     f"u32:{n}", "--max-price", "10", "--bid-window-ms",
                     str(a.bid_window_ms), "--deadline-s",
                     str(a.job_timeout),
                     "--timeout-s", str(a.job_timeout), "--json"],
                    capture_output=True, text=True, stdin=subprocess.DEVNULL,
                    timeout=a.job_timeout + 30)
                try:
                    doc = json.loads(r.stdout)
                except ValueError:
                    doc = {"status": "failed", "error": f"exit "
                           f"{r.returncode}: {r.stderr.strip()[-200:]}"}
            except subprocess.SubprocessError as e:
                doc = {"status": "failed", "error": str(e)[-200:]}
            doc["wall_ms"] = (time.monotonic() - t0) * 1000
            try:
                os.unlink(out)
            except OSError:
                pass
            with lock:
                receipts.append(doc)
        gap = 1.0 / a.jobs_per_s
        t = time.monotonic()
        while t < until:
            if sum(th.is_alive() for th in threads) < a.max_inflight:
                d = self.dirs[order[k % len(order)]]
                th = threading.Thread(target=one, args=(k, d), daemon=True)
                th.start()
                threads.append(th)
                k += 1
            else:
                say("submits in flight at the cap; one skipped")
            t += rnd.expovariate(1.0 / gap)
            time.sleep(max(0.0, t - time.monotonic()))
        return k, receipts, threads

    def run(self):
        a = self.args
        t_all = time.monotonic()
        self.build()
        self.start()
        self.latency()  # from here on
        before = statuses(self.dirs)
        w0 = time.monotonic()
        w0_wall_ms = time.time() * 1000
        window = a.minutes * 60
        hb = []
        stop = threading.Event()

        def drain():
            while not stop.wait(20):
                hb.extend(self.latency())
        drainer = threading.Thread(target=drain, daemon=True)
        drainer.start()
        posted, receipts, threads = self.jobs(w0 + window)
        w1 = time.monotonic()
        after = statuses(self.dirs)
        stop.set()
        drainer.join()
        hb.extend(self.latency())
        say(f"window over ({posted} jobs posted); waiting for the "
            f"{sum(t.is_alive() for t in threads)} in flight")
        for th in threads:
            th.join(timeout=max(1, a.job_timeout + 40))
        time.sleep(a.tail)  # the last entries' votes
        span = w1 - w0
        doc = self.figures(posted, receipts, before, after, span, hb,
                           w0_wall_ms)
        doc["wall_seconds"] = None  # set after the tear-down
        return doc, t_all

    def figures(self, posted, receipts, before, after, window, hb, w0_ms):
        per = {"bytes": [], "msgs": [], "verifies": [], "rx_bytes": [],
               "tx_bytes": []}
        missing_verifies = False
        for d in self.dirs:
            (tb, b), (te, e) = before[d], after[d]
            if not b or not e or te <= tb:
                continue
            span = te - tb  # this node's own, between its two readings
            mb, me = b["messages"], e["messages"]
            per["bytes"].append((me["rx_bytes"] + me["tx_bytes"] -
                                 mb["rx_bytes"] - mb["tx_bytes"]) / span)
            per["rx_bytes"].append((me["rx_bytes"] - mb["rx_bytes"]) / span)
            per["tx_bytes"].append((me["tx_bytes"] - mb["tx_bytes"]) / span)
            per["msgs"].append((me["rx"] + me["tx"] - mb["rx"] - mb["tx"]) /
                               span)
            if "sig_verifies" in me and "sig_verifies" in mb:
                per["verifies"].append((me["sig_verifies"] -
                                        mb["sig_verifies"]) / span)
            else:
                missing_verifies = True
        # entries: first store (the author), stores and confirmations
        made, stored, confirmed = {}, {}, {}
        for d in self.dirs:
            for t, kind, eid, author_ms in log_events(
                    os.path.join(d, "node.log")):
                if kind == "stored":
                    made[eid] = author_ms
                    stored.setdefault(eid, []).append(t)
                else:
                    confirmed.setdefault(eid, []).append(t)
        reach, conf = [], []
        window_ids = [e for e, ts in made.items() if ts and ts >= w0_ms]
        for eid in window_ids:
            ts = sorted(stored[eid])
            reach += [t - made[eid] for t in ts[1:]]
            conf += [t - made[eid] for t in confirmed.get(eid, [])]
        ok = [r for r in receipts if r.get("status") == "settled"]
        match = [r["timings_ms"]["match"] for r in ok
                 if "match" in r.get("timings_ms", {})]
        ledger = [disk_bytes(os.path.join(d, "ledger")) for d in self.dirs]
        fails = {}
        for r in receipts:
            if r.get("status") != "settled":
                why = str(r.get("error", r.get("status")))[-160:]
                fails[why] = fails.get(why, 0) + 1
        n_pairs = len(window_ids) * max(0, len(self.dirs) - 1)
        return {
            "nodes": len(self.dirs),
            "sim_seconds": round(window, 1),
            "wall_seconds": None,
            "heartbeat_reach_ms": p50_99([u / 1000 for u in hb]),
            "entry_reach_ms": p50_99(reach),
            "confirm_ms": p50_99(conf),
            "match_ms": p50_99(match),
            "bytes_per_node_s": mean_max(per["bytes"]),
            "msgs_per_node_s": mean_max(per["msgs"]),
            "verifies_per_node_s": (mean_max(per["verifies"])
                                    if not missing_verifies else None),
            "jobs": {"posted": posted, "settled": len(ok)},
            "ledger_bytes_per_node": (round(statistics.mean(ledger))
                                      if ledger else None),
            "emulation": self.wan.describe(),
            "detail": {
                "formed_s": round(self.formed_s, 1),
                "live_peers_min": min(self.peer_counts),
                "rx_bytes_per_node_s": mean_max(per["rx_bytes"]),
                "tx_bytes_per_node_s": mean_max(per["tx_bytes"]),
                "heartbeat_samples": len(hb),
                "entries_in_window": len(window_ids),
                "entry_stores_seen": len(reach) + len(window_ids),
                "entry_node_pairs": n_pairs,
                "confirmations_seen": len(conf),
                "jobs_failed": fails,
                "submit_wall_ms": p50_99([r["wall_ms"] for r in ok]),
                "verifies": (None if not missing_verifies else
                             "this binary's status has no "
                             "messages.sig_verifies"),
                "cpus": os.cpu_count(),
                "load_end": [round(x, 2) for x in os.getloadavg()],
            },
        }

    # -- the end ---------------------------------------------------------------

    def close(self):
        if self.closed:
            return
        self.closed = True
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + 10
        for p in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if self.wan:
            self.wan.close()
        if self.args.keep:
            say(f"files kept in {self.work}")
        else:
            shutil.rmtree(self.work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--minutes", type=float, default=2)
    ap.add_argument("--jobs-per-s", type=float, default=0.1)
    ap.add_argument("--nat-share", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--regions", type=int, default=len(wannet.REGIONS))
    ap.add_argument("--loss", type=float, default=0.002,
                    help="share of forwarded packets dropped (0.002)")
    ap.add_argument("--heartbeat-ms", type=int, default=1000)
    ap.add_argument("--items", type=int, default=1024,
                    help="floats per vector_add job")
    ap.add_argument("--bid-window-ms", type=int, default=1500)
    ap.add_argument("--job-timeout", type=int, default=240,
                    help="submit's --timeout-s and --deadline-s (240)")
    ap.add_argument("--max-inflight", type=int, default=16)
    ap.add_argument("--form-timeout", type=float, default=120)
    ap.add_argument("--tail", type=float, default=5,
                    help="seconds after the last job for its votes")
    ap.add_argument("--keep", action="store_true",
                    help="keep the datadirs and logs")
    ap.add_argument("--json", action="store_true",
                    help="print the JSON document (always printed; the "
                         "flag is for the simulator's command line)")
    args = ap.parse_args()
    if args.nodes < 2 or args.jobs_per_s <= 0 or args.minutes <= 0:
        ap.error("--nodes >= 2, --jobs-per-s > 0, --minutes > 0")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    b = Bench(args)
    try:
        doc, t0 = b.run()
    except netns.NetnsUnavailable as e:
        say(f"cannot build the emulated WAN: {e}")
        b.close()
        sys.exit(77)
    except KeyboardInterrupt:
        say("interrupted; nodes and namespaces removed")
        b.close()
        sys.exit(130)
    finally:
        b.close()
    doc["wall_seconds"] = round(time.monotonic() - t0, 1)
    print(json.dumps(doc, indent=2), flush=True)


if __name__ == "__main__":
    main()
