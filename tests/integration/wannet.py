"""An emulated WAN of network namespaces for bench/bench_wan.py and
test_wan.py: one namespace per node, all joined to one router namespace
in which each region is a bridge.

    node i (ns wNNNNn<i>, eth0) ---- h<i> ---+ bridge b<r>: region r, public
                                             |   10.(10+r).0.0/16, router .0.1
    NAT node j (eth0) ------------- h<j> ---+ bridge n<r>: region r, NAT
                                                 172.(16+r).0.0/16; leaves
                                                 SNATed to 10.(10+r).0.1

The router (nftables) forwards between the regions, drops a share of the
forwarded packets (--loss: the WAN's loss), SNATs what a NAT node opens
(as a carrier-grade NAT would: one public address per region) and lets
nothing in to a NAT node that it did not open. Each node's uplink is rate
limited on its eth0 and its downlink on h<i> (tbf). Delays between
regions are netem qdiscs on h<i>, one class per source region (htb, u32
on the source /16: a NAT node's packets carry its region's address), of
half the round trip of the two regions plus the node's last mile; only
where the kernel has sch_netem (CONFIG_NET_SCH_NETEM): without it the
topology is built without delays and `delay` says why.

Every name carries the pid; close() kills what runs in the namespaces and
removes them (and runs at exit). Needs root, iproute2, tc and nft.
"""
import atexit
import os
import random
import shutil
import subprocess

from netns import NetnsUnavailable

# Round-trip times between regions, ms: the averages of the table
# "Latency Between AWS Global Regions" (pings between EC2 instances, one
# per region), as republished in "AWS Regions",
# https://acomputerscientistlearnsaws.blogspot.com/2017/04/aws-regions.html
# (N. Virginia, Oregon, Frankfurt, Sao Paulo, Tokyo, Sydney; rounded, the
# two directions' mean).
REGIONS = ("us-east", "us-west", "eu-central", "sa-east", "ap-tokyo",
           "ap-sydney")
RTT_MS = (
    # use  usw  fra  sao  tok  syd
    (0,    88,  89,  120, 145, 230),  # us-east (N. Virginia)
    (88,   0,   160, 183, 89,  162),  # us-west (Oregon)
    (89,   160, 0,   195, 237, 324),  # eu-central (Frankfurt)
    (120,  183, 195, 0,   257, 323),  # sa-east (Sao Paulo)
    (145,  89,  237, 257, 0,   104),  # ap-tokyo
    (230,  162, 324, 323, 104, 0),    # ap-sydney
)
PORT = 7946


def _run(*args, check=True, input=None):
    r = subprocess.run(list(args), capture_output=True, text=True,
                       timeout=30, input=input)
    if check and r.returncode != 0:
        raise NetnsUnavailable(f"`{' '.join(args)}` failed: "
                               f"{(r.stderr or r.stdout).strip()}")
    return r


class Host:
    """One node's place in the WAN."""

    def __init__(self, i, region, nat, ip, up_kbit, down_kbit, last_ms):
        self.i, self.region, self.nat, self.ip = i, region, nat, ip
        self.up_kbit, self.down_kbit, self.last_ms = (up_kbit, down_kbit,
                                                      last_ms)
        self.ns = None

    @property
    def region_name(self):
        return REGIONS[self.region]


