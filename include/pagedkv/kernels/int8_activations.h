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
// The super-block types take the same activation blocks: block b of a row (32 values) is
// sub-block s = b % 8 of super-block b / 8, and
//   Q4_K: isum_b = sum q_c qx_c (q: the nibble, 0..15), dw = d * sc_s, mw = dmin * m_s (fp32):
//           acc = fma(dw * dx_b, float(isum_b), acc); acc = fma(-mw, sx_b, acc)
//   Q6_K: the block's two 16-value sub-blocks have int8 scales sc_lo, sc_hi (q: -32..31):
//           isum_b = sc_lo * sum_{c<16} q_c qx_c + sc_hi * sum_{c>=16} q_c qx_c, exact in int32
//           and in fp32 (|isum_b| <= 2 * 128 * 16 * 32 * 127 < 2^24);
//           acc = fma(d * dx_b, float(isum_b), acc)
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

// The weight types the int8 chain is defined for; the others keep fp32 activations.
PAGEDKV_HD bool Int8ActivationsSupport(WeightType type) {
  return type == WeightType::kQ4_0 || type == WeightType::kQ4_1 || type == WeightType::kQ8_0 ||
         type == WeightType::kQ4_K || type == WeightType::kQ6_K;
}

// True for Q4_K and Q6_K (256-value super-blocks of 32-value sub-blocks).
PAGEDKV_HD constexpr bool Int8SuperBlockType(WeightType type) {
  return type == WeightType::kQ4_K || type == WeightType::kQ6_K;
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

// Q4_K's 32-value block s (0..7) of super-block `sb`: value c's nibble (0..15), and the block's
// fp32 dw = d * sc and mw = dmin * m.
PAGEDKV_HD int32_t Int8Q4KValue(const unsigned char* sb, int32_t s, int32_t c) {
  const unsigned char byte = sb[16 + (s / 2) * 32 + c];
  return s % 2 == 0 ? (byte & 0x0F) : (byte >> 4);
}
PAGEDKV_HD void Int8Q4KScales(const unsigned char* sb, int32_t s, float* dw, float* mw) {
  int32_t sc = 0, m = 0;
  QuantQ4KScaleMin(sb, s, &sc, &m);
  *dw = QuantF16At(sb) * static_cast<float>(sc);
  *mw = QuantF16At(sb + 2) * static_cast<float>(m);
}

// Q6_K's 32-value block s (0..7) of super-block `sb`: value c (-32..31), and the int8 scales of
// its values 0..15 (lo) and 16..31 (hi).
PAGEDKV_HD int32_t Int8Q6KValue(const unsigned char* sb, int32_t s, int32_t c) {
  const int32_t half = s / 4, quarter = s % 4;
  const unsigned char low = sb[half * 64 + c + (quarter % 2) * 32];
  const int32_t nibble = quarter < 2 ? (low & 0x0F) : (low >> 4);
  const int32_t high = (sb[128 + half * 32 + c] >> (2 * quarter)) & 3;
  return (nibble | (high << 4)) - 32;
}
PAGEDKV_HD void Int8Q6KScales(const unsigned char* sb, int32_t s, int32_t* lo, int32_t* hi) {
  const int32_t at = 192 + (s / 4) * 8 + 2 * (s % 4);
  *lo = static_cast<int8_t>(sb[at]);
  *hi = static_cast<int8_t>(sb[at + 1]);
}

// Steps 2 and 3 for block b (32 values) of a row of any int8 type: the exact isum, then the
// chain's next value. `sx` = dx * float(qsum).
PAGEDKV_HD int32_t Int8RowBlockDot(WeightType type, const unsigned char* row, int64_t b,
                                   const int8_t* q) {
  if (!Int8SuperBlockType(type)) return Int8BlockDot(type, row + b * QuantBlockBytes(type), q);
  const unsigned char* sb = row + (b / 8) * QuantBlockBytes(type);
  const auto s = static_cast<int32_t>(b % 8);
  if (type == WeightType::kQ4_K) {
    int32_t sum = 0;
    for (int c = 0; c < kQuantBlockValues; ++c) sum += Int8Q4KValue(sb, s, c) * q[c];
    return sum;
  }
  int32_t lo = 0, hi = 0, sc_lo = 0, sc_hi = 0;
  for (int c = 0; c < 16; ++c) lo += Int8Q6KValue(sb, s, c) * q[c];
  for (int c = 16; c < kQuantBlockValues; ++c) hi += Int8Q6KValue(sb, s, c) * q[c];
  Int8Q6KScales(sb, s, &sc_lo, &sc_hi);
  return sc_lo * lo + sc_hi * hi;
}
PAGEDKV_HD float Int8RowBlockAccumulate(WeightType type, const unsigned char* row, int64_t b,
                                        float dx, float sx, int32_t isum, float acc) {
  if (!Int8SuperBlockType(type)) {
    return Int8BlockAccumulate(type, row + b * QuantBlockBytes(type), dx, sx, isum, acc);
  }
  const unsigned char* sb = row + (b / 8) * QuantBlockBytes(type);
  if (type == WeightType::kQ6_K)
    return fmaf(QuantF16At(sb + 208) * dx, static_cast<float>(isum), acc);
  float dw = 0.0f, mw = 0.0f;
  Int8Q4KScales(sb, static_cast<int32_t>(b % 8), &dw, &mw);
  acc = fmaf(dw * dx, static_cast<float>(isum), acc);
  return fmaf(-mw, sx, acc);
}

}  // namespace pagedkv

#endif  // PAGEDKV_KERNELS_INT8_ACTIVATIONS_H_
