// Copyright 2026 The pagedkv Authors.
//
// The floor of BM_ReRotate: re-rotation as the CPU backend did it before the tiled vector version
// (kernels/cpu/rope_ops.cc): per token, the cos/sin of every pair, then the scalar RotatePair loop
// per head. Frozen here so the A/B runs in one process; no validation (benchmark inputs are valid).
//
// Example:
//   bench::PlainReRotate(args);   // same effect as cpu::ReRotate(args) on valid args
#ifndef PAGEDKV_BENCH_KERNELS_PLAIN_REROTATE_H_
#define PAGEDKV_BENCH_KERNELS_PLAIN_REROTATE_H_

#include <cstdint>
#include <cstring>

#include "pagedkv/dtype.h"
#include "pagedkv/kernels/dtype_convert.h"
#include "pagedkv/kernels/op_args.h"
#include "pagedkv/kernels/rope_math.h"
#include "pagedkv/kernels/rope_table.h"

namespace pagedkv::bench {

// REQUIRES: args valid (cpu::ReRotate would accept them).
inline void PlainReRotate(const ReRotateArgs& args) {
  const PagedKvLayout cache = args.cache.Resolved();
  const RopeTableView& rope = args.rope;
  const int32_t hd = cache.head_dim;
  const int64_t esize = DTypeSize(cache.dtype);
  float c[kMaxHeadDim / 2];
  float s[kMaxHeadDim / 2];
  float head[kMaxHeadDim];
  for (int64_t t = 0; t < args.num_tokens; ++t) {
    for (int32_t i = 0; i < rope.NumPairs(); ++i) {
      ReRotateCosSin(rope, args.mode, args.old_positions[t], args.new_positions[t], i, &c[i],
                     &s[i]);
    }
    for (int32_t h = 0; h < cache.num_kv_heads; ++h) {
      const int64_t src = cache.SlotOffset(args.src_slots[t]) + h * cache.head_stride;
      const int64_t dst = cache.SlotOffset(args.dst_slots[t]) + h * cache.head_stride;
      LoadRow(cache.k, cache.dtype, src, hd, head);
      for (int32_t i = 0; i < rope.NumPairs(); ++i) {
        int32_t a, b;
        RopePairDims(rope.layout, rope.rotary_dim, i, &a, &b);
        RotatePair(&head[a], &head[b], c[i], s[i]);
      }
      StoreRow(cache.k, cache.dtype, dst, hd, head);
      if (src != dst) {
        std::memcpy(static_cast<char*>(cache.v) + dst * esize,
                    static_cast<const char*>(cache.v) + src * esize,
                    static_cast<size_t>(hd * esize));
      }
    }
  }
}

}  // namespace pagedkv::bench

#endif  // PAGEDKV_BENCH_KERNELS_PLAIN_REROTATE_H_
