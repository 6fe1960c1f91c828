#!/usr/bin/env bash
# Installs missing dependencies, then configures and builds one CMake preset (default: "default").
# Usage: scripts/build.sh [preset]   (presets: default, ci, debug, asan; see CMakePresets.json)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-default}"
bash scripts/install_deps.sh
export PATH="/usr/local/cuda/bin:$PATH"
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
