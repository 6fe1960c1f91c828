#!/usr/bin/env bash
# GPU check of the CUDA backend, for a machine with a CUDA device (not part of CI):
#   1. gets the GPU programs: either builds them (a minimal Release build with CUDA for the visible
#      GPU's architecture only: the CUDA plugin, the GPU test programs and cuda_kernels_bench, -j16;
#      needs pagedkv's C++ dependencies there), or, with GPU_CHECK_BUNDLE=<dir>, takes them from a
#      bundle that scripts/gpu_bundle.sh made on a machine that could build them,
#   2. runs every GPU parity test (kernels: CudaParityTest, CudaBadInputTest, CudaValidationTest,
#      CudaCopyStreamTest (the tier copy stream: fenced loads, stores after compute); engine:
#      ModelRunnerCudaTest, EveryBackendTest.CudaPluginBackend (every op case of tests/kernels/op_cases/op_cases.h
#      through the CUDA plugin)) and fails if any of them failed or was skipped,
#   3. runs cuda_kernels_bench,
#   4. when compute-sanitizer is installed, runs the kernel parity tests under memcheck.
# Every step has a timeout; the whole script fits in 8 minutes on an H200 with 16 cores (about 2
# minutes from a bundle).
# Outputs (logs, test and benchmark results, summary.txt) go to $OUT, or ./gpu-check-out.
# Usage: bash scripts/gpu_check.sh                          (exit status 0 only when every step passed)
#        GPU_CHECK_BUNDLE=gpu-bundle bash scripts/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-$PWD/gpu-check-out}"
mkdir -p "$out"
export PATH="/usr/local/cuda/bin:$PATH"
build="${GPU_CHECK_BUILD_DIR:-build-gpu-check}"
bundle="${GPU_CHECK_BUNDLE:-}"
start=$(date +%s)
status=0
launcher=()  # prefix for running a GPU program (the bundle's own loader when the system's is too old)

log() { echo "[gpu_check +$(($(date +%s) - start))s] $*" | tee -a "$out/summary.txt"; }
fail() {
  log "FAILED: $*"
  status=1
}

# Builds the GPU programs here; sets the program paths.
build_programs() {
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
  kernels_test="$build/tests/kernels/kernels_cuda_test"
  runner_test="$build/tests/engine/model/model_runner_test"
  ops_test="$build/tests/engine/model/backend_ops_test"
  bench="$build/bench/kernels/cuda_kernels_bench"
}

# Directories holding this machine's cuBLAS 13 (the bundle leaves it out), colon-separated.
cublas_dirs() {
  local roots=(/usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets /usr/lib /opt)
  local site
  site="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null)" && roots+=("$site")
  find "${roots[@]}" -name 'libcublasLt.so.13*' -printf '%h\n' 2>/dev/null | sort -u | paste -sd:
}

# Takes the GPU programs from the bundle; runs them directly when this machine's glibc loads them,
# else through the bundle's glibc and loader.
use_bundle() {
  local dirs
  dirs="$(cublas_dirs)"
  log "bundle $bundle; cuBLAS from: ${dirs:-not found}"
  local libs="$PWD/$bundle/lib:$PWD/$bundle/bin:$dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  kernels_test="$bundle/bin/kernels_cuda_test"
  runner_test="$bundle/bin/model_runner_test"
  ops_test="$bundle/bin/backend_ops_test"
  bench="$bundle/bin/cuda_kernels_bench"
  export PAGEDKV_CUDA_PLUGIN="$PWD/$bundle/bin/libpagedkv_cuda.so"
  if LD_LIBRARY_PATH="$libs" "$kernels_test" --gtest_list_tests >"$out/bundle_probe.log" 2>&1; then
    export LD_LIBRARY_PATH="$libs"
    log "bundle runs on this machine's glibc ($(ldd --version 2>/dev/null | head -n1))"
  else
    launcher=("$PWD/$bundle/glibc/ld-linux-x86-64.so.2" --library-path "$libs:$PWD/$bundle/glibc")
    log "bundle runs through its own glibc loader (see bundle_probe.log for the direct attempt)"
  fi
}

# Runs one GPU test program with a gtest filter; its log is $out/<name>.log.
run_tests() {
  local name="$1" program="$2" filter="$3"
  if ! timeout 200 "${launcher[@]}" "$program" "--gtest_filter=$filter" >"$out/$name.log" 2>&1; then
    fail "$name (see $name.log)"
  fi
  # Each test's own result line ends in its time, "(N ms)"; the closing lists repeat the names.
  local ran='[A-Za-z].* \([0-9]+ ms\)$'
  log "$name: $(grep -cE "^\[       OK \] $ran" "$out/$name.log") passed, $(grep -cE "^\[  FAILED  \] $ran" "$out/$name.log") failed, $(grep -cE "^\[  SKIPPED \] $ran" "$out/$name.log") skipped"
  if grep -qE "^\[  SKIPPED \] $ran" "$out/$name.log"; then
    fail "some GPU tests of $name were skipped (no device visible to them?): see $name.log"
  fi
}

: >"$out/summary.txt"
nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || log "nvidia-smi failed (see nvidia-smi.txt)"
cap="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' .')"
if [[ "$cap" =~ ^[0-9]+$ ]]; then arch="$cap"; else arch="80;90"; fi
log "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1); CUDA arch $arch"
if [[ -n "$bundle" ]]; then use_bundle; else build_programs; fi

log "GPU parity tests"
run_tests kernels_cuda_test "$kernels_test" 'CudaParityTest.*:CudaBadInputTest.*:CudaValidationTest.*:CudaCopyStreamTest.*'
run_tests model_runner_test "$runner_test" 'ModelRunnerCudaTest.*'
run_tests backend_ops_test "$ops_test" 'EveryBackendTest.CudaPluginBackend'

log "cuda_kernels_bench"
if ! timeout 180 "${launcher[@]}" "$bench" >"$out/cuda_kernels_bench.txt" 2>&1; then
  fail "cuda_kernels_bench (see cuda_kernels_bench.txt)"
fi
cat "$out/cuda_kernels_bench.txt" >>"$out/summary.txt"

sanitizer="$(command -v compute-sanitizer || true)"
if [[ -n "$sanitizer" ]]; then
  log "compute-sanitizer memcheck on the kernel parity tests"
  if ! timeout 150 "$sanitizer" --tool memcheck --error-exitcode 3 "${launcher[@]}" "$kernels_test" \
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