class Wan:
    """The namespaces of n hosts; .hosts[i].ns is host i's namespace."""

    def __init__(self, n, nat_share=0.2, seed=1, regions=len(REGIONS),
                 loss=0.002, up_mbyte=(1.0, 10.0), down_ratio=4.0,
                 last_ms=(5, 15), public_first=2):
        if os.geteuid() != 0:
            raise NetnsUnavailable("network namespaces need root")
        for tool in ("ip", "tc", "nft"):
            if not shutil.which(tool):
                raise NetnsUnavailable(f"`{tool}` not found (./setup.sh "
                                       f"installs iproute2 and nftables)")
        if not 1 <= regions <= len(REGIONS):
            raise ValueError(f"regions: 1..{len(REGIONS)}")
        rnd = random.Random(seed)
        self.tag = f"w{os.getpid()}"
        self.router = f"{self.tag}r"
        self.regions, self.loss = regions, loss
        self.made = []
        n_nat = min(n - public_first, round(n * nat_share)) if n > 1 else 0
        nat = set(rnd.sample(range(public_first, n), max(0, n_nat)))
        self.hosts = []
        count = {}
        for i in range(n):
            r = i % regions
            k = count.get((r, i in nat), 0) + 1
            count[(r, i in nat)] = k
            base = f"172.{16 + r}" if i in nat else f"10.{10 + r}"
            ip = f"{base}.{1 + k // 250}.{1 + k % 250}"
            up = rnd.uniform(*up_mbyte) * 8000  # MB/s to kbit/s
            self.hosts.append(Host(i, r, i in nat, ip, int(up),
                                   int(up * down_ratio),
                                   rnd.randint(*last_ms)))
        atexit.register(self.close)
        self.delay = None  # why not, or None when delays are on
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    # -- building ---------------------------------------------------------

    def _ip(self, ns, *args, check=True):
        return _run("ip", "-n", ns, *args, check=check)

    def _tc(self, ns, *args, check=True):
        return _run("tc", "-n", ns, *args, check=check)

    def _netns(self, name):
        _run("ip", "netns", "add", name)
        self.made.append(name)
        self._ip(name, "link", "set", "lo", "up")

    def _build(self):
        R = self.router
        self._netns(R)
        _run("ip", "netns", "exec", R, "sysctl", "-qw",
             "net.ipv4.ip_forward=1")
        for r in range(self.regions):
            for br, addr in ((f"b{r}", f"10.{10 + r}.0.1/16"),
                             (f"n{r}", f"172.{16 + r}.0.1/16")):
                self._ip(R, "link", "add", br, "type", "bridge")
                self._ip(R, "addr", "add", addr, "dev", br)
                self._ip(R, "link", "set", br, "up")
        nat_rules = "\n".join(
            f'        ip saddr 172.{16 + r}.0.0/16 oifname != "n{r}" '
            f'snat to 10.{10 + r}.0.1' for r in range(self.regions))
        per_mille = int(round(self.loss * 100000))
        nat_ifs = ", ".join(f'"n{r}"' for r in range(self.regions))
        rules = f"""
table ip wan_nat {{
    chain wan_post {{
        type nat hook postrouting priority 100; policy accept;
{nat_rules}
    }}
}}
table inet wan_filter {{
    chain wan_forward {{
        type filter hook forward priority 0; policy accept;
        numgen random mod 100000 < {per_mille} drop
        oifname {{ {nat_ifs} }} ct state established,related accept
        oifname {{ {nat_ifs} }} drop
    }}
}}
"""
        r = _run("ip", "netns", "exec", R, "nft", "-f", "-", input=rules,
                 check=False)
        if r.returncode != 0:
            raise NetnsUnavailable(f"nft failed: {r.stderr.strip()}")
        probe = self._tc(R, "qdisc", "add", "dev", "b0", "root", "netem",
                         "delay", "1ms", check=False)
        if probe.returncode == 0:
            self._tc(R, "qdisc", "del", "dev", "b0", "root", check=False)
        else:
            self.delay = (f"no delays: this kernel has no netem qdisc "
                          f"({probe.stderr.strip()}; "
                          f"CONFIG_NET_SCH_NETEM)")
        for h in self.hosts:
            self._host(h)

    def _host(self, h):
        R = self.router
        h.ns = f"{self.tag}n{h.i}"
        self._netns(h.ns)
        hi = f"h{h.i}"
        self._ip(h.ns, "link", "add", "eth0", "type", "veth", "peer",
                 "name", hi, "netns", R)
        plen = 16
        self._ip(h.ns, "addr", "add", f"{h.ip}/{plen}", "dev", "eth0")
        self._ip(h.ns, "link", "set", "eth0", "up")
        gw = (f"172.{16 + h.region}.0.1" if h.nat
              else f"10.{10 + h.region}.0.1")
        self._ip(h.ns, "route", "add", "default", "via", gw)
        self._ip(R, "link", "set", hi, "master",
                 f"{'n' if h.nat else 'b'}{h.region}")
        self._ip(R, "link", "set", hi, "up")
        # uplink: the home's upload rate, queue of ~100 ms
        burst = max(16000, h.up_kbit * 1000 // 8 // 100)
        self._tc(h.ns, "qdisc", "add", "dev", "eth0", "root", "tbf", "rate",
                 f"{h.up_kbit}kbit", "burst", str(burst), "latency",
                 "200ms")
        if self.delay is None:
            self._delays(h, hi)
        else:
            burst = max(16000, h.down_kbit * 1000 // 8 // 100)
            self._tc(R, "qdisc", "add", "dev", hi, "root", "tbf", "rate",
                     f"{h.down_kbit}kbit", "burst", str(burst), "latency",
                     "200ms")

    def _delays(self, h, hi):
        """Downlink h<i>: htb at the download rate, one class per source
        region with netem of half the regions' round trip + last mile."""
        R = self.router
        self._tc(R, "qdisc", "add", "dev", hi, "root", "handle", "1:",
                 "htb", "default", "99")
        self._tc(R, "class", "add", "dev", hi, "parent", "1:", "classid",
                 "1:1", "htb", "rate", f"{h.down_kbit}kbit")
        for s in list(range(self.regions)) + [98]:
            rtt = RTT_MS[s][h.region] if s < self.regions else 0
            cid = f"1:{s + 1 if s < self.regions else 99}"
            self._tc(R, "class", "add", "dev", hi, "parent", "1:1",
                     "classid", cid, "htb", "rate", f"{h.down_kbit}kbit")
            self._tc(R, "qdisc", "add", "dev", hi, "parent", cid, "netem",
                     "delay", f"{rtt / 2 + h.last_ms}ms", "limit", "10000")
            if s < self.regions:
                for src in (f"10.{10 + s}.0.0/16", f"172.{16 + s}.0.0/16"):
                    self._tc(R, "filter", "add", "dev", hi, "parent", "1:",
                             "protocol", "ip", "prio", "1", "u32", "match",
                             "ip", "src", src, "flowid", cid)

    # -- use ----------------------------------------------------------------

    def exec_args(self, h):
        return ["ip", "netns", "exec", h.ns]

    def describe(self):
        return {
            "regions": [REGIONS[r] for r in range(self.regions)],
            "rtt_ms_source": "AWS inter-region pings (acomputerscientist"
                             "learnsaws.blogspot.com/2017/04/aws-regions"
                             ".html)",
            "nat_nodes": sum(h.nat for h in self.hosts),
            "loss": self.loss,
            "uplink_mbyte_s": [round(min(h.up_kbit for h in self.hosts) /
                                     8000, 2),
                               round(max(h.up_kbit for h in self.hosts) /
                                     8000, 2)],
            "delays": self.delay or "on",
        }

    def close(self):
        """Kill what still runs in our namespaces, then remove them."""
        for ns in reversed(self.made):
            r = _run("ip", "netns", "pids", ns, check=False)
            for pid in r.stdout.split():
                try:
                    os.kill(int(pid), 9)
                except (OSError, ValueError):
                    pass
        for ns in reversed(self.made):
            _run("ip", "netns", "del", ns, check=False)
        self.made = []
