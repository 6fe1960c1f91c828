#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (preset "fuzz": clang, ASan + UBSan), writes their
# seed corpora (tests/fuzz/make_corpus.py), then runs every target on its corpus: libFuzzer first
# replays every input in it, then fuzzes for SECONDS. Fails on any crash, hang (10 s per input),
# leak or sanitizer report; the input that failed is left in build-fuzz/artifacts/<target>/.
# Corpora grow in build-fuzz/corpus/ (outside the tree).
# Usage: scripts/fuzz.sh [SECONDS (default 30)] [fuzz_target...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"
shift || true
bash scripts/install_deps.sh
cmake --preset fuzz >/dev/null
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(sed -n 's/^pagedkv_add_fuzzer(\(fuzz_[a-z0-9_]*\) .*/\1/p' \
    tests/fuzz/CMakeLists.txt)
fi
cmake --build --preset fuzz --target "${targets[@]}"
corpus=build-fuzz/corpus
/usr/bin/python3 tests/fuzz/make_corpus.py "$corpus"
for target in "${targets[@]}"; do
  name="${target#fuzz_}"
  mkdir -p "$corpus/$name" "build-fuzz/artifacts/$name"
  echo "== fuzz: $target for ${seconds}s"
  if ! build-fuzz/fuzz/"$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2560 \
      -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/$name/" "$corpus/$name" \
      > "build-fuzz/artifacts/$name/log.txt" 2>&1; then
    tail -n 60 "build-fuzz/artifacts/$name/log.txt"
    echo "fuzz: $target FAILED; the input is in build-fuzz/artifacts/$name/" >&2
    exit 1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "build-fuzz/artifacts/$name/log.txt" |
    tr '\n' ' '
  echo "corpus: $(ls "$corpus/$name" | wc -l) inputs"
done
echo "fuzz: ${#targets[@]} targets ran ${seconds}s each without a failure"
