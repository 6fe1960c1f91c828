// Copyright 2026 The pagedkv Authors.
//
// Int8 activations for Linear over block-quantized weights (QuantLinearArgs::activations =
// ActivationType::kInt8), written once for every kernel and the tests, as llama.cpp multiplies
// its Q4_0 / Q4_1 / Q8_0 weights against activations quantized to Q8 blocks:
//   1. each row of x is cut into blocks of 32 values and each block quantized symmetrically:
//      dx = max|x| / 127 (fp32), qx = round-half-even(x * (1 / dx)) clamped to [-127, 127]
//      (all zero when dx is 0), sx = dx * sum(qx) (fp32);
//   2. per weight block b, the integer dot isum_b = sum_c qw_c qx_c is exact in int32
//      (qw: Q8_0's int8, Q4_0's nibble - 8, Q4_1's nibble 0..15; |isum| <= 32 * 128 * 127 < 2^24,
//      so fp32 holds it exactly too);
//   3. y[i][j] is one fp32 chain over the blocks in order:
//        acc = fma(dw_b * dx_b, float(isum_b), acc)            every type
//        acc = fma(mw_b, sx_b, acc)                            Q4_1 only (its offset m)
//      then y = acc (or y + acc when accumulating).
// The integer sums are exact, so every implementation (scalar, AVX2 maddubs, VNNI, AMX tiles)
// that follows step 3's order gives the same bits, whatever the batch size, the tile, the thread
// split or the other rows of the batch. The cost against fp32 activations is step 1's rounding:
// a relative error of about 1/254 of the block's largest value per value (docs/kernels.md).
//
// Example:
//   int8_t q[32]; float dx; int32_t qsum;
//   pagedkv::QuantizeActivationBlock(x, q, &dx, &qsum);
//   const int32_t isum = pagedkv::Int8BlockDot(WeightType::kQ4_1, w_block, q);
//   acc = pagedkv::Int8BlockAccumulate(WeightType::kQ4_1, w_block, dx, dx * qsum, isum, acc);
#ifndef PAGEDKV_KERNELS_INT8_ACTIVATIONS_H_
#define PAGEDKV_KERNELS_INT8_ACTIVATIONS_H_

#include <cmath>
#include <cstdint>

#include "pagedkv/hd.h"
#include "pagedkv/kernels/quant_blocks.h"

namespace pagedkv {

// The weight types the int8 path multiplies (32-value blocks); the others keep fp32 activations.
PAGEDKV_HD bool Int8ActivationsSupport(WeightType type) {
  return type == WeightType::kQ4_0 || type == WeightType::kQ4_1 || type == WeightType::kQ8_0;
}

// Step 1 for one block of 32 values: q[c], *scale = dx, *qsum = sum of q.
PAGEDKV_HD void QuantizeActivationBlock(const float* x, int8_t* q, float* scale, int32_t* qsum) {
  float amax = 0.0f;
  for (int c = 0; c < kQuantBlockValues; ++c) amax = fmaxf(amax, fabsf(x[c]));
  const float d = amax / 127.0f;
  const float inv = d != 0.0f ? 1.0f / d : 0.0f;
  int32_t sum = 0;
  for (int c = 0; c < kQuantBlockValues; ++c) {
    float r = rintf(x[c] * inv);  // the default rounding mode: half to even
    r = fminf(fmaxf(r, -127.0f), 127.0f);
    q[c] = static_cast<int8_t>(r);
    sum += q[c];
  }
  *scale = d;
  *qsum = sum;
}

// Step 2: the exact integer dot of one weight block with one activation block.
PAGEDKV_HD int32_t Int8BlockDot(WeightType type, const unsigned char* block, const int8_t* q) {
  int32_t sum = 0;
  if (type == WeightType::kQ8_0) {
    const auto* w = reinterpret_cast<const int8_t*>(block + 2);
    for (int c = 0; c < kQuantBlockValues; ++c) sum += static_cast<int32_t>(w[c]) * q[c];
    return sum;
  }
  const unsigned char* nibbles = block + (type == WeightType::kQ4_1 ? 4 : 2);
  const int32_t bias = type == WeightType::kQ4_0 ? 8 : 0;
  for (int c = 0; c < kQuantBlockValues / 2; ++c) {
    sum += (static_cast<int32_t>(nibbles[c] & 0x0F) - bias) * q[c];
    sum += (static_cast<int32_t>(nibbles[c] >> 4) - bias) * q[c + 16];
  }
  return sum;
}

// Step 3 for one block: the chain's next value. `sx` = dx * float(qsum) (used by Q4_1 only).
PAGEDKV_HD float Int8BlockAccumulate(WeightType type, const unsigned char* block, float dx,
                                     float sx, int32_t isum, float acc) {
  acc = fmaf(QuantBlockScale(block) * dx, static_cast<float>(isum), acc);
  if (type == WeightType::kQ4_1) acc = fmaf(QuantBlockMin(type, block), sx, acc);
  return acc;
}

}  // namespace pagedkv

#endif  // PAGEDKV_KERNELS_INT8_ACTIVATIONS_H_
