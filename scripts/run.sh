#!/usr/bin/env bash
# The main job: installs what is missing, builds only the `pagedkv` tool (and the libraries it
# links; the tests and benchmarks are left to scripts/test.sh), and runs `pagedkv replay` on its
# built-in default workload (extra arguments are passed to `pagedkv replay`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh default pagedkv
exec ./build/pagedkv replay "$@"
