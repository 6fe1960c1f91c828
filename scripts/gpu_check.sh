#!/usr/bin/env bash
# GPU check of the CUDA backend, for a machine with a CUDA device (not part of CI):
#   1. configures a minimal Release build with CUDA for the visible GPU's architecture only,
#   2. builds only the CUDA plugin (libpagedkv_cuda.so) and the GPU test and benchmark targets (-j16),
#   3. runs every GPU parity test with CTest (kernels: CudaParityTest, CudaBadInputTest, CudaValidationTest,
#      CudaCopyStreamTest (the tier copy stream: fenced loads, stores after compute); engine: ModelRunnerCudaTest,
#      EveryBackendTest (every op case of tests/kernels/op_cases/op_cases.h through the CUDA
#      plugin)) and fails if any of them failed or was skipped,
#   4. runs cuda_kernels_bench,
#   5. when compute-sanitizer is installed, runs the kernel parity tests under memcheck.
# Every step has a timeout; the whole script fits in 8 minutes on an H200 with 16 cores.
# Outputs (logs, test and benchmark results, summary.txt) go to $OUT, or ./gpu-check-out.
# Usage: bash scripts/gpu_check.sh        (exit status 0 only when every step passed)
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-$PWD/gpu-check-out}"
mkdir -p "$out"
export PATH="/usr/local/cuda/bin:$PATH"
build="${GPU_CHECK_BUILD_DIR:-build-gpu-check}"
start=$(date +%s)
status=0

log() { echo "[gpu_check +$(($(date +%s) - start))s] $*" | tee -a "$out/summary.txt"; }
fail() {
  log "FAILED: $*"
  status=1
}

: >"$out/summary.txt"
nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || log "nvidia-smi failed (see nvidia-smi.txt)"
cap="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' .')"
if [[ "$cap" =~ ^[0-9]+$ ]]; then arch="$cap"; else arch="80;90"; fi
log "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1); CUDA arch $arch"

log "configure ($build)"
if ! timeout 120 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPAGEDKV_WERROR=ON \
  -DPAGEDKV_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=$arch" >"$out/configure.log" 2>&1; then
  fail "configure (see configure.log)"
  exit 1
fi

log "build pagedkv_cuda kernels_cuda_test model_runner_test backend_ops_test cuda_kernels_bench"
if ! timeout 300 cmake --build "$build" -j16 --target pagedkv_cuda kernels_cuda_test \
  model_runner_test backend_ops_test cuda_kernels_bench >"$out/build.log" 2>&1; then
  fail "build (see build.log)"
  exit 1
fi

log "GPU parity tests (ctest)"
tests='^(CudaParityTest|CudaBadInputTest|CudaValidationTest|CudaCopyStreamTest|ModelRunnerCudaTest|EveryBackendTest)\.'
if ! (cd "$build" && timeout 240 ctest -R "$tests" -V --timeout 200) >"$out/ctest.log" 2>&1; then
  fail "GPU parity tests (see ctest.log)"
fi
grep -E "tests passed|tests failed|Total Test time" "$out/ctest.log" | tee -a "$out/summary.txt"
if grep -q "\[  SKIPPED \]" "$out/ctest.log"; then
  fail "some GPU tests were skipped (no device visible to them?): see ctest.log"
fi

log "cuda_kernels_bench"
if ! timeout 180 "$build/bench/kernels/cuda_kernels_bench" >"$out/cuda_kernels_bench.txt" 2>&1; then
  fail "cuda_kernels_bench (see cuda_kernels_bench.txt)"
fi
cat "$out/cuda_kernels_bench.txt" >>"$out/summary.txt"

sanitizer="$(command -v compute-sanitizer || true)"
if [[ -n "$sanitizer" ]]; then
  log "compute-sanitizer memcheck on the kernel parity tests"
  if ! timeout 150 "$sanitizer" --tool memcheck --error-exitcode 3 \
    "$build/tests/kernels/kernels_cuda_test" \
    --gtest_filter='CudaParityTest.EveryOpCaseMatchesTheCpuOpsValidated:CudaBadInputTest.EveryBadInput*:CudaBadInputTest.Trusted*' \
    >"$out/memcheck.log" 2>&1; then
    fail "memcheck (see memcheck.log; exit 124 means it timed out)"
  fi
  tail -n 3 "$out/memcheck.log" >>"$out/summary.txt"
else
  log "compute-sanitizer not found: memcheck skipped"
fi

log "done, status $status"
exit "$status"
