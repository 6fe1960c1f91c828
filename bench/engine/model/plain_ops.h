// Copyright 2026 The pagedkv Authors.
//
// The floor's own ops: the CPU kernels as they were before the vector kernels and threads (issue
// #16), frozen here so PlainLlama stays the fixed reference the speed targets are measured
// against: scalar C++ with 4-wide partial sums that the compiler vectorises for the build's
// baseline (SSE2 without -march), one thread. No validation (PlainLlama passes fixed shapes).
//
// Example:
//   plain::Linear(x, w, y, /*m=*/1, /*n=*/dim, /*k=*/dim, /*accumulate=*/false);
#ifndef PAGEDKV_BENCH_ENGINE_MODEL_PLAIN_OPS_H_
#define PAGEDKV_BENCH_ENGINE_MODEL_PLAIN_OPS_H_

#include <algorithm>
#include <cstdint>

#include "kernels/elementwise_math.h"

namespace pagedkv::bench::plain {

constexpr int kLanes = 4;
constexpr int64_t kTileBytes = 256 * 1024;  // W tile kept in L2

// y[r][c] (+)= dot(x row r, w row c) for r < R, c < C.
template <int R, int C>
void MicroKernel(const float* x, int64_t ldx, const float* w, int64_t ldw, float* y, int64_t ldy,
                 int64_t k, bool accumulate) {
  float acc[R][C][kLanes] = {};
  int64_t kk = 0;
  for (; kk + kLanes <= k; kk += kLanes) {
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < C; ++c) {
        for (int l = 0; l < kLanes; ++l) acc[r][c][l] += x[r * ldx + kk + l] * w[c * ldw + kk + l];
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) {
      float sum = (acc[r][c][0] + acc[r][c][1]) + (acc[r][c][2] + acc[r][c][3]);
      for (int64_t t = kk; t < k; ++t) sum += x[r * ldx + t] * w[c * ldw + t];
      y[r * ldy + c] = accumulate ? y[r * ldy + c] + sum : sum;
    }
  }
}

template <int R>
void RowBlock(const float* x, const float* w, float* y, int64_t n_begin, int64_t n_end, int64_t n,
              int64_t k, bool accumulate) {
  int64_t j = n_begin;
  for (; j + 4 <= n_end; j += 4) MicroKernel<R, 4>(x, k, w + j * k, k, y + j, n, k, accumulate);
  for (; j < n_end; ++j) MicroKernel<R, 1>(x, k, w + j * k, k, y + j, n, k, accumulate);
}

// y[m, n] (+)= x[m, k] W[n, k]^T.
inline void Linear(const float* x, const float* w, float* y, int64_t m, int64_t n, int64_t k,
                   bool accumulate) {
  const int64_t tile_rows =
      std::max<int64_t>(4, kTileBytes / (k * static_cast<int64_t>(sizeof(float))) / 4 * 4);
  for (int64_t n0 = 0; n0 < n; n0 += tile_rows) {
    const int64_t n1 = std::min(n, n0 + tile_rows);
    int64_t i = 0;
    for (; i + 2 <= m; i += 2) RowBlock<2>(x + i * k, w, y + i * n, n0, n1, n, k, accumulate);
    for (; i < m; ++i) RowBlock<1>(x + i * k, w, y + i * n, n0, n1, n, k, accumulate);
  }
}

// out[dim] = x / rms(x) * weight (one row); out may equal x.
inline void RmsNorm(const float* x, const float* weight, float* out, int64_t dim, float eps) {
  float partial[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  int64_t i = 0;
  for (; i + 4 <= dim; i += 4) {
    for (int l = 0; l < 4; ++l) partial[l] += x[i + l] * x[i + l];
  }
  float sum_sq = (partial[0] + partial[1]) + (partial[2] + partial[3]);
  for (; i < dim; ++i) sum_sq += x[i] * x[i];
  const float inv_rms = RmsNormInverse(sum_sq, dim, eps);
  for (int64_t d = 0; d < dim; ++d) out[d] = x[d] * inv_rms * weight[d];
}

// out[dim] = silu(gate) * up (scalar expf); out may equal gate.
inline void SwiGlu(const float* gate, const float* up, float* out, int64_t dim) {
  for (int64_t d = 0; d < dim; ++d) out[d] = SwiGluValue(gate[d], up[d]);
}

}  // namespace pagedkv::bench::plain

#endif  // PAGEDKV_BENCH_ENGINE_MODEL_PLAIN_OPS_H_
