#!/usr/bin/env bash
# A real model, end to end: train a small neural network on the
# handwritten-digits data set that Debian's python3-sklearn ships, then run
# batch inference over the whole data set through a local testnet of real
# nodes with the job cut into 4 shards, and compare it with numpy and with
# `nightshift run --job` of the same file; then the same network as a
# pipeline of two steps (one per layer) as one job.
#
#   examples/digits/run.sh [--short] [--bench] [-d DIR]
#
#   --short   CI form: 3 providers and 3 shards (the same checks)
#   --bench   also a synthetic batch of 100,632 rows (the images 56 times)
#             through 1, 2 and 4 shards, each next to `run --job` of the
#             same file in the same run, with each shard's run time and the
#             verification cost
#   -d DIR    where the testnet and the files go (default: a new temp dir;
#             kept, and the testnet stopped, at the end)
#
# Installs python3-sklearn with apt-get when it is missing (root or sudo),
# and builds nightshift with ./setup.sh when build/nightshift is missing.
# Exit status 0 only when every shard settled and the network's predictions
# equal numpy's and the local run's.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${NIGHTSHIFT_BIN:-$root/build/nightshift}"
short=0 bench=0 dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --short) short=1 ;;
    --bench) bench=1 ;;
    -d) dir="$2"; shift ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "examples/digits/run.sh: unknown argument '$1' (see --help)" >&2
       exit 2 ;;
  esac
  shift
done

# Debian's python3 (a python3 of pyenv or a venv earlier in PATH lacks
# Debian's packages)
pick_python() {
  for py in python3 /usr/bin/python3; do
    if "$py" -c 'import sklearn, numpy' 2>/dev/null; then echo "$py"; return; fi
  done
}
py="$(pick_python)"
if [ -z "$py" ]; then
  echo "== installing python3-sklearn (the digits data set and numpy)"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get install -y -qq python3-sklearn >/dev/null
  py="$(pick_python)"
  [ -n "$py" ] || { echo "examples/digits/run.sh: python3-sklearn did not install" >&2; exit 1; }
fi
if [ ! -x "$bin" ]; then
  echo "== building nightshift (./setup.sh)"
  (cd "$root" && ./setup.sh)
fi

[ -n "$dir" ] || dir="$(mktemp -d "${TMPDIR:-/tmp}/nightshift-digits.XXXXXX")"
mkdir -p "$dir"
providers=4 shards=4
[ "$short" -eq 0 ] || { providers=3; shards=3; }
net="$dir/testnet"
cleanup() { "$root/testnet/stop.sh" -d "$net" >/dev/null 2>&1 || true; }
trap cleanup EXIT

echo "== training (scikit-learn, $("$py" -c 'import sklearn; print(sklearn.__version__)'))"
"$py" "$here/train.py" "$dir/data"

echo "== a local testnet of $providers providers"
"$root/testnet/run.sh" -n "$providers" -d "$net" -i 500 >/dev/null
boot="$(cat "$net/bootstrap")"

ms() { date +%s%3N; }

# submit JOB SHARDS RECEIPT: through the testnet; prints the wall time (ms)
submit() {
  local t0 t1
  t0=$(ms)
  "$bin" submit --datadir "$net/requester" --bootstrap "$boot" \
      --job "$1" --shards "$2" --max-price 100 --deadline-s 300 \
      --json >"$3"
  t1=$(ms)
  echo $((t1 - t0))
}

# run_local JOB OUT: `nightshift run --job` here; prints the wall time (ms)
run_local() {
  local t0 t1
  t0=$(ms)
  (cd "$(dirname "$1")" && "$bin" run --job "$1" >/dev/null)
  t1=$(ms)
  mv "$(dirname "$1")/y.bin" "$2"
  echo $((t1 - t0))
}

data="$dir/data"
echo "== nightshift run --job (one machine, no network)"
local_ms=$(run_local "$data/digits.json" "$data/y_local.bin")
echo "== nightshift submit --job --shards $shards (through the testnet)"
net_ms=$(submit "$data/digits.json" "$shards" "$data/receipt.json")

"$py" - "$data" "$net_ms" "$local_ms" "$shards" <<'PY'
import json, sys
import numpy as np
d, net_ms, local_ms, shards = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
labels = np.fromfile(f"{d}/labels.bin", dtype=np.int32)
out = 10
ref = np.fromfile(f"{d}/ref_logits.bin", dtype=np.float32).reshape(-1, out)
y = np.fromfile(f"{d}/y.bin", dtype=np.float32).reshape(-1, out)
yl = np.fromfile(f"{d}/y_local.bin", dtype=np.float32).reshape(-1, out)
rc = json.load(open(f"{d}/receipt.json"))
p_net, p_np, p_loc = (np.argmax(a, axis=1) for a in (y, ref, yl))
meta = json.load(open(f"{d}/meta.json"))
held = np.arange(len(labels)) % meta["images"] >= meta["train_rows"]
acc = lambda p: f"{float((p == labels).mean()):.4f} (held-out {float((p == labels)[held].mean()):.4f})"
print(f"rows {len(labels)}, shards {len(rc['shards'])}, status {rc['status']}")
for s in rc["shards"]:
    print(f"  shard {s['shard'] + 1}: rows {s['rows'][0]}..{s['rows'][1] - 1}"
          f"  provider {s['provider'][:10]}  price {s['price']}"
          f"  run {s['run_ms']} ms  verify {s['verify_ms']} ms"
          f"  rounds {s['rounds']}")
