// Copyright 2026 The pagedkv Authors.
//
// CUDA paged attention. One block per (query token, query head); its warps split the sequence's
// keys (key j goes to warp j mod num_warps), each lane holds head_dim / 32 elements of q and of the
// output accumulator, a warp reduces one score per key with shuffles and updates its
// OnlineSoftmax (kernels/softmax_math.h); the warps' partial states are merged at the end with
// OnlineSoftmax::Merge. A token finds its sequence by binary search over query_start_loc.
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"
#include "kernels/dtype_convert.h"
#include "kernels/op_validate.h"
#include "kernels/softmax_math.h"
#include "pagedkv/rope_config.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kPerLane = kMaxHeadDim / kWarpSize;  // 8

__device__ __forceinline__ int32_t SequenceOf(const int32_t* query_start_loc, int32_t num_seqs,
                                              int64_t token) {
  int32_t lo = 0;  // largest s < num_seqs with query_start_loc[s] <= token
  int32_t hi = num_seqs;
  while (hi - lo > 1) {
    const int32_t mid = lo + (hi - lo) / 2;
    if (query_start_loc[mid] <= token) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

__global__ void __launch_bounds__(kWarps* kWarpSize)
    PagedAttentionKernel(PagedAttentionArgs a, float scale) {
  __shared__ float s_m[kWarps];
  __shared__ float s_l[kWarps];
  __shared__ float s_acc[kWarps][kMaxHeadDim];
  const int64_t t = blockIdx.x;
  const int32_t qh = blockIdx.y;
  const PagedKvLayout& cache = a.cache;
  const int32_t hd = cache.head_dim;
  const int32_t group = a.num_q_heads / cache.num_kv_heads;
  const int32_t kvh = qh / group;
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;

  const int32_t s = SequenceOf(a.query_start_loc, a.num_seqs, t);
  const int32_t kv_len = a.kv_lens[s];
  const int64_t position = a.positions[t];
  int64_t last = a.causal && position < kv_len ? position : kv_len - 1;
  if (position < 0) last = -1;
  const int64_t capacity = static_cast<int64_t>(a.max_blocks_per_seq) * cache.block_size;
  if (last >= capacity) last = capacity - 1;  // kv_len beyond the block table row
  const int32_t* table = a.block_tables + static_cast<int64_t>(s) * a.max_blocks_per_seq;

  const float* q = a.q + (t * a.num_q_heads + qh) * hd;
  float q_reg[kPerLane];
  float acc[kPerLane];
#pragma unroll
  for (int r = 0; r < kPerLane; ++r) {
    const int d = lane + r * kWarpSize;
    q_reg[r] = d < hd ? q[d] : 0.0f;
    acc[r] = 0.0f;
  }
  OnlineSoftmax softmax;
  for (int64_t j = warp; j <= last; j += kWarps) {
    const int32_t block = table[j / cache.block_size];
    if (block < 0 || block >= cache.num_blocks) continue;  // warp-uniform
    const int64_t base =
        cache.ElementOffset(cache.Slot(block, static_cast<int32_t>(j % cache.block_size)), kvh, 0);
    float dot = 0.0f;
#pragma unroll
    for (int r = 0; r < kPerLane; ++r) {
      const int d = lane + r * kWarpSize;
      if (d < hd) dot += q_reg[r] * LoadElement(cache.k, cache.dtype, base + d);
    }
    dot = WarpSum(dot);
    float rescale, p;
    softmax.Update(dot * scale, &rescale, &p);
#pragma unroll
    for (int r = 0; r < kPerLane; ++r) {
      const int d = lane + r * kWarpSize;
      if (d < hd) acc[r] = acc[r] * rescale + p * LoadElement(cache.v, cache.dtype, base + d);
    }
  }
  if (lane == 0) {
    s_m[warp] = softmax.m;
    s_l[warp] = softmax.l;
  }
#pragma unroll
  for (int r = 0; r < kPerLane; ++r) {
    const int d = lane + r * kWarpSize;
    if (d < hd) s_acc[warp][d] = acc[r];
  }
  __syncthreads();
  float* out = a.out + (t * a.num_q_heads + qh) * hd;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    OnlineSoftmax total;
    float o = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      OnlineSoftmax part;
      part.m = s_m[w];
      part.l = s_l[w];
      float self_scale, other_scale;
      total.Merge(part, &self_scale, &other_scale);
      o = o * self_scale + s_acc[w][d] * other_scale;
    }
    out[d] = o * total.InverseSum();
  }
}

}  // namespace

absl::Status PagedAttention(const PagedAttentionArgs& args, cudaStream_t stream) {
  PAGEDKV_RETURN_IF_ERROR(ValidatePagedAttention(args));
  if (args.num_tokens == 0) return absl::OkStatus();
  if (args.num_seqs == 0) {
    return absl::InvalidArgumentError("PagedAttention: num_tokens > 0 needs num_seqs >= 1");
  }
  if (args.num_tokens > INT32_MAX || args.num_q_heads > 65535) {
    return absl::InvalidArgumentError(
        "PagedAttention: num_tokens must be < 2^31 and num_q_heads <= 65535");
  }
  const float scale =
      args.scale > 0.0f ? args.scale : 1.0f / sqrtf(static_cast<float>(args.cache.head_dim));
  const dim3 grid(static_cast<unsigned>(args.num_tokens), static_cast<unsigned>(args.num_q_heads));
  PagedAttentionKernel<<<grid, kWarps * kWarpSize, 0, stream>>>(args, scale);
  PAGEDKV_CUDA_CHECK_LAUNCH("PagedAttentionKernel");
  return absl::OkStatus();
}

}  // namespace pagedkv::cuda
