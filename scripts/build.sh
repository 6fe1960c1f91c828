#!/usr/bin/env bash
# Installs missing dependencies, then configures and builds one CMake preset (default: "default").
# Usage: scripts/build.sh [preset] [target...]   (presets: default, ci, debug, asan; see
# CMakePresets.json; no target: everything, tests and benchmarks included)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-default}"
shift || true
bash scripts/install_deps.sh
export PATH="/usr/local/cuda/bin:$PATH"
cmake --preset "$preset" >/dev/null
if [ $# -gt 0 ]; then
  cmake --build --preset "$preset" --target "$@"
else
  cmake --build --preset "$preset"
fi
