#!/usr/bin/env bash
# Build and run the whole test suite (unit, fuzz corpora, integration).
#   tests/run.sh              release build in build/
#   tests/run.sh --sanitize   the same tests under ASan+UBSan in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
if [ "${1:-}" = "--sanitize" ]; then
  build=build-asan
  # PoCL and LLVM keep allocations until exit; our own leaks still fail.
  # use_tls=0: LeakSanitizer's scan of thread-local storage crashes
  # ("Tracer caught signal 11") in a process that probed PoCL devices with
  # libmicrohttpd/gnutls loaded (`nightshift devices`); TLS is then not a
  # root, which can only report more, never hide a leak.
  export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0:use_tls=0"
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:allocator_may_return_null=1"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
fi
./setup.sh ${1:-} >/dev/null
ctest --test-dir "$build" --output-on-failure -j2 --timeout 600
