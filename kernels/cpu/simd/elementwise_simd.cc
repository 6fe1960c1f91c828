// Copyright 2026 The pagedkv Authors.
//
// Vector RMSNorm and SwiGLU rows. RMSNorm: the sum of squares in vector accumulators (one lane sum,
// then the scalar tail), the shared RmsNormInverse, then x * inv * weight. SwiGLU: silu through
// Highway's vector exp (contrib/math, about 1 ulp); the tail uses the scalar SwiGluValue.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/simd/elementwise_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Each target's pass re-includes this file after foreach_target.h.
#include <cmath>
#include <cstdint>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "kernels/cpu/simd/simd_kernels.h"
#include "kernels/elementwise_math.h"

HWY_BEFORE_NAMESPACE();
namespace pagedkv::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void RmsNormRowsImpl(const RmsNormArgs& a, int64_t row_begin, int64_t row_end) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float* x = a.x + r * a.dim;
    float* out = a.out + r * a.dim;
    auto acc0 = hn::Zero(d);
    auto acc1 = hn::Zero(d);
    int64_t i = 0;
    for (; i + 2 * lanes <= a.dim; i += 2 * lanes) {
      const auto v0 = hn::LoadU(d, x + i);
      const auto v1 = hn::LoadU(d, x + i + lanes);
      acc0 = hn::MulAdd(v0, v0, acc0);
      acc1 = hn::MulAdd(v1, v1, acc1);
    }
    for (; i + lanes <= a.dim; i += lanes) {
      const auto v = hn::LoadU(d, x + i);
      acc0 = hn::MulAdd(v, v, acc0);
    }
    float sum_sq = hn::GetLane(hn::SumOfLanes(d, hn::Add(acc0, acc1)));
    for (; i < a.dim; ++i) sum_sq += x[i] * x[i];
    const float inv_rms = RmsNormInverse(sum_sq, a.dim, a.eps);
    const auto inv = hn::Set(d, inv_rms);
    int64_t j = 0;
    for (; j + lanes <= a.dim; j += lanes) {
      const auto v = hn::Mul(hn::LoadU(d, x + j), inv);
      hn::StoreU(hn::Mul(v, hn::LoadU(d, a.weight + j)), d, out + j);
    }
    for (; j < a.dim; ++j) out[j] = x[j] * inv_rms * a.weight[j];
  }
}

void SwiGluRowsImpl(const SwiGluArgs& a, int64_t row_begin, int64_t row_end) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t gate_stride = a.gate_stride == 0 ? a.dim : a.gate_stride;
  const int64_t up_stride = a.up_stride == 0 ? a.dim : a.up_stride;
  const auto one = hn::Set(d, 1.0f);
  // exp(-g) for g below -88 overflows to inf in float; clamp so the vector exp stays finite
  // (silu is then g / 3.4e38, i.e. -0 to within a denormal, as the scalar path gives).
  const auto max_arg = hn::Set(d, 88.0f);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float* gate = a.gate + r * gate_stride;
    const float* up = a.up + r * up_stride;
    float* out = a.out + r * a.dim;
    int64_t i = 0;
    for (; i + lanes <= a.dim; i += lanes) {
      const auto g = hn::LoadU(d, gate + i);
      const auto e = hn::Exp(d, hn::Min(hn::Neg(g), max_arg));
      const auto silu = hn::Div(g, hn::Add(one, e));
      hn::StoreU(hn::Mul(silu, hn::LoadU(d, up + i)), d, out + i);
    }
#if !HWY_MEM_OPS_MIGHT_FAULT
    if (i < a.dim) {  // AVX-512: the tail as one masked vector (e.g. hidden 172 = 10 x 16 + 12)
      const auto mask = hn::FirstN(d, static_cast<size_t>(a.dim - i));
      const auto g = hn::MaskedLoad(mask, d, gate + i);
      const auto e = hn::Exp(d, hn::Min(hn::Neg(g), max_arg));
      const auto silu = hn::Div(g, hn::Add(one, e));
      hn::BlendedStore(hn::Mul(silu, hn::MaskedLoad(mask, d, up + i)), mask, d, out + i);
      i = a.dim;
    }
#endif
    for (; i < a.dim; ++i) out[i] = SwiGluValue(gate[i], up[i]);
  }
}

double SumExpShiftedImpl(const float* HWY_RESTRICT x, int64_t n, float shift) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto vshift = hn::Set(d, shift);
  // exp(v - shift) for v - shift below -88 is below 6e-39 of the largest term (1): clamped there
  // so that -inf (and any large negative) stays in Exp's range.
  const auto min_arg = hn::Set(d, -88.0f);
  constexpr int64_t kVectorsPerBlock = 8;  // fp32 sums of at most 8 terms <= 1 per lane
  double sum = 0.0;
  int64_t i = 0;
  while (i + lanes <= n) {
    auto block = hn::Zero(d);
    for (int64_t v = 0; v < kVectorsPerBlock && i + lanes <= n; ++v, i += lanes) {
      block = hn::Add(block, hn::Exp(d, hn::Max(hn::Sub(hn::LoadU(d, x + i), vshift), min_arg)));
    }
    sum += static_cast<double>(hn::GetLane(hn::SumOfLanes(d, block)));
  }
  for (; i < n; ++i) sum += std::exp(static_cast<double>(x[i]) - shift);
  return sum;
}

}  // namespace HWY_NAMESPACE
}  // namespace pagedkv::cpu::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pagedkv::cpu::simd {

HWY_EXPORT(RmsNormRowsImpl);
HWY_EXPORT(SwiGluRowsImpl);
HWY_EXPORT(SumExpShiftedImpl);

void RmsNormRows(const RmsNormArgs& args, int64_t row_begin, int64_t row_end) {
  HWY_DYNAMIC_DISPATCH(RmsNormRowsImpl)(args, row_begin, row_end);
}

void SwiGluRows(const SwiGluArgs& args, int64_t row_begin, int64_t row_end) {
  HWY_DYNAMIC_DISPATCH(SwiGluRowsImpl)(args, row_begin, row_end);
}

double SumExpShifted(const float* x, int64_t n, float shift) {
  return HWY_DYNAMIC_DISPATCH(SumExpShiftedImpl)(x, n, shift);
}

}  // namespace pagedkv::cpu::simd
#endif  // HWY_ONCE
