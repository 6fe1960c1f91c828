// Copyright 2026 The pagedkv Authors.
//
// Block-quantized weight rows as GGUF stores them (ggml's block structs, ggml-common.h), and the
// per-element decode written once, for the loader's dequantizer and every linear kernel:
//   Q4_1  32 values per 20-byte block: f16 d, f16 m, 16 bytes of nibbles; x = q d + m
//   Q8_0  32 values per 34-byte block: f16 d, 32 int8;                     x = q d
// Byte j of a Q4_1 block holds value j (low nibble) and value j + 16 (high nibble).
//
// A quantized matrix W [n, k] is n rows of k / 32 blocks each, row after row (GGUF's order).
// Kernels compute sum_b (d_b sum_j q_j x_j + m_b sum_j x_j) in fp32: the same value as
// dequantize-then-dot up to fp32 rounding (about one rounding per product and per block).
//
// Example:
//   const auto* row = pagedkv::QuantRow(w, WeightType::kQ4_1, k, j);
//   float v = pagedkv::QuantValue(WeightType::kQ4_1, row, kk);  // W[j][kk]
#ifndef PAGEDKV_KERNELS_QUANT_BLOCKS_H_
#define PAGEDKV_KERNELS_QUANT_BLOCKS_H_

#include <cstdint>

#include "pagedkv/hd.h"
#include "pagedkv/kernels/dtype_convert.h"

namespace pagedkv {

// How a weight matrix is stored in memory. kF32 is plain row-major fp32.
enum class WeightType : uint8_t {
  kF32 = 0,
  kQ4_1 = 1,
  kQ8_0 = 2,
};

inline constexpr int64_t kQuantBlockValues = 32;  // values per Q4_1 / Q8_0 block

// Bytes of one block of `type` (4 for one fp32 value).
PAGEDKV_HD int64_t QuantBlockBytes(WeightType type) {
  switch (type) {
    case WeightType::kQ4_1:
      return 20;
    case WeightType::kQ8_0:
      return 34;
    default:
      return 4;
  }
}

// Bytes of one row of k values. REQUIRES: k a multiple of 32 for the quantized types.
PAGEDKV_HD int64_t WeightRowBytes(WeightType type, int64_t k) {
  return type == WeightType::kF32 ? 4 * k : k / kQuantBlockValues * QuantBlockBytes(type);
}

PAGEDKV_HD const unsigned char* QuantRow(const void* w, WeightType type, int64_t k, int64_t row) {
  return static_cast<const unsigned char*>(w) + row * WeightRowBytes(type, k);
}

PAGEDKV_HD float QuantF16At(const unsigned char* p) {
  return F16BitsToF32(static_cast<uint16_t>(p[0] | (p[1] << 8)));
}

// The block's scale d and offset m (0 for Q8_0).
PAGEDKV_HD float QuantBlockScale(const unsigned char* block) { return QuantF16At(block); }
PAGEDKV_HD float QuantBlockMin(WeightType type, const unsigned char* block) {
  return type == WeightType::kQ4_1 ? QuantF16At(block + 2) : 0.0f;
}

// The integer q of value j (0..31) of a block.
PAGEDKV_HD int32_t QuantBlockQ(WeightType type, const unsigned char* block, int32_t j) {
  if (type == WeightType::kQ4_1) {
    const unsigned char byte = block[4 + (j & 15)];
    return j < 16 ? (byte & 0x0F) : (byte >> 4);
  }
  return static_cast<int8_t>(block[2 + j]);
}

// Value kk of a row: q d + m, rounded once per operation (as ggml's reference dequantizer).
PAGEDKV_HD float QuantValue(WeightType type, const unsigned char* row, int64_t kk) {
  if (type == WeightType::kF32) {
    float v;
    const unsigned char* p = row + 4 * kk;
    v = BitsToFloat(static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
                    (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24));
    return v;
  }
  const unsigned char* block = row + kk / kQuantBlockValues * QuantBlockBytes(type);
  const auto j = static_cast<int32_t>(kk % kQuantBlockValues);
  return static_cast<float>(QuantBlockQ(type, block, j)) * QuantBlockScale(block) +
         QuantBlockMin(type, block);
}

}  // namespace pagedkv

#endif  // PAGEDKV_KERNELS_QUANT_BLOCKS_H_
