"""The digits example in its short form (examples/digits/run.sh --short):
a network trained by scikit-learn on its handwritten digits, batch
inference over all 1,797 images through a testnet of 3 providers as 3
shards, then the same network as a pipeline of two steps (one per layer)
as one job; the script exits 0 only when every shard and the pipeline
settled and the predictions equal numpy's and `nightshift run --job`'s.

Skipped (exit 77) where python3-sklearn is not installed: CI installs it
(.ci/run); a developer runs `examples/digits/run.sh`, which installs it.
"""
import os
import subprocess

import nstest
from nstest import check, log

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def have_sklearn():
    for py in ("python3", "/usr/bin/python3"):
        try:
            if subprocess.run([py, "-c", "import sklearn, numpy"],
                              capture_output=True).returncode == 0:
                return True
        except OSError:
            pass
    return False


def test(net):
    if not have_sklearn():
        raise nstest.Skip("python3-sklearn is not installed (apt-get install "
                          "python3-sklearn, or run examples/digits/run.sh)")
    env = dict(os.environ, NIGHTSHIFT_BIN=nstest.BIN)
    r = subprocess.run([os.path.join(ROOT, "examples/digits/run.sh"),
                        "--short", "-d", os.path.join(net.dir, "digits")],
                       capture_output=True, text=True, timeout=600, env=env,
                       stdin=subprocess.DEVNULL)
    for line in r.stdout.splitlines():
        log(line)
    check(r.returncode == 0,
          f"examples/digits/run.sh --short exited {r.returncode}: "
          f"{r.stderr.strip()[-2000:]}")
    check(r.stdout.count("identical predictions: 1797/1797 with numpy, "
                         "1797/1797 with nightshift run") == 2,
          "predictions not identical (the sharded job and the pipeline)")


nstest.main(test, "digits")
