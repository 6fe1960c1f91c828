// Copyright 2026 The pagedkv Authors.
//
// Vector Linear (y = x W^T): an R x C register tile of y (R rows of x against C rows of W), one
// vector accumulator per element along k, fused multiply-adds where the target has them. W is
// walked in column tiles that stay in L2 while every row of x passes over them, so the rows of a
// batch share each load of W. The reduction of y[i][j] (vectors in k order, a lane sum, then the
// scalar tail) depends only on j's column group (groups of 4 from column 0, SumOfLanes4; the last
// n % 4 columns alone), never on the row tile, m or the thread split.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/simd/linear_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Each target's pass re-includes this file after foreach_target.h.
#include <algorithm>
#include <cstdint>

#include "hwy/highway.h"
#include "kernels/cpu/simd/reduce-inl.h"
#include "kernels/cpu/simd/simd_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace pagedkv::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int64_t kTileBytes = 256 * 1024;  // W column tile kept in L2
constexpr int kCols = 4;  // rows of W per register tile (SumOfLanes4); callers split at multiples
// Rows of x per register tile: 4 x 4 accumulators fit AVX-512's 32 registers, 2 x 4 AVX2's 16.
constexpr int kRows = HWY_TARGET <= HWY_AVX3 ? 4 : 2;

// y[r * ldy + c] (+)= dot(x row r, w row c) for r < R, c < C; rows of x and w are k long.
template <int R, int C>
HWY_INLINE void Tile(const float* HWY_RESTRICT x, const float* HWY_RESTRICT w, int64_t k,
                     float* HWY_RESTRICT y, int64_t ldy, bool accumulate) {
  const hn::ScalableTag<float> d;
  using V = decltype(hn::Zero(d));
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  V acc[R][C];
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) acc[r][c] = hn::Zero(d);
  }
  int64_t kk = 0;
  for (; kk + lanes <= k; kk += lanes) {
    V xv[R];
    for (int r = 0; r < R; ++r) xv[r] = hn::LoadU(d, x + r * k + kk);
    for (int c = 0; c < C; ++c) {
      const V wv = hn::LoadU(d, w + c * k + kk);
      for (int r = 0; r < R; ++r) acc[r][c] = hn::MulAdd(xv[r], wv, acc[r][c]);
    }
  }
#if !HWY_MEM_OPS_MIGHT_FAULT
  // AVX-512: the tail as one zero-filled masked vector (masked-off lanes are never read).
  if (kk < k) {
    const auto mask = hn::FirstN(d, static_cast<size_t>(k - kk));
    V xv[R];
    for (int r = 0; r < R; ++r) xv[r] = hn::MaskedLoad(mask, d, x + r * k + kk);
    for (int c = 0; c < C; ++c) {
      const V wv = hn::MaskedLoad(mask, d, w + c * k + kk);
      for (int r = 0; r < R; ++r) acc[r][c] = hn::MulAdd(xv[r], wv, acc[r][c]);
    }
    kk = k;
  }
#endif
  for (int r = 0; r < R; ++r) {
    float sums[C];
    if constexpr (C % 4 == 0) {
      for (int c = 0; c < C; c += 4) {
        SumOfLanes4(d, acc[r][c], acc[r][c + 1], acc[r][c + 2], acc[r][c + 3], sums + c);
      }
    } else {
      for (int c = 0; c < C; ++c) sums[c] = hn::GetLane(hn::SumOfLanes(d, acc[r][c]));
    }
    for (int c = 0; c < C; ++c) {
      float sum = sums[c];
      for (int64_t t = kk; t < k; ++t) sum += x[r * k + t] * w[c * k + t];
      y[r * ldy + c] = accumulate ? y[r * ldy + c] + sum : sum;
    }
  }
}

// Rows [i, i + R) of y, columns [n0, n1). Few rows take 8 columns at a time (two lane-sum groups,
// so 8 or 16 independent FMA chains instead of 4 when k is short); the groups of 4 are the same.
template <int R>
HWY_INLINE void RowsOfTile(const LinearArgs& a, int64_t i, int64_t n0, int64_t n1) {
  const float* x = a.x + i * a.k;
  float* y = a.y + i * a.n;
  int64_t j = n0;
  if constexpr (R == 1 || (R == 2 && HWY_TARGET <= HWY_AVX3)) {
    for (; j + 2 * kCols <= n1; j += 2 * kCols) {
      Tile<R, 2 * kCols>(x, a.w + j * a.k, a.k, y + j, a.n, a.accumulate);
    }
  }
  for (; j + kCols <= n1; j += kCols) {
    Tile<R, kCols>(x, a.w + j * a.k, a.k, y + j, a.n, a.accumulate);
  }
  for (; j < n1; ++j) Tile<R, 1>(x, a.w + j * a.k, a.k, y + j, a.n, a.accumulate);
}

void LinearColumnsImpl(const LinearArgs& a, int64_t n_begin, int64_t n_end) {
  const int64_t row_bytes = a.k * static_cast<int64_t>(sizeof(float));
  const int64_t tile_cols = std::max<int64_t>(kCols, kTileBytes / row_bytes / kCols * kCols);
  for (int64_t n0 = n_begin; n0 < n_end; n0 += tile_cols) {
    const int64_t n1 = std::min(n_end, n0 + tile_cols);
    int64_t i = 0;
    for (; i + kRows <= a.m; i += kRows) RowsOfTile<kRows>(a, i, n0, n1);
    if constexpr (kRows > 2) {
      for (; i + 2 <= a.m; i += 2) RowsOfTile<2>(a, i, n0, n1);
    }
    for (; i < a.m; ++i) RowsOfTile<1>(a, i, n0, n1);
  }
}

const char* TargetNameImpl() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace pagedkv::cpu::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pagedkv::cpu::simd {

HWY_EXPORT(LinearColumnsImpl);
HWY_EXPORT(TargetNameImpl);

void LinearColumns(const LinearArgs& args, int64_t n_begin, int64_t n_end) {
  HWY_DYNAMIC_DISPATCH(LinearColumnsImpl)(args, n_begin, n_end);
}

const char* TargetName() { return HWY_DYNAMIC_DISPATCH(TargetNameImpl)(); }

}  // namespace pagedkv::cpu::simd
#endif  // HWY_ONCE