print(f"accuracy through the network {acc(p_net)}; numpy {acc(p_np)};"
      f" nightshift run {acc(p_loc)}")
same_np, same_loc = int((p_net == p_np).sum()), int((p_net == p_loc).sum())
print(f"identical predictions: {same_np}/{len(labels)} with numpy, "
      f"{same_loc}/{len(labels)} with nightshift run;"
      f" max |logit - numpy| {float(np.abs(y - ref).max()):.2e}")
print(f"time: {net_ms} ms through the network ({len(rc['shards'])} shards)"
      f" vs {local_ms} ms for nightshift run --job (same run)")
ok = rc["status"] == "settled" and same_np == len(labels) and same_loc == len(labels)
sys.exit(0 if ok else 1)
PY

echo
echo "== the same network as a pipeline of two steps, one job (dense + ReLU, then dense)"
pipe_local_ms=$(run_local "$data/digits_pipeline.json" "$data/y_pipe_local.bin")
pipe_ms=$(submit "$data/digits_pipeline.json" 1 "$data/receipt_pipe.json")
"$py" - "$data" "$pipe_ms" "$pipe_local_ms" <<'PY'
import json, sys
import numpy as np
d, net_ms, local_ms = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ref = np.fromfile(f"{d}/ref_logits.bin", dtype=np.float32).reshape(-1, 10)
y = np.fromfile(f"{d}/y.bin", dtype=np.float32).reshape(-1, 10)
yl = np.fromfile(f"{d}/y_pipe_local.bin", dtype=np.float32).reshape(-1, 10)
rc = json.load(open(f"{d}/receipt_pipe.json"))
p = np.argmax(y, 1)
same_np = int((p == np.argmax(ref, 1)).sum())
same_loc = int((p == np.argmax(yl, 1)).sum())
print(f"status {rc['status']}, provider {rc['provider'][:10]}, price "
      f"{rc['price']}, {rc['checks']} units checked over the two steps"
      f" (verify {rc['timings_ms']['verify']} ms, run {rc['timings_ms']['run']} ms)")
print(f"identical predictions: {same_np}/{len(p)} with numpy, {same_loc}/{len(p)}"
      f" with nightshift run; max |logit - numpy| {float(np.abs(y - ref).max()):.2e}")
print(f"time: {net_ms} ms through the network vs {local_ms} ms for nightshift"
      f" run --job (same run)")
sys.exit(0 if rc["status"] == "settled" and same_np == len(p) and same_loc == len(p) else 1)
PY

if [ "$bench" -eq 1 ]; then
  echo
  echo "== benchmark: 100,632 rows (the images 56 times)"
  "$py" "$here/train.py" "$dir/big" --repeat 56 | sed 's/^/  /'
  local_ms=$(run_local "$dir/big/digits.json" "$dir/big/y_local.bin")
  echo "  nightshift run --job (one machine): $local_ms ms"
  for n in 1 2 4; do
    t=$(submit "$dir/big/digits.json" "$n" "$dir/big/receipt$n.json")
    cmp -s "$dir/big/y.bin" "$dir/big/y_local.bin" ||
      "$py" - "$dir/big" <<'PY'
import sys, numpy as np
d = sys.argv[1]
a = np.fromfile(f"{d}/y.bin", dtype=np.float32)
b = np.fromfile(f"{d}/y_local.bin", dtype=np.float32)
assert (np.argmax(a.reshape(-1, 10), 1) == np.argmax(b.reshape(-1, 10), 1)).all(), "predictions differ"
PY
    "$py" - "$dir/big/receipt$n.json" "$t" "$local_ms" "$n" <<'PY'
import json, sys
rc = json.load(open(sys.argv[1]))
t, loc, n = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
if "shards" in rc:
    runs = [s["run_ms"] for s in rc["shards"]]
    ver = [s["verify_ms"] for s in rc["shards"]]
else:  # one shard is a whole job: the plain receipt
    runs, ver = [rc["timings_ms"]["run"]], [rc["timings_ms"]["verify"]]
print(f"  {n} shard(s): {t} ms through the network vs {loc} ms run --job"
      f" ({t / loc:.2f}x); shard run ms {runs}; verify ms {ver}"
      f" ({sum(ver) / max(1, sum(runs)):.1%} of the shards' run time)")
PY
  done
fi
echo
echo "files in $dir"
