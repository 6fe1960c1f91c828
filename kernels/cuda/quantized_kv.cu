// Copyright 2026 The pagedkv Authors.
//
// Quantized KV write and re-rotation (see quantized_kv.h). A row of up to kMaxHeadDim floats lives
// in the thread's local memory; the kernels are simple and correct first (quantization needs the
// whole row's scale), not tuned like the 16/32-bit paths of rope.cu.
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/content_checks.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/quantized_kv.h"
#include "pagedkv/kernels/kv_quant.h"
#include "pagedkv/kernels/rope_table.h"
#include "pagedkv/types.h"

namespace pagedkv::cuda {
namespace {

constexpr int kThreads = 128;

unsigned Blocks(int64_t rows) { return static_cast<unsigned>((rows + kThreads - 1) / kThreads); }

// Thread i writes row i: token i / (2 heads), K (even) or V (odd) of head (i / 2) % heads.
__global__ void QuantizedKvWriteKernel(ReshapeAndCacheArgs a, int64_t k_stride, int64_t v_stride) {
  const PagedKvLayout& cache = a.cache;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t t = i / (2 * cache.num_kv_heads);
  if (t >= a.num_tokens) return;
  const auto h = static_cast<int32_t>((i / 2) % cache.num_kv_heads);
  const bool is_k = i % 2 == 0;
  const int64_t slot = a.slot_mapping[t];
  if (!SlotValid(slot, cache.NumSlots(), false)) return;  // -1 (or unchecked out of range)
  if (is_k && a.rotate && !PositionValid(a.positions[t])) return;
  const int32_t hd = cache.head_dim;
  const float* in =
      is_k ? a.k + t * k_stride + int64_t{h} * hd : a.v + t * v_stride + int64_t{h} * hd;
  float row[kMaxHeadDim];
  for (int32_t d = 0; d < hd; ++d) row[d] = in[d];
  if (is_k && a.rotate) RopeRotateHead(a.rope, a.positions[t], row);
  if (is_k && a.rotated_k != nullptr) {
    float* out = a.rotated_k + (t * cache.num_kv_heads + h) * hd;
    for (int32_t d = 0; d < hd; ++d) out[d] = row[d];
  }
  const PagedKvLayout side = is_k ? cache.KSide() : cache.VSide();
  StoreKvRow(side.k, side.dtype, side.SlotOffset(slot) + h * side.head_stride, hd, row);
}

// Thread i moves row i: token i / heads, head i % heads. Its key comes from a.src_keys when set.
__global__ void QuantizedReRotateKernel(ReRotateArgs a) {
  const PagedKvLayout& cache = a.cache;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t t = i / cache.num_kv_heads;
  if (t >= a.num_tokens) return;
  const auto h = static_cast<int32_t>(i % cache.num_kv_heads);
  const int64_t src = a.src_slots[t], dst = a.dst_slots[t];
  const int64_t old_position = a.old_positions[t], new_position = a.new_positions[t];
  if (!SlotValid(src, cache.NumSlots(), false) || !SlotValid(dst, cache.NumSlots(), false) ||
      !PositionValid(old_position) || !PositionValid(new_position)) {
    return;  // only with unchecked contents
  }
  const int32_t hd = cache.head_dim;
  const int64_t from = cache.SlotOffset(src) + h * cache.head_stride;
  const int64_t to = cache.SlotOffset(dst) + h * cache.head_stride;
  float row[kMaxHeadDim];
  if (a.src_keys != nullptr) {  // the float key, rounded once below
    const float* key = a.src_keys + (t * cache.num_kv_heads + h) * hd;
    for (int32_t d = 0; d < hd; ++d) row[d] = key[d];
  } else {
    LoadKvRow(cache.k, cache.dtype, from, hd, row);
  }
  for (int32_t pair = 0; pair < a.rope.NumPairs(); ++pair) {
    float c, s;
    ReRotateCosSin(a.rope, a.mode, old_position, new_position, pair, &c, &s);
    int32_t da, db;
    RopePairDims(a.rope.layout, a.rope.rotary_dim, pair, &da, &db);
    RotatePair(&row[da], &row[db], c, s);
  }
  StoreKvRow(cache.k, cache.dtype, to, hd, row);
  if (src == dst) return;
  const PagedKvLayout v_side = cache.VSide();
  const int64_t esize = DTypeSize(v_side.dtype);
  const auto* v_from = static_cast<const unsigned char*>(v_side.k) +
                       (v_side.SlotOffset(src) + h * v_side.head_stride) * esize;
  auto* v_to = static_cast<unsigned char*>(v_side.k) +
               (v_side.SlotOffset(dst) + h * v_side.head_stride) * esize;
  for (int64_t b = 0; b < v_side.RowUnits() * esize; ++b) v_to[b] = v_from[b];
}

}  // namespace

absl::Status LaunchQuantizedKvWrite(const ReshapeAndCacheArgs& args, int64_t k_stride,
                                    int64_t v_stride, cudaStream_t stream) {
  const int64_t rows = args.num_tokens * 2 * args.cache.num_kv_heads;
  QuantizedKvWriteKernel<<<Blocks(rows), kThreads, 0, stream>>>(args, k_stride, v_stride);
  PAGEDKV_CUDA_CHECK_LAUNCH("QuantizedKvWriteKernel");
  return absl::OkStatus();
}

absl::Status LaunchQuantizedReRotate(const ReRotateArgs& args, cudaStream_t stream) {
  const int64_t rows = args.num_tokens * args.cache.num_kv_heads;
  QuantizedReRotateKernel<<<Blocks(rows), kThreads, 0, stream>>>(args);
  PAGEDKV_CUDA_CHECK_LAUNCH("QuantizedReRotateKernel");
  return absl::OkStatus();
}

}  // namespace pagedkv::cuda
