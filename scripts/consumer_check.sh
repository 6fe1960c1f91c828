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

echo "consumer_check: cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
test -f "$prefix/lib/cmake/pagedkv/pagedkvConfig.cmake"
test -f "$prefix/lib/pkgconfig/pagedkv.pc"
test -f "$prefix/include/pagedkv/version.h"

echo "consumer_check: find_package build"
cmake -S tests/consumer -B "$work/find" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" >"$work/find-configure.log"
cmake --build "$work/find" >"$work/find-build.log"
(cd "$work/find" && ./consumer)

echo "consumer_check: pkg-config build"
PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --exists pagedkv
# shellcheck disable=SC2046  # word splitting of the flags is intended
g++ -O2 -o "$work/consumer-pc" tests/consumer/consumer.cc \
  $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs pagedkv)
(cd "$work" && ./consumer-pc)

echo "consumer_check: add_subdirectory build, shared libraries"
cmake -S tests/consumer -B "$work/subdir" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DPAGEDKV_SOURCE_DIR="$PWD" -DPAGEDKV_CUDA=OFF -DBUILD_SHARED_LIBS=ON >"$work/subdir-configure.log"
cmake --build "$work/subdir" >"$work/subdir-build.log"
ldd "$work/subdir/consumer" | grep -q "libpagedkv_engine.so" # really linked as shared libraries
(cd "$work/subdir" && ./consumer)
echo "consumer_check: install, find_package, pkg-config and add_subdirectory (shared) builds passed"
