#!/usr/bin/env bash
# The test command: installs what is missing (Debian packages, the PyPI reference packages of
# scripts/python_refs.sh and lm-evaluation-harness, scripts/lm_eval_env.sh), builds, and runs
# every test with CTest.
# Usage: scripts/test.sh [preset]   (default "default"; CI uses "ci", warnings as errors, and "asan")
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-default}"
bash scripts/build.sh "$preset"
bash scripts/python_refs.sh >/dev/null  # tokenizers, safetensors, gguf for the pytest comparisons
bash scripts/lm_eval_env.sh >/dev/null  # lm-evaluation-harness, run against pagedkv serve
ctest --preset "$preset"
