#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test with CTest.
# Usage: scripts/test.sh [preset]   (default "default"; CI uses "ci", warnings as errors, and "asan")
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-default}"
bash scripts/build.sh "$preset"
ctest --preset "$preset"
