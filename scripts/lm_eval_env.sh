#!/usr/bin/env bash
# Installs lm-evaluation-harness (`lm-eval[api]` from PyPI, pinned) into its own virtual
# environment outside the repository, for tests/python/serve/test_serve_lm_eval.py, which runs its
# `lm_eval` command against `pagedkv serve`. Its own environment because its dependencies
# (datasets, pyarrow, pandas, scikit-learn; about 760 MB, 2-3 minutes the first time) would clash
# with the reference environment's pins (scripts/python_refs.sh); the `api` extra needs no torch.
# Idempotent: does nothing when the pinned version is there. When PyPI cannot be reached it says
# so and exits 0: the test then skips with a message.
# Usage: scripts/lm_eval_env.sh   (prints the lm_eval command's path)
# Environment: PAGEDKV_LM_EVAL_DIR (default ${XDG_CACHE_HOME:-$HOME/.cache}/pagedkv/lmeval).
set -euo pipefail
dir="${PAGEDKV_LM_EVAL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pagedkv/lmeval}"
pin="lm-eval==0.4.13"
installed() {
  [ -x "$dir/bin/python" ] && [ -x "$dir/bin/lm_eval" ] &&
    "$dir/bin/python" -c 'from importlib import metadata
import sys
sys.exit(metadata.version("lm-eval") != "0.4.13")' 2>/dev/null
}
if ! installed; then
  [ -x "$dir/bin/python" ] || /usr/bin/python3 -m venv "$dir"
  if ! "$dir/bin/python" -m pip install -q --disable-pip-version-check "${pin/lm-eval/lm-eval[api]}"; then
    echo "lm_eval_env: could not install $pin from PyPI into $dir; test_serve_lm_eval will skip" >&2
    exit 0
  fi
fi
echo "$dir/bin/lm_eval"
