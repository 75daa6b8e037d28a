"""nstest - helpers for the nightshift integration tests (python3 >= 3.11,
stdlib only).

Every test starts real `nightshift node` processes in a temporary directory
and drives them through the CLI, as users and scripts do:

    import nstest

    def test(net):
        a, b = net.make_nodes(2)          # init'ed, one shared genesis
        net.start_all([a, b])             # b bootstraps to a
        net.wait_mesh([a, b])
        nstest.check(b.id in a.peer_ids(), "a does not list b")

    nstest.main(test, "example")

Guarantees:
  * whatever a test starts is stopped when it ends, pass or fail: the
    Net context kills its processes and runs registered cleanups, and each
    node gets PR_SET_PDEATHSIG so it dies with the test even when ctest
    kills the test on a timeout;
  * nodes listen on port 0 (a free port chosen by the kernel); a test that
    needs fixed ports reserves a block with reserve_ports(), locked across
    processes, so parallel ctest runs never collide;
  * waits have generous timeouts and say what they waited for and what
    they saw last; on failure the tails of the node logs are printed and
    the temp dir is kept.

Environment (set by tests/integration/CMakeLists.txt): NIGHTSHIFT_BIN,
NS_FLOOD_BIN, NS_REPO_ROOT. Without them the build/ tree of the repository
holding this file is used.
"""

import ctypes
import fcntl
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

REPO = os.environ.get("NS_REPO_ROOT") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("NIGHTSHIFT_BIN") or os.path.join(REPO, "build",
                                                        "nightshift")
FLOOD_BIN = os.environ.get("NS_FLOOD_BIN") or os.path.join(
    REPO, "build", "tests", "integration", "ns_flood")

DEFAULT_HEARTBEAT_MS = 500
_SANITIZER_MARK = "Sanitizer"  # "ERROR: AddressSanitizer", LeakSanitizer...
_T0 = time.monotonic()


SKIP_EXIT = 77  # ctest's SKIP_RETURN_CODE for these tests


class Skip(Exception):
    """Raised by a test that cannot run here (say why): exit 77, which
    ctest reports as skipped, not passed."""


class TestFailure(AssertionError):
    """A behaviour the test asserts did not hold."""


def log(msg):
    print(f"[{time.monotonic() - _T0:7.2f}s] {msg}", flush=True)


def check(cond, msg):
    if not cond:
        raise TestFailure(msg)


def check_eq(got, want, what):
    if got != want:
        raise TestFailure(f"{what}: got {got!r}, expected {want!r}")


def wait_until(fn, timeout, what, interval=0.1):
    """Call fn() until it returns a truthy value or (True, detail); return
    that value. On timeout raise TestFailure naming `what` and the last
    detail fn gave (fn may return (False, detail))."""
    deadline = time.monotonic() + timeout
    detail = None
    while True:
        try:
            r = fn()
        except TestFailure as e:
            r = (False, str(e))
        ok, detail = (r if isinstance(r, tuple) and len(r) == 2
                      else (r, detail))
        if ok:
            return r
        if time.monotonic() >= deadline:
            raise TestFailure(f"timed out after {timeout:.1f}s waiting for "
                              f"{what}; last seen: {detail}")
        time.sleep(interval)


