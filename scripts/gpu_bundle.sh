#!/usr/bin/env bash
# Packs the GPU check's programs, built here, for a GPU machine that has the CUDA toolkit and
# driver but none of pagedkv's C++ libraries (Abseil, Highway, ...), so it cannot build pagedkv:
#   bin/    the CUDA plugin, the three GPU test programs and cuda_kernels_bench,
#   lib/    every shared library they load except glibc's, the CUDA driver and cuBLAS (the GPU
#           machine's own cuBLAS is used: libcublasLt alone is over 500 MB),
#   glibc/  this machine's glibc and its loader, for a GPU machine whose glibc is older.
# Then, on the GPU machine: GPU_CHECK_BUNDLE=<dir> bash scripts/gpu_check.sh
# Usage: bash scripts/gpu_bundle.sh [BUILD_DIR (build)] [BUNDLE_DIR (gpu-bundle)]
# The build must have the CUDA plugin (nvcc present; CMAKE_CUDA_ARCHITECTURES naming the GPU's).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
bundle="${2:-gpu-bundle}"
programs=(
  "$build/libpagedkv_cuda.so"
  "$build/tests/kernels/kernels_cuda_test"
  "$build/tests/engine/model/model_runner_test"
  "$build/tests/engine/model/backend_ops_test"
  "$build/bench/kernels/cuda_kernels_bench"
)
for program in "${programs[@]}"; do
  [[ -f "$program" ]] || { echo "gpu_bundle: $program is missing: build with nvcc present first" >&2; exit 1; }
done
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/glibc"
cp "${programs[@]}" "$bundle/bin/"

# Dependencies by resolved path; the GPU machine supplies the driver and cuBLAS.
ldd "${programs[@]}" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u | while read -r library; do
  name="$(basename "$library")"
  case "$name" in
    libcuda.so* | libcublas.so* | libcublasLt.so* | libpagedkv_cuda.so) ;;
    libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.*) cp -L "$library" "$bundle/glibc/" ;;
    *) cp -L "$library" "$bundle/lib/" ;;
  esac
done
cp -L /lib64/ld-linux-x86-64.so.2 "$bundle/glibc/"
echo "gpu_bundle: $(du -sh "$bundle" | cut -f1) in $bundle ($(ls "$bundle/lib" | wc -l) libraries)"
