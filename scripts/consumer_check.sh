#!/usr/bin/env bash
# Proves pagedkv can be consumed as a library (CI runs this after the test command):
#   1. `cmake --install` of an existing build into a fresh prefix,
#   2. tests/consumer built against that prefix with find_package(pagedkv 0.2), and run,
#   3. the same program built with pkg-config (pagedkv.pc) and plain g++, and run,
#   4. tests/consumer built with pagedkv through add_subdirectory, as shared libraries
#      (-DBUILD_SHARED_LIBS=ON: hidden visibility, only PAGEDKV_EXPORT'ed symbols), replay and
#      the event wire format off, and run.
# Usage: scripts/consumer_check.sh [build-dir]   (default: build, which must be built already)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"

# Runs "$@" with its output in the log file $1; on failure prints the log's tail, so CI shows why.
logged() {
  local log="$1"
  shift
  if ! "$@" >"$log" 2>&1; then
    echo "consumer_check: FAILED: $*" >&2
    tail -n 60 "$log" >&2
    return 1
  fi
}

echo "consumer_check: cmake --install $build --prefix $prefix"
logged "$work/install.log" cmake --install "$build" --prefix "$prefix"
test -f "$prefix/lib/cmake/pagedkv/pagedkvConfig.cmake"
test -f "$prefix/lib/pkgconfig/pagedkv.pc"
test -f "$prefix/include/pagedkv/version.h"

echo "consumer_check: find_package build"
logged "$work/find-configure.log" cmake -S tests/consumer -B "$work/find" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix"
logged "$work/find-build.log" cmake --build "$work/find"
(cd "$work/find" && ./consumer)

echo "consumer_check: pkg-config build"
PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --exists pagedkv
# shellcheck disable=SC2046  # word splitting of the flags is intended
g++ -O2 -o "$work/consumer-pc" tests/consumer/consumer.cc \
  $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs pagedkv)
(cd "$work" && ./consumer-pc)

echo "consumer_check: add_subdirectory build, shared libraries"
logged "$work/subdir-configure.log" cmake -S tests/consumer -B "$work/subdir" -G Ninja \
  -DCMAKE_BUILD_TYPE=Debug -DPAGEDKV_SOURCE_DIR="$PWD" -DPAGEDKV_CUDA=OFF -DBUILD_SHARED_LIBS=ON
logged "$work/subdir-build.log" cmake --build "$work/subdir"
# Really linked as shared libraries. ldd's output is captured first: `ldd | grep -q` under
# pipefail fails at random when grep exits early and ldd dies of SIGPIPE.
linked="$(ldd "$work/subdir/consumer")"
if ! grep -q "libpagedkv_engine.so" <<<"$linked"; then
  echo "consumer_check: consumer is not linked against libpagedkv_engine.so:" >&2
  echo "$linked" >&2
  exit 1
fi
(cd "$work/subdir" && ./consumer)
echo "consumer_check: install, find_package, pkg-config and add_subdirectory (shared) builds passed"