# ---- processes -----------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    """preexec_fn: the child gets SIGKILL when the test process dies."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def cli(*args, timeout=20, env=None):
    """Run `nightshift ARGS`; returns CompletedProcess (text mode)."""
    return subprocess.run([BIN, *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=env,
                          stdin=subprocess.DEVNULL)


def cli_ok(*args, timeout=20):
    r = cli(*args, timeout=timeout)
    if r.returncode != 0:
        raise TestFailure(f"`nightshift {' '.join(map(str, args))}` exited "
                          f"{r.returncode}: {r.stderr.strip()}")
    return r.stdout


def pid_alive(pid):
    """True while pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def pid_cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace")
                    for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def proc_kib(pid, key):
    """A figure of /proc/PID/status in KiB ("VmHWM", "RssAnon"); 0 when
    the process does not show it."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


class PeakMem:
    """Peak RssAnon (heap and other private memory) and RssFile (mapped
    files: reclaimable) of pid in KiB, sampled every 5 ms on a thread
    until stop(), which returns the peak RssAnon."""

    def __init__(self, pid):
        self.pid, self.anon, self.file, self.on = pid, 0, 0, True
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while self.on:
            try:
                self.anon = max(self.anon, proc_kib(self.pid, "RssAnon"))
                self.file = max(self.file, proc_kib(self.pid, "RssFile"))
            except (OSError, ValueError):
                return
            time.sleep(0.005)

    def stop(self):
        self.on = False
        self.t.join()
        return self.anon


def file_digest(path, algo="sha256"):
    """The hex digest of a file read in 1 MiB pieces (a test never holds a
    large file whole: a child's wait4 peak starts from its parent's);
    "blake2b" is BLAKE2b-256, as the blob store names blobs."""
    h = (hashlib.blake2b(digest_size=32) if algo == "blake2b" else
         hashlib.new(algo))
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                return h.hexdigest()
            h.update(b)


def error_lines(stderr):
    return [l for l in stderr.splitlines() if l.strip()]


# ---- ports -----------------------------------------------------------------

_PORT_LOCK_DIR = os.path.join(tempfile.gettempdir(), "nightshift-test-ports")
_PORT_BLOCK = 64


def _port_free(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def reserve_ports(n, lo=20000, hi=32000):
    """A base port such that base..base+n-1 are free, below the kernel's
    ephemeral range (so outgoing connections cannot take them meanwhile),
    inside a 64-port block locked (flock) for as long as the returned file
    object stays open: two tests running at once never get the same block.
    Returns (base, lock_file)."""
    check(n <= _PORT_BLOCK, f"reserve_ports: at most {_PORT_BLOCK} ports")
    os.makedirs(_PORT_LOCK_DIR, exist_ok=True)
    blocks = list(range(lo // _PORT_BLOCK, hi // _PORT_BLOCK))
    random.shuffle(blocks)
    for b in blocks:
        path = os.path.join(_PORT_LOCK_DIR, f"block-{b}.lock")
        f = open(path, "a")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            continue
        base = b * _PORT_BLOCK
        if all(_port_free(p) for p in range(base, base + n)):
            return base, f
        f.close()
    raise TestFailure(f"no free block of {n} ports in {lo}..{hi}")


# ---- nodes -------------------------------------------------------------------

class Node:
    """One datadir and, once started, the `nightshift node` process on it."""

    def __init__(self, net, name):
        self.net = net
        self.name = name
        self.datadir = os.path.join(net.dir, name)
        self.log_path = os.path.join(self.datadir, "node.log")
        self.proc = None
        self.id = None
        self.bootstrap = []
        self.netns = None  # run inside this network namespace (netns.py)

    def __repr__(self):
        return f"<{self.name} {self.id[:10] if self.id else '?'}>"

    def init(self, genesis=None, listen="tcp://127.0.0.1:0"):
        args = ["init", "--datadir", self.datadir, "--listen", listen]
        if genesis:
            args += ["--genesis", genesis]
        cli_ok(*args)
        self.id = cli_ok("id", "--datadir", self.datadir).splitlines()[0]
        check(len(self.id) == 52, f"{self.name}: odd id {self.id!r}")
        return self

    def start(self, bootstrap=(), heartbeat_ms=None, extra=(), wait=True):
        """Start the node (log appended to node.log). bootstrap: Nodes or
        address strings."""
        check(self.proc is None or self.proc.poll() is not None,
              f"{self.name} is already running")
        hb = heartbeat_ms or self.net.heartbeat_ms
        args = [BIN, "node", "--datadir", self.datadir,
                "--set", f"node.heartbeat_interval_ms={hb}"]
        self.bootstrap = [b.addr if isinstance(b, Node) else b
                          for b in bootstrap]
        for b in self.bootstrap:
            args += ["--bootstrap", b]
        args += list(extra)
        if self.netns:
            args = ["ip", "netns", "exec", self.netns] + args
        logf = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                         stdout=logf, stderr=subprocess.STDOUT,
                                         preexec_fn=_die_with_parent)
        finally:
            logf.close()
        self.net.procs.append(self.proc)
        if wait:
            self.wait_started()
        return self

    def wait_started(self, timeout=20):
        """Wait until the node answers `status` on its control socket."""
        def up():
            if self.proc.poll() is not None:
                raise TestFailure(
                    f"{self.name} exited with {self.proc.returncode} at "
                    f"start: {self.log_tail(5)}")
            r = cli("status", "--datadir", self.datadir, "--json")
            return (r.returncode == 0, r.stderr.strip())
        wait_until(up, timeout, f"{self.name} to answer status")

    @property
    def addr(self):
        """The running node's address (DATADIR/node.addr)."""
        with open(os.path.join(self.datadir, "node.addr")) as f:
            a = f.read().strip()
        check(a.startswith(self.id + "@"), f"{self.name}: node.addr {a!r}")
        return a

    @property
    def endpoint(self):
        return self.addr.split("@", 1)[1]

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def query(self, what, timeout=20):
        r = cli(what, "--datadir", self.datadir, "--json", timeout=timeout)
        if r.returncode != 0:
            raise TestFailure(f"`nightshift {what}` on {self.name} exited "
                              f"{r.returncode}: {r.stderr.strip()}")
        try:
            return json.loads(r.stdout)
        except json.JSONDecodeError as e:
            raise TestFailure(f"`nightshift {what} --json` on {self.name} "
                              f"printed invalid JSON ({e}): {r.stdout[:200]}")

    def status(self):
        return self.query("status")

    def peers(self):
        doc = self.query("peers")
        check(isinstance(doc, list), f"{self.name}: peers --json is not a "
                                     f"list: {doc!r:.200}")
        return doc

    def peer_ids(self):
        return {p["id"] for p in self.peers()}

    def signal(self, sig):
        if self.running():
            self.proc.send_signal(sig)

    def kill(self):
        """SIGKILL and reap."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(timeout=10)

    def stop(self, timeout=10):
        """SIGTERM, wait, return the exit status (SIGKILL after timeout)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
                raise TestFailure(f"{self.name} did not exit within "
                                  f"{timeout}s of SIGTERM")
        return self.proc.returncode

    def log_text(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def log_tail(self, n=15):
        lines = self.log_text().splitlines()[-n:]
        return "\n".join(lines) if lines else "(empty log)"


class Net:
    """A temp dir with nodes; a context manager that stops all it started."""

    def __init__(self, name, heartbeat_ms=DEFAULT_HEARTBEAT_MS):
        self.name = name
        self.heartbeat_ms = heartbeat_ms
        self.dir = tempfile.mkdtemp(prefix=f"nstest-{name}-")
        self.nodes = []
        self.procs = []
        self.cleanups = []
        self.failed = False

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.failed = exc_type is not None
        self.close()
        return False

    def at_exit(self, fn):
        """Run fn() when the net closes (last registered runs first)."""
        self.cleanups.append(fn)

    def close(self):
        for fn in reversed(self.cleanups):
            try:
                fn()
            except Exception as e:  # cleanup must go on
                log(f"cleanup failed: {e!r}")
        self.cleanups = []
        running = [p for p in self.procs if p.poll() is None]
        for p in running:
            p.terminate()
        deadline = time.monotonic() + 5
        problems = []
        for p in running:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                problems.append(f"pid {p.pid} ignored SIGTERM for 5s")
        # Nodes still up at the end must stop cleanly, and no node may
        # have hit a sanitizer (ASan/UBSan builds) at any point.
        for n in self.nodes:
            if n.proc in running and n.proc.returncode != 0:
                problems.append(f"{n.name} exited {n.proc.returncode} on "
                                f"SIGTERM")
        for root, _, files in os.walk(self.dir):
            if "node.log" in files:
                path = os.path.join(root, "node.log")
                with open(path, errors="replace") as f:
                    for line in f:
                        if _SANITIZER_MARK in line or "runtime error:" in line:
                            problems.append(f"{path}: {line.strip()}")
                            break
        if problems and not self.failed:
            self.failed = True
            print("\n".join(problems), flush=True)
        else:
            problems = []
        if self.failed:
            for n in self.nodes:
                print(f"---- {n.name} ({n.id}) log tail ----\n"
                      f"{n.log_tail(25)}", flush=True)
            print(f"(test files kept in {self.dir})", flush=True)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)
        if problems:
            raise TestFailure(f"after the test: {problems[0]}")

    # -- building networks ----------------------------------------------

    def node(self, name):
        n = Node(self, name)
        os.makedirs(n.datadir, mode=0o700, exist_ok=True)
        self.nodes.append(n)
        return n

    def genesis(self, nodes, path=None, name=None, credits=1000000):
        path = path or os.path.join(self.dir, "genesis.ini")
        args = ["genesis", "--out", path, "--name", name or f"net-{self.name}"]
        for n in nodes:
            args += ["--alloc", f"{n.id}={credits}"]
        cli_ok(*args)
        return path

    def named_nodes(self, *names):
        """Nodes of these names, init'ed, one new genesis funding them all
        (not started)."""
        nodes = [self.node(name).init() for name in names]
        g = self.genesis(nodes)
        for n in nodes:
            cli_ok("init", "--datadir", n.datadir, "--genesis", g)
        return nodes

    def make_nodes(self, count, prefix="node", genesis_name=None):
        """count init'ed nodes sharing one new genesis."""
        nodes = [self.node(f"{prefix}{i}").init() for i in range(count)]
        g = self.genesis(nodes, os.path.join(self.dir, f"{prefix}-genesis.ini"),
                         name=genesis_name)
        for n in nodes:
            cli_ok("init", "--datadir", n.datadir, "--genesis", g)
        return nodes

    def start_all(self, nodes):
        """Start nodes[0], then the rest bootstrapping to it (and to
        nodes[1], as testnet/run.sh does)."""
        nodes[0].start()
        boot = [nodes[0]] + ([nodes[1]] if len(nodes) > 2 else [])
        if len(nodes) > 1:
            nodes[1].start(bootstrap=[nodes[0]], wait=False)
            if len(nodes) > 2:
                nodes[1].wait_started()
        for n in nodes[2:]:
            n.start(bootstrap=boot, wait=False)
        for n in nodes[1:]:
            n.wait_started()

    def wait_mesh(self, nodes, timeout=30):
        """Wait until every node lists every other one as a live peer."""
        want = {n.id for n in nodes}

        def meshed():
            missing = []
            for n in nodes:
                check(n.running(), f"{n.name} died: {n.log_tail(5)}")
                got = n.peer_ids()
                lack = want - {n.id} - got
                if lack:
                    missing.append(f"{n.name} lacks {len(lack)}")
            return (not missing, ", ".join(missing))
        wait_until(meshed, timeout, f"all {len(nodes)} nodes to see each "
                                    f"other", interval=0.2)



def testnet_script(name, *args, timeout=90):
    """testnet/NAME (run.sh, stop.sh, ...) with this build's binary."""
    env = {**os.environ, "NIGHTSHIFT_BIN": BIN}
    return subprocess.run([os.path.join(REPO, "testnet", name),
                           *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env, stdin=subprocess.DEVNULL)


def testnet(net, n, interval_ms=500, close_window_s=None):
    """A testnet of n nodes (testnet/run.sh, heartbeats every interval_ms;
    the genesis close window run.sh's default, or close_window_s) in
    net.dir/tn on reserved ports, stopped when the test ends. Returns (its
    directory, its bootstrap address)."""
    tn = os.path.join(net.dir, "tn")
    base, port_lock = reserve_ports(n)
    net.at_exit(port_lock.close)
    net.at_exit(lambda: testnet_script("stop.sh", "-d", tn, timeout=30))
    window = ("-w", close_window_s) if close_window_s else ()
    r = testnet_script("run.sh", "-n", n, "-d", tn, "-p", base, "-i",
                       interval_ms, "-t", 60, *window)
    check(r.returncode == 0, f"run.sh: {r.stdout}\n{r.stderr}")
    with open(os.path.join(tn, "bootstrap")) as f:
        return tn, f.read().strip()

def main(test, name):
    """Run test(net) in a fresh Net; print PASS/FAIL; exit 0 or 1."""
    t0 = time.monotonic()
    # ctest may stop us with SIGTERM: unwind so the nodes are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        check(os.access(BIN, os.X_OK), f"no nightshift binary at {BIN} "
                                       f"(set NIGHTSHIFT_BIN)")
        with Net(name) as net:
            test(net)
    except Skip as e:
        print(f"SKIP {name}: {e}", flush=True)
        sys.exit(SKIP_EXIT)
    except TestFailure as e:
        print(f"FAIL {name} ({time.monotonic() - t0:.1f}s): {e}", flush=True)
        sys.exit(1)
    except Exception:
        traceback.print_exc()
        print(f"FAIL {name} ({time.monotonic() - t0:.1f}s): unexpected error",
              flush=True)
        sys.exit(1)
    print(f"PASS {name} ({time.monotonic() - t0:.1f}s)", flush=True)
    sys.exit(0)
