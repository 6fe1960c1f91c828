// Copyright 2026 The pagedkv Authors.
//
// Per-target (Highway -inl.h convention: included inside each target's pass, after
// foreach_target.h) lane sums of four vectors at once: two rounds of interleave-and-add within each
// 128-bit block, then the blocks added pairwise. About a third of the shuffles of four separate
// SumOfLanes, which matters when a dot product is only a few vectors long (k = 64, head_dim 16).
// The order of the additions depends only on the target, so a sum is reproducible.
//
// Example (inside HWY_NAMESPACE):
//   float sums[4];
//   SumOfLanes4(d, acc0, acc1, acc2, acc3, sums);   // sums[i] = sum of acc_i's lanes
#if defined(PAGEDKV_KERNELS_CPU_SIMD_REDUCE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PAGEDKV_KERNELS_CPU_SIMD_REDUCE_INL_H_
#undef PAGEDKV_KERNELS_CPU_SIMD_REDUCE_INL_H_
#else
#define PAGEDKV_KERNELS_CPU_SIMD_REDUCE_INL_H_
#endif

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace pagedkv::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR
// out[0, 4) = the four lanes of v summed over its 128-bit blocks.
template <class D, class V>
HWY_INLINE void StoreBlockSum(D d, V v, float* HWY_RESTRICT out) {
  if constexpr (hn::MaxLanes(d) <= 4) {
    hn::StoreU(v, d, out);
  } else {
    const hn::Half<D> dh;
    StoreBlockSum(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)), out);
  }
}
#endif

// out[i] = sum of the lanes of v_i, i < 4. REQUIRES: D is a full float vector.
template <class D, class V>
HWY_INLINE void SumOfLanes4([[maybe_unused]] D d, V v0, V v1, V v2, V v3, float* HWY_RESTRICT out) {
#if HWY_TARGET == HWY_SCALAR
  out[0] = hn::GetLane(v0);
  out[1] = hn::GetLane(v1);
  out[2] = hn::GetLane(v2);
  out[3] = hn::GetLane(v3);
#else
  // Per block: (v0[0]+v0[2], v1[0]+v1[2], v0[1]+v0[3], v1[1]+v1[3]) and the same for v2, v3.
  const V s01 = hn::Add(hn::InterleaveLower(d, v0, v1), hn::InterleaveUpper(d, v0, v1));
  const V s23 = hn::Add(hn::InterleaveLower(d, v2, v3), hn::InterleaveUpper(d, v2, v3));
  const hn::Repartition<double, D> dd;
  const auto w01 = hn::BitCast(dd, s01);
  const auto w23 = hn::BitCast(dd, s23);
  const V sums = hn::Add(hn::BitCast(d, hn::InterleaveLower(dd, w01, w23)),
                         hn::BitCast(d, hn::InterleaveUpper(dd, w01, w23)));
  StoreBlockSum(d, sums, out);
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace pagedkv::cpu::simd
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
