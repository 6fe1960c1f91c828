// Copyright 2026 The pagedkv Authors.
//
// CPU RoPE, KV write (reshape_and_cache) and re-rotation of cached keys. RoPE and the KV write
// compute each token's rotation coefficients once and rotate every head with the vector kernel
// of simd/rope_simd.cc (bit-identical to the scalar RotatePair). Re-rotation does the same over
// tiles of tokens: the coefficients of a whole tile first, then the vector rotation (an earlier
// version that rotated each token right after writing its coefficients stalled on store
// forwarding and lost to the scalar pair loop; bench/kernels/plain_rerotate.h keeps that loop as
// the benchmark's floor).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "kernels/content_checks.h"
#include "kernels/cpu/simd/simd_kernels.h"
#include "kernels/op_validate.h"
#include "pagedkv/kernels/cpu_ops.h"
#include "pagedkv/kernels/dtype_convert.h"
#include "pagedkv/kernels/kv_quant.h"
#include "pagedkv/kernels/rope_table.h"
#include "pagedkv/rope_config.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cpu {

absl::Status Rope(const RopeArgs& args) {
  PAGEDKV_RETURN_IF_ERROR(ValidateRope(args));
  PAGEDKV_RETURN_IF_ERROR(CheckRopeContents(args));
  const int64_t hd = args.rope.head_dim;
  const int64_t q_stride = args.q_stride == 0 ? args.num_q_heads * hd : args.q_stride;
  const int64_t k_stride = args.k_stride == 0 ? args.num_kv_heads * hd : args.k_stride;
  simd::RotationCoefficients r;
  for (int64_t t = 0; t < args.num_tokens; ++t) {
    simd::RopeCoefficients(args.rope, args.positions[t], &r);
    simd::RotateHeads(r, args.q + t * q_stride, args.num_q_heads, hd);
    if (args.k != nullptr) simd::RotateHeads(r, args.k + t * k_stride, args.num_kv_heads, hd);
  }
  return absl::OkStatus();
}

absl::Status ReshapeAndCache(const ReshapeAndCacheArgs& args) {
  PAGEDKV_RETURN_IF_ERROR(ValidateReshapeAndCache(args));
  const PagedKvLayout cache = args.cache.Resolved();
  const PagedKvLayout v_side = cache.VSide();
  PAGEDKV_RETURN_IF_ERROR(CheckReshapeAndCacheContents(args));
  const int32_t hd = cache.head_dim;
  const int64_t kv_row = int64_t{cache.num_kv_heads} * hd;
  const int64_t q_stride = args.q_stride == 0 ? int64_t{args.num_q_heads} * hd : args.q_stride;
  const int64_t k_stride = args.k_stride == 0 ? kv_row : args.k_stride;
  const int64_t v_stride = args.v_stride == 0 ? kv_row : args.v_stride;
  float head[kMaxHeadDim];
  simd::RotationCoefficients r;
  for (int64_t t = 0; t < args.num_tokens; ++t) {
    const int64_t slot = args.slot_mapping[t];
    if (args.rotate && (args.q != nullptr || slot >= 0)) {
      simd::RopeCoefficients(args.rope, args.positions[t], &r);
    }
    if (args.rotate && args.q != nullptr) {
      simd::RotateHeads(r, args.q + t * q_stride, args.num_q_heads, hd);
    }
    if (slot < 0) continue;
    const int64_t slot_base = cache.SlotOffset(slot);
    const int64_t v_slot_base = v_side.SlotOffset(slot);
    for (int32_t h = 0; h < cache.num_kv_heads; ++h) {
      std::memcpy(head, args.k + t * k_stride + h * hd, sizeof(float) * hd);
      if (args.rotate) simd::RotateHeads(r, head, 1, hd);
      if (args.rotated_k != nullptr) {
        std::memcpy(args.rotated_k + (t * cache.num_kv_heads + h) * hd, head, sizeof(float) * hd);
      }
      StoreKvRow(cache.k, cache.dtype, slot_base + h * cache.head_stride, hd, head);
      StoreKvRow(v_side.k, v_side.dtype, v_slot_base + h * v_side.head_stride, hd,
                 args.v + t * v_stride + h * hd);
    }
  }
  return absl::OkStatus();
}

