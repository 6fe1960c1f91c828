#!/usr/bin/env bash
# `pip install .` as a Python user runs it (CI runs this): for each interpreter, a fresh virtual
# environment, `pip install .` (scikit-build-core builds the module and the `pagedkv` program,
# pyproject.toml), tests/pip/smoke.py run by that environment's python (import, a prefix lookup,
# a replay, `pagedkv --help`, `python -m pagedkv --version`), then `pip wheel .` and a look inside
# the wheel. Each interpreter starts from an empty build-pip/, so the check is of a clean build;
# ccache (shared with the presets' builds, same flags as the ci preset) keeps it cheap.
# Usage: scripts/pip_check.sh [python...]   (default: Debian's /usr/bin/python3)
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
bash scripts/install_deps.sh
pythons=("$@")
[ ${#pythons[@]} -eq 0 ] && pythons=(/usr/bin/python3)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# Warnings are errors here too, and the flags then match the ci preset's (ccache hits). The
# compilers are named as CMake finds them for the presets (c++ / cc): ccache keys on the name, and
# pip's build environment would otherwise pass Python's own (x86_64-linux-gnu-g++).
config=(--config-settings=cmake.define.PAGEDKV_WERROR=ON
        "--config-settings=cmake.define.CMAKE_CXX_COMPILER=$(command -v c++)"
        "--config-settings=cmake.define.CMAKE_C_COMPILER=$(command -v cc)")
for py in "${pythons[@]}"; do
  start=$(date +%s)
  rm -rf build-pip "$work/venv" "$work/wheels"
  "$py" -m venv "$work/venv"
  echo "pip_check: $py ($("$py" --version)): pip install . in a fresh venv"
  "$work/venv/bin/python" -m pip install -q --disable-pip-version-check "${config[@]}" . \
    >"$work/install.log" 2>&1 || { cat "$work/install.log"; exit 1; }
  installed=$(date +%s)
  (cd "$work" && "$work/venv/bin/python" "$repo/tests/pip/smoke.py")
  "$work/venv/bin/pagedkv" --version >/dev/null
  echo "pip_check: pip wheel ."
  "$work/venv/bin/python" -m pip wheel -q --disable-pip-version-check --no-deps "${config[@]}" \
    -w "$work/wheels" . >"$work/wheel.log" 2>&1 || { cat "$work/wheel.log"; exit 1; }
  wheel=$(ls "$work"/wheels/pagedkv-*.whl)
  "$work/venv/bin/python" - "$wheel" <<'PY'
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
need = ["pagedkv/__init__.py", "pagedkv/_pagedkv.pyi", "pagedkv/replay.pyi", "pagedkv/py.typed",
        "pagedkv/bin/pagedkv", "pagedkv/_cli.py", "pagedkv/__main__.py"]
missing = [n for n in need if n not in names]
if not any(n.startswith("pagedkv/_pagedkv.") and n.endswith(".so") for n in names):
    missing.append("pagedkv/_pagedkv.*.so")
assert not missing, f"the wheel lacks {missing}"
print(f"pip_check: {sys.argv[1].rsplit('/', 1)[-1]} holds {len(names)} files")
PY
  echo "pip_check: $py passed: install $((installed - start)) s, total $(($(date +%s) - start)) s"
done
