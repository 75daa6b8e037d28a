#!/usr/bin/env bash
# The README's first command ends here: start a local testnet of real node
# processes, submit a built-in SGEMM job through it, and show the verified
# receipt next to a local run of the same job. The testnet keeps running;
# testnet/stop.sh stops it.
#   testnet/demo.sh [-n NODES] [-d DIR] [-s SIZE]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
n=4
size=512
dir="${TMPDIR:-/tmp}/nightshift-demo"
while getopts "n:d:s:h" opt; do
  case "$opt" in
    n) n="$OPTARG" ;;
    d) dir="$OPTARG" ;;
    s) size="$OPTARG" ;;
    *) echo "usage: testnet/demo.sh [-n NODES] [-d DIR] [-s SGEMM_SIZE (multiple of 64)]"; exit 2 ;;
  esac
done
bin="${NIGHTSHIFT_BIN:-$root/build/nightshift}"
if [ -f "$dir/pids" ]; then "$here/stop.sh" -d "$dir" >/dev/null || true; fi
rm -rf "$dir"
"$here/run.sh" -n "$n" -d "$dir" -i 1000
echo
echo "== peers seen by node0"
"$bin" peers --datadir "$dir/node0"

# Two random ${size}x${size} matrices (float32, row-major).
work="$dir/job"
mkdir -p "$work"
python3 - "$work" "$size" <<'PY'
import random, struct, sys
random.seed(42)
n = int(sys.argv[2])
for name in ("a.bin", "b.bin"):
    with open(f"{sys.argv[1]}/{name}", "wb") as f:
        f.write(struct.pack(f"<{n*n}f", *(random.uniform(-1, 1) for _ in range(n * n))))
PY
job=(--builtin sgemm --global "$((size / 64)),$size" --local 1,64
     --arg "in:$work/a.bin" --arg "in:$work/b.bin"
     --arg "out:$((size * size * 4)):$work/c.bin"
     --arg "u32:$size" --arg "u32:$size" --arg "u32:$size"
     --work "$((2 * size * size * size))")

echo
echo "== nightshift submit: SGEMM ${size}x${size} through the testnet"
"$bin" submit --datadir "$dir/requester" --bootstrap "$(cat "$dir/bootstrap")" \
    "${job[@]}" --max-price 100

echo
echo "== the same job with nightshift run (no network), for comparison"
"$bin" run "${job[@]/$work\/c.bin/$work/c_local.bin}" | tail -n 3
if cmp -s "$work/c.bin" "$work/c_local.bin"; then
  echo "outputs identical: c.bin == c_local.bin"
else
  echo "outputs DIFFER" >&2
  exit 1
fi
echo
echo "== the requester's balance after paying"
"$bin" balance --datadir "$dir/requester"
echo
echo "The testnet keeps running. Stop it with: testnet/stop.sh -d $dir"
