// Copyright 2026 The pagedkv Authors.
//
// Warp and block reductions used by the CUDA kernels (device code only).
#ifndef PAGEDKV_KERNELS_CUDA_BLOCK_REDUCE_CUH_
#define PAGEDKV_KERNELS_CUDA_BLOCK_REDUCE_CUH_

namespace pagedkv::cuda {

constexpr int kWarpSize = 32;

template <typename T>
__device__ __forceinline__ T WarpSum(T value) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  }
  return value;
}

// Sum over the whole block (blockDim.x a multiple of 32, <= 1024); every thread gets the result.
// `scratch` holds >= 32 elements of shared memory.
template <typename T>
__device__ __forceinline__ T BlockSum(T value, T* scratch) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int num_warps = blockDim.x / kWarpSize;
  value = WarpSum(value);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  T total = lane < num_warps ? scratch[lane] : T(0);
  return WarpSum(total);
}

}  // namespace pagedkv::cuda

#endif  // PAGEDKV_KERNELS_CUDA_BLOCK_REDUCE_CUH_
