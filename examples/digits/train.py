#!/usr/bin/env python3
"""Train a small neural network on 1,200 of scikit-learn's handwritten
digits (the data set ships with Debian's python3-sklearn: no download),
holding the other 597 out, export its
weights and the data as float32 files, and write a job file for batch
inference over every row.

    train.py OUTDIR [--repeat R]

--repeat R tiles the 1,797 images R times (a larger synthetic batch of the
same network, for the benchmark). Writes OUTDIR/{x,w1,b1,w2,b2}.bin,
labels.bin (int32), ref_logits.bin (numpy's float32 forward pass, the
same order of operations as mlp.cl), mlp.cl, digits.json (one kernel for
both layers) and digits_pipeline.json (the two layers as two steps of one
pipeline job).
"""
import json
import os
import shutil
import sys

import numpy as np
from sklearn.datasets import load_digits
from sklearn.neural_network import MLPClassifier

HIDDEN = 32
TRAIN_ROWS = 1200  # of the 1,797 images; the others are held out


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(sys.argv) > 1 else 2
    out = sys.argv[1]
    repeat = 1
    if "--repeat" in sys.argv:
        repeat = int(sys.argv[sys.argv.index("--repeat") + 1])
    os.makedirs(out, exist_ok=True)
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int32)
    clf = MLPClassifier(hidden_layer_sizes=(HIDDEN,), max_iter=600,
                        random_state=0)
    clf.fit(x[:TRAIN_ROWS], labels[:TRAIN_ROWS])  # the rest is held out
    w1, w2 = (w.astype(np.float32) for w in clf.coefs_)
    b1, b2 = (b.astype(np.float32) for b in clf.intercepts_)
    x = np.tile(x, (repeat, 1))
    labels = np.tile(labels, repeat)
    rows, d_in = x.shape
    d_out = w2.shape[1]
    # numpy's own forward pass in float32, summed in index order as the
    # kernel does (a plain matmul sums in another order)
    h = np.tile(b1, (rows, 1))
    for k in range(d_in):
        h = h + x[:, k:k + 1] * w1[k:k + 1, :]
    h = np.maximum(h, np.float32(0))
    logits = np.tile(b2, (rows, 1))
    for j in range(HIDDEN):
        logits = logits + h[:, j:j + 1] * w2[j:j + 1, :]
    for name, a in (("x", x), ("w1", w1), ("b1", b1), ("w2", w2),
                    ("b2", b2), ("labels", labels),
                    ("ref_logits", logits.astype(np.float32))):
        np.ascontiguousarray(a).tofile(os.path.join(out, name + ".bin"))
    shutil.copy(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "mlp.cl"), out)
    job = {
        "source": "mlp.cl",
        "buffers": {
            "x": {"file": "x.bin"}, "w1": {"file": "w1.bin"},
            "b1": {"file": "b1.bin"}, "w2": {"file": "w2.bin"},
            "b2": {"file": "b2.bin"},
            "y": {"bytes": rows * d_out * 4, "out": "y.bin"},
        },
        "steps": [{"entry": "mlp", "global": [rows],
                   "args": ["x", "w1", "b1", "w2", "b2", "y",
                            {"u32": d_in}, {"u32": HIDDEN},
                            {"u32": d_out}, {"u32": rows}]}],
        "tolerance": "abs:1e-3",
        "work": 2 * rows * (d_in * HIDDEN + HIDDEN * d_out),
    }
    with open(os.path.join(out, "digits.json"), "w") as f:
        json.dump(job, f, indent=2)
    # the same network as a pipeline of two layers, one job: h stays with
    # the provider but for what the check of each step needs
    pipe = {
        "source": "mlp.cl",
        "buffers": {
            "x": {"file": "x.bin"}, "w1": {"file": "w1.bin"},
            "b1": {"file": "b1.bin"}, "w2": {"file": "w2.bin"},
            "b2": {"file": "b2.bin"},
            "h": {"bytes": rows * HIDDEN * 4},
            "y": {"bytes": rows * d_out * 4, "out": "y.bin"},
        },
        "steps": [
            {"entry": "dense", "global": [rows, HIDDEN],
             "args": ["x", "w1", "b1", "h", {"u32": d_in},
                      {"u32": HIDDEN}, {"u32": 1}]},
            {"entry": "dense", "global": [rows, d_out],
             "args": ["h", "w2", "b2", "y", {"u32": HIDDEN},
                      {"u32": d_out}, {"u32": 0}]}],
        "tolerance": "abs:1e-3",
        "work": job["work"],
    }
    with open(os.path.join(out, "digits_pipeline.json"), "w") as f:
        json.dump(pipe, f, indent=2)
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump({"train_rows": TRAIN_ROWS, "images": 1797}, f)
    hit = np.argmax(logits, axis=1) == labels
    print(f"trained on {TRAIN_ROWS} of 1797 images: {d_in}-{HIDDEN}-{d_out} "
          f"network; numpy accuracy {hit[:1797].mean():.4f} on all, "
          f"{hit[TRAIN_ROWS:1797].mean():.4f} on the held-out "
          f"(sklearn's own {clf.score(x[TRAIN_ROWS:1797], labels[TRAIN_ROWS:1797]):.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
