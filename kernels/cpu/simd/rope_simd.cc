// Copyright 2026 The pagedkv Authors.
//
// Vector rotation of heads by per-token coefficients (RoPE, the KV write, re-rotation). With
// partner(a) = b and partner(b) = a for each rotated pair (a, b), and cm = c, sm = (-s at a, +s at
// b), every rotated dim is x'[d] = x[d] * cm[d] + x[partner(d)] * sm[d]: the same products and sum
// as RotatePair (kernels/rope_math.h), without fused multiply-add, so the result is bit-identical
// to the scalar rotation. Interleaved pairs swap neighbours within a vector (Shuffle2301);
// half-split pairs read the two halves side by side.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/simd/rope_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Each target's pass re-includes this file after foreach_target.h.
#include <cstdint>

#include "hwy/highway.h"
#include "kernels/cpu/simd/simd_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace pagedkv::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

HWY_INLINE float Rotated(const float* x, const RotationCoefficients& r, int32_t d, int32_t p) {
  return x[d] * r.cm[d] + x[p] * r.sm[d];
}

// Interleaved pairs (2i, 2i + 1).
HWY_INLINE void RotateInterleaved(const RotationCoefficients& r, float* HWY_RESTRICT x) {
  int32_t d = 0;
#if HWY_TARGET != HWY_SCALAR
  const hn::ScalableTag<float> df;
  const auto lanes = static_cast<int32_t>(hn::Lanes(df));
  for (; d + lanes <= r.rotary_dim; d += lanes) {
    const auto v = hn::LoadU(df, x + d);
    const auto rotated = hn::Add(hn::Mul(v, hn::LoadU(df, r.cm + d)),
                                 hn::Mul(hn::Shuffle2301(v), hn::LoadU(df, r.sm + d)));
    hn::StoreU(rotated, df, x + d);
  }
#endif
  for (; d < r.rotary_dim; d += 2) {
    const float a = Rotated(x, r, d, d + 1);
    const float b = Rotated(x, r, d + 1, d);
    x[d] = a;
    x[d + 1] = b;
  }
}

// Half-split pairs (i, i + rotary_dim / 2).
HWY_INLINE void RotateHalfSplit(const RotationCoefficients& r, float* HWY_RESTRICT x) {
  const int32_t half = r.rotary_dim / 2;
  int32_t i = 0;
#if HWY_TARGET != HWY_SCALAR
  const hn::ScalableTag<float> df;
  const auto lanes = static_cast<int32_t>(hn::Lanes(df));
  for (; i + lanes <= half; i += lanes) {
    const auto a = hn::LoadU(df, x + i);
    const auto b = hn::LoadU(df, x + i + half);
    const auto ra =
        hn::Add(hn::Mul(a, hn::LoadU(df, r.cm + i)), hn::Mul(b, hn::LoadU(df, r.sm + i)));
    const auto rb = hn::Add(hn::Mul(b, hn::LoadU(df, r.cm + i + half)),
                            hn::Mul(a, hn::LoadU(df, r.sm + i + half)));
    hn::StoreU(ra, df, x + i);
    hn::StoreU(rb, df, x + i + half);
  }
#endif
  for (; i < half; ++i) {
    const float a = Rotated(x, r, i, i + half);
    const float b = Rotated(x, r, i + half, i);
    x[i] = a;
    x[i + half] = b;
  }
}

void RotateHeadsImpl(const RotationCoefficients& r, float* x, int32_t num_heads,
                     int64_t head_stride) {
  for (int32_t h = 0; h < num_heads; ++h) {
    float* head = x + h * head_stride;
    if (r.layout == RopeLayout::kInterleaved) {
      RotateInterleaved(r, head);
    } else {
      RotateHalfSplit(r, head);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace pagedkv::cpu::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pagedkv::cpu::simd {

HWY_EXPORT(RotateHeadsImpl);

void RotateHeads(const RotationCoefficients& r, float* x, int32_t num_heads, int64_t head_stride) {
  HWY_DYNAMIC_DISPATCH(RotateHeadsImpl)(r, x, num_heads, head_stride);
}

void SetPair(RopeLayout layout, int32_t pair, float c, float s, RotationCoefficients* r) {
  int32_t a, b;
  RopePairDims(layout, r->rotary_dim, pair, &a, &b);
  r->cm[a] = c;
  r->cm[b] = c;
  r->sm[a] = -s;
  r->sm[b] = s;
}

void RopeCoefficients(const RopeTableView& rope, int64_t position, RotationCoefficients* r) {
  r->layout = rope.layout;
  r->rotary_dim = rope.rotary_dim;
  for (int32_t i = 0; i < rope.NumPairs(); ++i) {
    float c, s;
    rope.CosSin(position, i, &c, &s);
    SetPair(rope.layout, i, c * rope.attention_factor, s * rope.attention_factor, r);
  }
}

void ReRotateCoefficients(const RopeTableView& rope, ReRotateMode mode, int64_t old_position,
                          int64_t new_position, RotationCoefficients* r) {
  r->layout = rope.layout;
  r->rotary_dim = rope.rotary_dim;
  for (int32_t i = 0; i < rope.NumPairs(); ++i) {
    float c, s;
    ReRotateCosSin(rope, mode, old_position, new_position, i, &c, &s);
    SetPair(rope.layout, i, c, s, r);
  }
}

}  // namespace pagedkv::cpu::simd
#endif  // HWY_ONCE
