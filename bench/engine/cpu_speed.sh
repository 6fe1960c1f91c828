#!/usr/bin/env bash
# Issue #16's CPU speed measurements in one run, with the machine's load before and after each
# program (the numbers mean little when the load average is above the core count):
#   1. single-sequence greedy decode, engine with 1 thread and with all cores, against the plain
#      single-sequence implementation (bench/engine/model/plain_llama.h: the pre-#16 kernels, SSE2,
#      one thread) in the same process;
#   2. 32 concurrent sequences, aggregate generated tokens/s, 1 thread and all cores;
#   3. per-op GB/s and GFLOP/s (kernels_benchmark, one thread) against memcpy in the same run;
#   4. the GEMM comparison: pre-#16 kernel, pagedkv's Highway kernel, pagedkv's packed kernel,
#      OpenBLAS as shipped and with its AVX-512 kernels forced (OPENBLAS_CORETYPE=SkylakeX).
# Models: aidreams260K and TinyStories-656K (../shared/data; skipped when absent), random656K
# (TinyStories-656K's shape, random weights) and random15M. After step 2 the target ratios
# (bench/engine/cpu_speed_ratios.py: engine / plain, wall clock and, for 1 thread, CPU time).
# Usage: bench/engine/cpu_speed.sh [build-dir]   (default: build; Release, benchmarks built)
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build}"
load() { echo "## load: $(uptime | sed 's/.*load average/load average/')"; }
run() {
  load
  echo "## $*"
  "$@" --benchmark_counters_tabular=true 2>&1 | grep -v '^\*\*\*'
}
echo "## $(date -u +%FT%TZ) on $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
json="$(mktemp --suffix=.json)"
trap 'rm -f "$json"' EXIT
run "$build/bench/engine/runtime/engine_benchmark" \
  --benchmark_filter='Decode/(aidreams260K|tinystories656K|random656K|random15M)|Concurrent/(aidreams260K|tinystories656K|random656K)' \
  --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  --benchmark_out="$json" --benchmark_out_format=json
echo "## target ratios (medians of 3)"
python3 bench/engine/cpu_speed_ratios.py "$json"
run "$build/bench/kernels/kernels_benchmark" --benchmark_min_time=0.2
run "$build/bench/kernels/gemm_benchmark" --benchmark_min_time=0.1
load
echo "## OPENBLAS_CORETYPE=SkylakeX (OpenBLAS's AVX-512 kernels; as shipped it runs SSE3 ones here)"
OPENBLAS_CORETYPE=SkylakeX run "$build/bench/kernels/gemm_benchmark" --benchmark_min_time=0.1 \
  --benchmark_filter='OpenBlas|Pagedkv|Packed'
load
