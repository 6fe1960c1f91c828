// Copyright 2026 The pagedkv Authors.
//
// CPU Linear (y = x W^T) and LM head. A register-blocked microkernel computes an R x C block of y
// (R rows of x against C rows of W) with 4-wide partial sums the compiler vectorises; W is walked
// in tiles that stay in L2 while every row of x passes over them.
#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/op_validate.h"
#include "pagedkv/kernels/cpu_ops.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cpu {
namespace {

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
        for (int l = 0; l < kLanes; ++l) {
          acc[r][c][l] += x[r * ldx + kk + l] * w[c * ldw + kk + l];
        }
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
  for (; j + 4 <= n_end; j += 4) {
    MicroKernel<R, 4>(x, k, w + j * k, k, y + j, n, k, accumulate);
  }
  for (; j < n_end; ++j) MicroKernel<R, 1>(x, k, w + j * k, k, y + j, n, k, accumulate);
}

void LinearKernel(const LinearArgs& a) {
  const int64_t tile_rows =
      std::max<int64_t>(4, kTileBytes / (a.k * static_cast<int64_t>(sizeof(float))) / 4 * 4);
  for (int64_t n0 = 0; n0 < a.n; n0 += tile_rows) {
    const int64_t n1 = std::min(a.n, n0 + tile_rows);
    int64_t i = 0;
    for (; i + 2 <= a.m; i += 2) {
      RowBlock<2>(a.x + i * a.k, a.w, a.y + i * a.n, n0, n1, a.n, a.k, a.accumulate);
    }
    for (; i < a.m; ++i) {
      RowBlock<1>(a.x + i * a.k, a.w, a.y + i * a.n, n0, n1, a.n, a.k, a.accumulate);
    }
  }
}

}  // namespace

absl::Status Linear(const LinearArgs& args) {
  PAGEDKV_RETURN_IF_ERROR(ValidateLinear(args));
  LinearKernel(args);
  return absl::OkStatus();
}

absl::Status LmHead(const LmHeadArgs& args) {
  PAGEDKV_RETURN_IF_ERROR(ValidateLmHead(args));
  LinearArgs linear;
  linear.x = args.hidden;
  linear.w = args.weight;
  linear.y = args.logits;
  linear.m = args.num_rows;
  linear.n = args.vocab_size;
  linear.k = args.d_model;
  return Linear(linear);
}

}  // namespace pagedkv::cpu
