// Copyright 2026 The pagedkv Authors.
//
// CPU RoPE, KV write (reshape_and_cache) and re-rotation of cached keys. RoPE and the KV write
// compute each token's rotation coefficients once and rotate every head with the vector kernel
// of simd/rope_simd.cc (bit-identical to the scalar RotatePair). Re-rotation keeps the scalar
// pair loop: with its per-token cos/sin already hoisted it measured faster than the vector kernel,
// whose first loads of the freshly written coefficient arrays stall on store forwarding.
#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "kernels/content_checks.h"
#include "kernels/cpu/simd/simd_kernels.h"
#include "kernels/op_validate.h"
#include "pagedkv/kernels/cpu_ops.h"
#include "pagedkv/kernels/dtype_convert.h"
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
    for (int32_t h = 0; h < cache.num_kv_heads; ++h) {
      std::memcpy(head, args.k + t * k_stride + h * hd, sizeof(float) * hd);
      if (args.rotate) simd::RotateHeads(r, head, 1, hd);
      const int64_t base = slot_base + h * cache.head_stride;
      StoreRow(cache.k, cache.dtype, base, hd, head);
      StoreRow(cache.v, cache.dtype, base, hd, args.v + t * v_stride + h * hd);
    }
  }
  return absl::OkStatus();
}

absl::Status ReRotate(const ReRotateArgs& args) {
  PAGEDKV_RETURN_IF_ERROR(ValidateReRotate(args));
  const PagedKvLayout cache = args.cache.Resolved();
  PAGEDKV_RETURN_IF_ERROR(CheckReRotateContents(args));
  const RopeTableView& rope = args.rope;
  const int32_t hd = cache.head_dim;
  const size_t head_bytes = static_cast<size_t>(hd) * DTypeSize(cache.dtype);
  float c[kMaxHeadDim / 2];
  float s[kMaxHeadDim / 2];
  float head[kMaxHeadDim];
  for (int64_t t = 0; t < args.num_tokens; ++t) {
    const int64_t src = args.src_slots[t];
    const int64_t dst = args.dst_slots[t];
    for (int32_t i = 0; i < rope.NumPairs(); ++i) {
      ReRotateCosSin(rope, args.mode, args.old_positions[t], args.new_positions[t], i, &c[i],
                     &s[i]);
    }
    const int64_t src_slot_base = cache.SlotOffset(src);
    const int64_t dst_slot_base = cache.SlotOffset(dst);
    for (int32_t h = 0; h < cache.num_kv_heads; ++h) {
      const int64_t src_base = src_slot_base + h * cache.head_stride;
      const int64_t dst_base = dst_slot_base + h * cache.head_stride;
      LoadRow(cache.k, cache.dtype, src_base, hd, head);
      for (int32_t i = 0; i < rope.NumPairs(); ++i) {
        int32_t a, b;
        RopePairDims(rope.layout, rope.rotary_dim, i, &a, &b);
        RotatePair(&head[a], &head[b], c[i], s[i]);
      }
      if (src == dst) {  // pass-through dims are already in place
        StoreRow(cache.k, cache.dtype, dst_base, rope.rotary_dim, head);
        continue;
      }
      StoreRow(cache.k, cache.dtype, dst_base, hd, head);
      const int64_t esize = DTypeSize(cache.dtype);
      std::memcpy(static_cast<char*>(cache.v) + dst_base * esize,
                  static_cast<const char*>(cache.v) + src_base * esize, head_bytes);
    }
  }
  return absl::OkStatus();
}

}  // namespace pagedkv::cpu
