#!/usr/bin/env bash
# Install the Debian 12 packages Nightshift needs (if missing) and build it.
#   ./setup.sh              release build in build/
#   ./setup.sh --sanitize   ASan+UBSan build in build-asan/
#   NS_BROWSER=1 ./setup.sh also installs chromium (about 80 MB to fetch,
#                           290 MB installed) for the status page's
#                           headless-browser test, which skips without it
set -euo pipefail
cd "$(dirname "$0")"

PKGS=(build-essential cmake pkg-config
      libzmq3-dev libsodium-dev libmsgpack-dev liblmdb-dev libinih-dev
      libjansson-dev
      libmicrohttpd-dev
      ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo
      python3 procps iproute2 nftables)
if [ "${NS_BROWSER:-0}" = 1 ]; then PKGS+=(chromium); fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

build=build
flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
if [ "${1:-}" = "--sanitize" ]; then
  build=build-asan
  flags=(-DCMAKE_BUILD_TYPE=Debug -DNS_SANITIZE=ON -DNS_BENCH=OFF)
fi
cmake -S . -B "$build" "${flags[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)"
echo "setup: built $build/nightshift"