namespace {

// Tokens whose rotation coefficients are all computed before the first is used: by the time a
// token's vector loads read its coefficients, the scalar stores that wrote them have left the
// store buffer (loading them right after writing them stalled on store forwarding).
constexpr int64_t kReRotateTile = 16;

// Copies every head row of slot `src` to slot `dst` in `side`'s k pages (side.dtype's rows).
void CopySlotRows(const PagedKvLayout& side, int64_t src, int64_t dst) {
  const int64_t esize = DTypeSize(side.dtype);
  const int64_t src_base = side.SlotOffset(src);
  const int64_t dst_base = side.SlotOffset(dst);
  auto* pages = static_cast<char*>(side.k);
  for (int32_t h = 0; h < side.num_kv_heads; ++h) {
    std::memcpy(pages + (dst_base + h * side.head_stride) * esize,
                pages + (src_base + h * side.head_stride) * esize,
                static_cast<size_t>(side.RowUnits() * esize));
  }
}

// Token t's K heads rotated by r from src_slots[t] to dst_slots[t], its V heads copied. REQUIRES:
// `cache` resolved, v_side its VSide().
void ReRotateToken(const ReRotateArgs& args, const PagedKvLayout& cache,
                   const PagedKvLayout& v_side, int64_t t, const simd::RotationCoefficients& r) {
  const int32_t hd = cache.head_dim;
  const int64_t src = args.src_slots[t];
  const int64_t dst = args.dst_slots[t];
  const int64_t src_slot_base = cache.SlotOffset(src);
  const int64_t dst_slot_base = cache.SlotOffset(dst);
  if (src != dst) CopySlotRows(v_side, src, dst);
  if (args.src_keys != nullptr) {  // the float keys: rotated and rounded once
    const float* keys = args.src_keys + t * cache.num_kv_heads * hd;
    float head[kMaxHeadDim];
    for (int32_t h = 0; h < cache.num_kv_heads; ++h) {
      std::memcpy(head, keys + int64_t{h} * hd, sizeof(float) * hd);
      simd::RotateHeads(r, head, 1, hd);
      StoreKvRow(cache.k, cache.dtype, dst_slot_base + h * cache.head_stride, hd, head);
    }
    return;
  }
  if (cache.dtype == DType::kF32) {  // copy K to dst, then rotate dst's K heads in place
    if (src != dst) CopySlotRows(cache, src, dst);  // CopySlotRows reads k only
    simd::RotateHeads(r, static_cast<float*>(cache.k) + dst_slot_base, cache.num_kv_heads,
                      cache.head_stride);
    return;
  }
  // A quantized row is dequantized, rotated and quantized again as a whole (its scales change).
  const bool quantized = IsQuantizedDType(cache.dtype);
  float head[kMaxHeadDim];
  for (int32_t h = 0; h < cache.num_kv_heads; ++h) {
    const int64_t src_base = src_slot_base + h * cache.head_stride;
    const int64_t dst_base = dst_slot_base + h * cache.head_stride;
    LoadKvRow(cache.k, cache.dtype, src_base, hd, head);
    simd::RotateHeads(r, head, 1, hd);
    // In place, the pass-through dims are already there (a quantized row is stored whole).
    StoreKvRow(cache.k, cache.dtype, dst_base, src == dst && !quantized ? r.rotary_dim : hd, head);
  }
}

}  // namespace

absl::Status ReRotate(const ReRotateArgs& args) {
  PAGEDKV_RETURN_IF_ERROR(ValidateReRotate(args));
  const PagedKvLayout cache = args.cache.Resolved();
  const PagedKvLayout v_side = cache.VSide();
  PAGEDKV_RETURN_IF_ERROR(CheckReRotateContents(args));
  simd::RotationCoefficients tile[kReRotateTile];
  for (int64_t t0 = 0; t0 < args.num_tokens; t0 += kReRotateTile) {
    const int64_t nt = std::min(kReRotateTile, args.num_tokens - t0);
    for (int64_t i = 0; i < nt; ++i) {
      simd::ReRotateCoefficients(args.rope, args.mode, args.old_positions[t0 + i],
                                 args.new_positions[t0 + i], &tile[i]);
    }
    for (int64_t i = 0; i < nt; ++i) ReRotateToken(args, cache, v_side, t0 + i, tile[i]);
  }
  return absl::OkStatus();
}

}  // namespace pagedkv::cpu
