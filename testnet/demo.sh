#!/usr/bin/env bash
# The README's first command ends here: start a local testnet of real node
# processes and show it. Leaves it running; testnet/stop.sh stops it.
#   testnet/demo.sh [-n NODES] [-d DIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
n=4
dir="${TMPDIR:-/tmp}/nightshift-demo"
while getopts "n:d:h" opt; do
  case "$opt" in
    n) n="$OPTARG" ;;
    d) dir="$OPTARG" ;;
    *) echo "usage: testnet/demo.sh [-n NODES] [-d DIR]"; exit 2 ;;
  esac
done
bin="${NIGHTSHIFT_BIN:-$root/build/nightshift}"
if [ -f "$dir/pids" ]; then "$here/stop.sh" -d "$dir" >/dev/null || true; fi
rm -rf "$dir"
"$here/run.sh" -n "$n" -d "$dir"
echo
echo "== peers seen by node0 (nightshift peers --datadir $dir/node0)"
"$bin" peers --datadir "$dir/node0"
echo
echo "== node0 status (nightshift status --datadir $dir/node0)"
"$bin" status --datadir "$dir/node0"
echo
echo "The testnet keeps running. Stop it with: testnet/stop.sh -d $dir"
