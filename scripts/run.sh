#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs `pagedkv replay` on its built-in
# default workload (extra arguments are passed to `pagedkv replay`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh default
exec ./build/pagedkv replay "$@"
