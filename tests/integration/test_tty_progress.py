"""`submit` on a terminal prints each progress line once (issue 12's rough
edge: "every progress line is printed twice on a terminal").

One provider and a requester; `nightshift submit` runs with its stderr on
a pseudo-terminal (so isatty() is true and the per-second ticks are on).
Every progress line ("[  0.45s] text") must appear once, and no text may
repeat under two timestamps.
"""
import os
import pty
import select
import struct
import subprocess

import nstest
from nstest import check, check_eq, log


def test(net):
    a = net.node("a").init()
    r = net.node("r").init()
    g = net.genesis([a, r])
    for n in (a, r):
        nstest.cli_ok("init", "--datadir", n.datadir, "--genesis", g)
    a.start(extra=("--set", "node.stake=100000"))
    x = os.path.join(net.dir, "x.bin")
    with open(x, "wb") as f:
        f.write(struct.pack("<1024f", *range(1024)))
    master, slave = pty.openpty()
    p = subprocess.Popen(
        [nstest.BIN, "submit", "--datadir", r.datadir, "--bootstrap", a.addr,
         "--builtin", "vector_add", "--global", "1024", "--arg", f"in:{x}",
         "--arg", f"in:{x}", "--arg",
         f"out:4096:{os.path.join(net.dir, 'c.bin')}", "--arg", "u32:1024",
         "--max-price", "1"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    net.at_exit(p.kill)
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    p.wait(timeout=60)
    check_eq(p.returncode, 0, "submit's exit status")
    lines = [ln for ln in out.decode(errors="replace").replace("\r", "\n")
             .split("\n") if ln.startswith("[")]
    check(len(lines) >= 4, f"progress lines on the terminal: {lines}")
    texts = [ln.split("] ", 1)[1] for ln in lines if "] " in ln]
    dup = {t for t in texts if texts.count(t) > 1 and "running" not in t}
    check(len(lines) == len(set(lines)), f"a line printed twice: {lines}")
    check(not dup, f"a progress text printed twice: {sorted(dup)}")
    log(f"{len(lines)} progress lines on a terminal, each once")


nstest.main(test, "tty_progress")
