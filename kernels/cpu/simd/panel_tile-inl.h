// Copyright 2026 The pagedkv Authors.
//
// Per-target (Highway -inl.h convention: included inside each target's pass, after
// foreach_target.h) register tile of the packed linear layout (simd_kernels.h, PackWeights):
// y[r][c] (+)= sum over kk of x[r][kk] * panel[kk][c], one FMA chain per y element in k order,
// starting from 0 and added to y at the end when accumulating. PackedLinear runs it over panels
// packed once; QuantLinear over panels it decodes from blocks per call (m >= 16), which gives the
// same bits as PackedLinear over the fp32 weights converted at load.
//
// Example (inside HWY_NAMESPACE):
//   PanelTile<4>(x, k, panel, y, ldy, cols, accumulate);   // 4 rows of x, one panel
#if defined(PAGEDKV_KERNELS_CPU_SIMD_PANEL_TILE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PAGEDKV_KERNELS_CPU_SIMD_PANEL_TILE_INL_H_
#undef PAGEDKV_KERNELS_CPU_SIMD_PANEL_TILE_INL_H_
#else
#define PAGEDKV_KERNELS_CPU_SIMD_PANEL_TILE_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace pagedkv::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Vectors per panel (C) and rows per register tile (R): 4 x 4 accumulators of AVX-512's 32
// registers; 4 x 2 of AVX2's 16 (SSE4 and the scalar baseline alike).
constexpr int kVecs = HWY_TARGET <= HWY_AVX3 ? 4 : 2;
constexpr int kTileRows = 4;

// Floats per panel row: kVecs vectors.
HWY_INLINE int64_t PanelWidthOfTarget() {
  const hn::ScalableTag<float> d;
  return kVecs * static_cast<int64_t>(hn::Lanes(d));
}

// y[r][c] (+)= sum over kk of x[r][kk] * panel[kk][c], r < R, c < cols (<= panel width).
template <int R>
HWY_INLINE void PanelTile(const float* HWY_RESTRICT x, int64_t k, const float* HWY_RESTRICT panel,
                          float* HWY_RESTRICT y, int64_t ldy, int64_t cols, bool accumulate) {
  const hn::ScalableTag<float> d;
  using V = decltype(hn::Zero(d));
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t p = kVecs * lanes;
  V acc[R][kVecs];
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < kVecs; ++c) acc[r][c] = hn::Zero(d);
  }
  for (int64_t kk = 0; kk < k; ++kk) {
    V wv[kVecs];
    for (int c = 0; c < kVecs; ++c) wv[c] = hn::Load(d, panel + kk * p + c * lanes);
    for (int r = 0; r < R; ++r) {
      const V xv = hn::Set(d, x[r * k + kk]);
      for (int c = 0; c < kVecs; ++c) acc[r][c] = hn::MulAdd(xv, wv[c], acc[r][c]);
    }
  }
  HWY_ALIGN float tail[kVecs * hn::MaxLanes(d)];
  for (int r = 0; r < R; ++r) {
    float* out = y + r * ldy;
    if (cols == p) {
      for (int c = 0; c < kVecs; ++c) {
        const V sum = accumulate ? hn::Add(hn::LoadU(d, out + c * lanes), acc[r][c]) : acc[r][c];
        hn::StoreU(sum, d, out + c * lanes);
      }
      continue;
    }
    for (int c = 0; c < kVecs; ++c) hn::Store(acc[r][c], d, tail + c * lanes);
    for (int64_t c = 0; c < cols; ++c) out[c] = accumulate ? out[c] + tail[c] : tail[c];
  }
}

// Every row of x [m, k] against one panel: row blocks of kTileRows, then the remaining rows.
HWY_INLINE void PanelAllRows(const float* HWY_RESTRICT x, int64_t m, int64_t k,
                             const float* HWY_RESTRICT panel, float* HWY_RESTRICT y, int64_t ldy,
                             int64_t cols, bool accumulate) {
  int64_t row = 0;
  for (; row + kTileRows <= m; row += kTileRows) {
    PanelTile<kTileRows>(x + row * k, k, panel, y + row * ldy, ldy, cols, accumulate);
  }
  switch (m - row) {
    case 3:
      PanelTile<3>(x + row * k, k, panel, y + row * ldy, ldy, cols, accumulate);
      break;
    case 2:
      PanelTile<2>(x + row * k, k, panel, y + row * ldy, ldy, cols, accumulate);
      break;
    case 1:
      PanelTile<1>(x + row * k, k, panel, y + row * ldy, ldy, cols, accumulate);
      break;
    default:
      break;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace pagedkv::cpu::simd
HWY_AFTER_NAMESPACE();

#endif  // include guard
