#!/usr/bin/env bash
# Installs the PyPI reference packages the pytest suite compares against and drives (Hugging
# Face `tokenizers` and `safetensors`, llama.cpp's `gguf` reader; OpenAI's `openai` client, which
# the `pagedkv serve` tests call the server with; for the KV events, `msgspec` (what vLLM 0.33
# decodes its KVEventBatch with), NVIDIA Dynamo's KV indexer `ai-dynamo-runtime` and
# `vllm-router`) into a virtual environment outside the
# repository, built on Debian's /usr/bin/python3 with its packages visible (--system-site-packages:
# numpy, pytest, zmq, msgpack, prometheus_client stay Debian's). CTest puts that environment's
# site-packages on the pytest PYTHONPATH, so the interpreter is still /usr/bin/python3.
# Idempotent: does nothing when the pinned versions are already there. When PyPI cannot be reached
# it says so and exits 0: the tests that need a reference package then skip with a message.
# Usage: scripts/python_refs.sh   (prints the site-packages directory)
# Environment: PAGEDKV_PYREF_DIR (default ${XDG_CACHE_HOME:-$HOME/.cache}/pagedkv/pyref).
set -euo pipefail
pyref="${PAGEDKV_PYREF_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pagedkv/pyref}"
# Each group installs on its own, so a group that cannot install leaves the others in place.
groups=("tokenizers==0.23.3 safetensors==0.8.0 gguf==0.19.0 msgspec==0.23.0 openai==3.51.0"
        "ai-dynamo-runtime==1.6.1 vllm-router==0.1.17")
site="$pyref/lib/python$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')/site-packages"

have_pins() {
  [ -x "$pyref/bin/python" ] || return 1
  "$pyref/bin/python" - "${pins[@]}" <<'PY'
import sys
from importlib import metadata
for pin in sys.argv[1:]:
    name, version = pin.split("==")
    try:
        if metadata.version(name) != version:
            sys.exit(1)
    except metadata.PackageNotFoundError:
        sys.exit(1)
PY
}

# NumPy stays below 2 (pyproject.toml says why: the module's pybind11 2.10 speaks NumPy 1 only).
# Without the bound pip may put a NumPy 2 into the environment for gguf, which Debian's 1.24
# satisfies, and the module's arrays then read wrong.
constraints="$(mktemp)"
trap 'rm -f "$constraints"' EXIT
echo 'numpy<2' >"$constraints"

numpy_ok() {
  "$pyref/bin/python" -c 'import sys, numpy; sys.exit(int(numpy.__version__.split(".")[0]) >= 2)'
}

for group in "${groups[@]}"; do
  read -r -a pins <<<"$group"
  have_pins && continue
  [ -x "$pyref/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$pyref"
  if ! "$pyref/bin/python" -m pip install -q --disable-pip-version-check -c "$constraints" \
      "${pins[@]}"; then
    echo "python_refs: could not install ${pins[*]} from PyPI into $pyref;" \
         "the tests that compare against them will skip" >&2
  fi
done
# An environment made before the bound may hold a NumPy 2: take it out, so Debian's shows through.
if [ -x "$pyref/bin/python" ] && ! numpy_ok; then
  "$pyref/bin/python" -m pip uninstall -q -y numpy
  numpy_ok || "$pyref/bin/python" -m pip install -q --disable-pip-version-check 'numpy<2'
fi
echo "$site"
