"""Linux network namespaces for the behind-a-router tests (test_nat.py,
test_nat_relay.py, bench/bench_nat.py).

    pub    10.77.0.1/24 ----+
                            | router (masquerade: nftables)
    home1  192.168.77.2 ----+  10.77.0.254 / 192.168.77.1 / 192.168.78.1
    home2  192.168.78.2 ----+

The router forwards only what a home opened: new connections from a home
to pub are masqueraded as 10.77.0.254; nothing from pub (or the other
home) gets in. Every name carries the test's pid, and everything is
removed by close() (and at exit). Needs root, iproute2 and nft
(`./setup.sh` installs nftables); NetnsUnavailable says why not.
"""
import atexit
import os
import shutil
import socket
import subprocess

PUB_IP = "10.77.0.1"
ROUTER_PUB_IP = "10.77.0.254"
HOME_IPS = ("192.168.77.2", "192.168.78.2")

NFT_RULES = """
table ip nat {
    chain home_nat {
        type nat hook postrouting priority 100; policy accept;
        oifname "rp" masquerade
    }
}
table inet filter {
    chain home_forward {
        type filter hook forward priority 0; policy drop;
        ct state established,related accept
        iifname { "rh0", "rh1" } oifname "rp" accept
    }
}
"""


class NetnsUnavailable(Exception):
    pass


def _run(*args, check=True):
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=20)
    if check and r.returncode != 0:
        raise NetnsUnavailable(f"`{' '.join(args)}` failed: "
                               f"{(r.stderr or r.stdout).strip()}")
    return r


class Topology:
    """pub, router, home1, home2 namespaces; .pub, .homes[i] are names."""

    def __init__(self, homes=2):
        if os.geteuid() != 0:
            raise NetnsUnavailable("network namespaces need root (CI runs "
                                   "as root)")
        for tool in ("ip", "nft"):
            if not shutil.which(tool):
                raise NetnsUnavailable(
                    f"`{tool}` not found (./setup.sh installs iproute2 and "
                    f"nftables)")
        tag = str(os.getpid())
        self.pub = f"nsp{tag}"
        self.router = f"nsr{tag}"
        self.homes = [f"nsh{i}-{tag}" for i in range(homes)]
        self.made = []
        atexit.register(self.close)
        try:
            self._build(tag)
        except BaseException:
            self.close()
            raise

    def _ns(self, ns, *args):
        return _run("ip", "netns", "exec", ns, *args)

    def _build(self, tag):
        for ns in [self.pub, self.router, *self.homes]:
            _run("ip", "netns", "add", ns)
            self.made.append(ns)
            self._ns(ns, "ip", "link", "set", "lo", "up")
        # veth pairs are made in the root namespace under unique names,
        # then moved and renamed inside
        pairs = [(self.pub, "eth0", f"{PUB_IP}/24", "rp",
                  f"{ROUTER_PUB_IP}/24")]
        for i, h in enumerate(self.homes):
            pairs.append((h, "eth0", f"{HOME_IPS[i]}/24", f"rh{i}",
                          f"192.168.{77 + i}.1/24"))
        for k, (ns, name, ip, rname, rip) in enumerate(pairs):
            a, b = f"va{k}x{tag}"[:15], f"vb{k}x{tag}"[:15]
            _run("ip", "link", "add", a, "type", "veth", "peer", "name", b)
            _run("ip", "link", "set", a, "netns", ns)
            _run("ip", "link", "set", b, "netns", self.router)
            self._ns(ns, "ip", "link", "set", a, "name", name)
            self._ns(ns, "ip", "addr", "add", ip, "dev", name)
            self._ns(ns, "ip", "link", "set", name, "up")
            self._ns(self.router, "ip", "link", "set", b, "name", rname)
            self._ns(self.router, "ip", "addr", "add", rip, "dev", rname)
            self._ns(self.router, "ip", "link", "set", rname, "up")
        for i, h in enumerate(self.homes):
            self._ns(h, "ip", "route", "add", "default", "via",
                     f"192.168.{77 + i}.1")
        self._ns(self.router, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        r = subprocess.run(["ip", "netns", "exec", self.router, "nft", "-f",
                            "-"], input=NFT_RULES, capture_output=True,
                           text=True, timeout=20)
        if r.returncode != 0:
            raise NetnsUnavailable(f"nft (masquerade) failed: "
                                   f"{r.stderr.strip()}")

    def close(self):
        for ns in reversed(self.made):
            _run("ip", "netns", "del", ns, check=False)
        self.made = []

    # -- checks of the topology itself -----------------------------------

    def tcp_probe(self, src_ns, dst_ns, dst_ip, timeout=2.0):
        """Open a listener in dst_ns and connect from src_ns: the address
        the listener saw, or None when the connection did not get
        through."""
        server = ("import socket,sys\n"
                  "s=socket.socket();s.bind(('0.0.0.0',0));s.listen(1)\n"
                  "print(s.getsockname()[1],flush=True)\n"
                  f"s.settimeout({timeout + 1})\n"
                  "try:\n c,a=s.accept();print(a[0],flush=True)\n"
                  "except OSError:\n print('none',flush=True)\n")
        srv = subprocess.Popen(["ip", "netns", "exec", dst_ns, "python3",
                                "-c", server], stdout=subprocess.PIPE,
                               text=True)
        try:
            port = int(srv.stdout.readline())
            client = ("import socket,sys\n"
                      f"socket.create_connection(('{dst_ip}',{port}),"
                      f"timeout={timeout})\n")
            subprocess.run(["ip", "netns", "exec", src_ns, "python3", "-c",
                            client], capture_output=True, timeout=timeout + 5)
            seen = srv.stdout.readline().strip()
        finally:
            srv.kill()
            srv.wait()
        return None if seen in ("", "none") else seen


def free_port():
    """A port number for a node in a fresh namespace (nothing else binds
    there, so any number in the range does)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
