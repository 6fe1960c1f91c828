// Copyright 2026 The pagedkv Authors.
//
// Vector Linear over packed weights (y = x W^T with W stored k-major in column panels, see
// simd_kernels.h): an R x C register tile of y, R rows of x times C vectors of one panel's
// columns, as outer products sequential in k: acc[r][c] += x[r][kk] * panel[kk][c]. Each y[i][j]
// is therefore one plain FMA chain over kk = 0 .. k-1 (starting from 0, then added to y when
// accumulating), with no lane sums: the same bits for every m, row tile, thread split and batch.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/simd/packed_linear_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Each target's pass re-includes this file after foreach_target.h.
#include <algorithm>
#include <cstdint>

#include "hwy/highway.h"
#include "kernels/cpu/simd/panel_tile-inl.h"
#include "kernels/cpu/simd/simd_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace pagedkv::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

int64_t PanelWidthImpl() { return PanelWidthOfTarget(); }

void PackWeightsImpl(const float* HWY_RESTRICT w, int64_t n, int64_t k, float* HWY_RESTRICT out) {
  const int64_t p = PanelWidthImpl();
  for (int64_t j0 = 0; j0 < n; j0 += p) {
    float* panel = out + j0 * k;
    const int64_t cols = std::min(p, n - j0);
    for (int64_t c = 0; c < cols; ++c) {
      const float* row = w + (j0 + c) * k;
      for (int64_t kk = 0; kk < k; ++kk) panel[kk * p + c] = row[kk];
    }
    for (int64_t c = cols; c < p; ++c) {
      for (int64_t kk = 0; kk < k; ++kk) panel[kk * p + c] = 0.0f;
    }
  }
}

// One row of x against two full panels at once (m = 1: twice the independent FMA chains of a
// one-row tile; each column's chain is the same as PanelTile's).
HWY_NOINLINE void RowTwoPanels(const float* HWY_RESTRICT x, int64_t k,
                               const float* HWY_RESTRICT panels, float* HWY_RESTRICT y,
                               bool accumulate) {
  const hn::ScalableTag<float> d;
  using V = decltype(hn::Zero(d));
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t p = kVecs * lanes;
  const float* second = panels + p * k;
  V acc[2][kVecs];
  for (int c = 0; c < kVecs; ++c) acc[0][c] = acc[1][c] = hn::Zero(d);
  for (int64_t kk = 0; kk < k; ++kk) {
    const V xv = hn::Set(d, x[kk]);
    for (int c = 0; c < kVecs; ++c) {
      acc[0][c] = hn::MulAdd(xv, hn::Load(d, panels + kk * p + c * lanes), acc[0][c]);
      acc[1][c] = hn::MulAdd(xv, hn::Load(d, second + kk * p + c * lanes), acc[1][c]);
    }
  }
  for (int h = 0; h < 2; ++h) {
    for (int c = 0; c < kVecs; ++c) {
      float* out = y + h * p + c * lanes;
      hn::StoreU(accumulate ? hn::Add(hn::LoadU(d, out), acc[h][c]) : acc[h][c], d, out);
    }
  }
}

template <int R>
HWY_NOINLINE void PanelRows(const LinearArgs& a, const float* packed, int64_t row, int64_t panel) {
  const int64_t p = PanelWidthImpl();
  const int64_t j0 = panel * p;
  PanelTile<R>(a.x + row * a.k, a.k, packed + j0 * a.k, a.y + row * a.n + j0, a.n,
               std::min(p, a.n - j0), a.accumulate);
}

void PackedLinearTilesImpl(const LinearArgs& a, const float* packed, int64_t item_begin,
                           int64_t item_end) {
  const int64_t row_blocks = (a.m + kTileRows - 1) / kTileRows;
  int64_t item = item_begin;
  if (a.m == 1) {  // items are panels: take full ones in pairs
    const int64_t p = PanelWidthImpl();
    for (; item + 1 < item_end && (item + 2) * p <= a.n; item += 2) {
      RowTwoPanels(a.x, a.k, packed + item * p * a.k, a.y + item * p, a.accumulate);
    }
  }
  for (; item < item_end; ++item) {
    const int64_t panel = item / row_blocks;
    const int64_t row = item % row_blocks * kTileRows;
    switch (std::min<int64_t>(kTileRows, a.m - row)) {
      case 4:
        PanelRows<4>(a, packed, row, panel);
        break;
      case 3:
        PanelRows<3>(a, packed, row, panel);
        break;
      case 2:
        PanelRows<2>(a, packed, row, panel);
        break;
      default:
        PanelRows<1>(a, packed, row, panel);
        break;
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace pagedkv::cpu::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pagedkv::cpu::simd {

HWY_EXPORT(PanelWidthImpl);
HWY_EXPORT(PackWeightsImpl);
HWY_EXPORT(PackedLinearTilesImpl);

int64_t PackedPanelWidth() { return HWY_DYNAMIC_DISPATCH(PanelWidthImpl)(); }

void PackWeights(const float* w, int64_t n, int64_t k, float* out) {
  HWY_DYNAMIC_DISPATCH(PackWeightsImpl)(w, n, k, out);
}

void PackedLinearTiles(const LinearArgs& args, const float* packed, int64_t item_begin,
                       int64_t item_end) {
  HWY_DYNAMIC_DISPATCH(PackedLinearTilesImpl)(args, packed, item_begin, item_end);
}

}  // namespace pagedkv::cpu::simd
#endif  // HWY_ONCE
