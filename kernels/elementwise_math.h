// Copyright 2026 The pagedkv Authors.
//
// Per-element math of RMSNorm and SwiGLU, host and device.
//
// Example:
//   float inv = pagedkv::RmsNormInverse(sum_of_squares, dim, 1e-5f);
//   out[i] = x[i] * inv * weight[i];
//   h[i] = pagedkv::SwiGluValue(gate[i], up[i]);
#ifndef PAGEDKV_KERNELS_ELEMENTWISE_MATH_H_
#define PAGEDKV_KERNELS_ELEMENTWISE_MATH_H_

#include <math.h>

#include <cstdint>

#include "pagedkv/hd.h"

namespace pagedkv {

// 1 / sqrt(sum_sq / dim + eps).
PAGEDKV_HD float RmsNormInverse(float sum_sq, int64_t dim, float eps) {
  return 1.0f / sqrtf(sum_sq / static_cast<float>(dim) + eps);
}

// silu(gate) * up, silu(g) = g / (1 + exp(-g)).
PAGEDKV_HD float SwiGluValue(float gate, float up) { return gate / (1.0f + expf(-gate)) * up; }

}  // namespace pagedkv

#endif  // PAGEDKV_KERNELS_ELEMENTWISE_MATH_H_
