// Copyright 2026 The pagedkv Authors.
//
// Weight rows kept in their file's format (GGUF's blocks, ggml's block structs in ggml-common.h;
// safetensors' half floats), and the per-element decode written once, for every linear kernel,
// the embedding gather and the tests:
//   F16, BF16  one 2-byte value per "block"
//   Q4_0  32 values per 18-byte block: f16 d, 16 bytes of nibbles;           x = (q - 8) d
//   Q4_1  32 values per 20-byte block: f16 d, f16 m, 16 bytes of nibbles;    x = q d + m
//   Q8_0  32 values per 34-byte block: f16 d, 32 int8;                       x = q d
//   Q4_K  256 values per 144-byte super-block: f16 d, f16 dmin, 12 bytes of 6-bit scales and
//         mins of 8 sub-blocks of 32, 128 bytes of nibbles;                  x = (d sc) q - dmin m
//   Q6_K  256 values per 210-byte super-block: 128 bytes of low nibbles, 64 of high bit pairs,
//         16 int8 scales (one per 16 values), f16 d;                         x = d (sc (q - 32))
// Byte j of a Q4_0 / Q4_1 block holds value j (low nibble) and value j + 16 (high nibble); Q4_K's
// 64-value halves take the low nibbles of 32 bytes, then their high ones. Every decode rounds
// exactly as the loader's fp32 conversion (engine/model/formats/gguf_dequant.cc) does, operation by
// operation, so a kernel that decodes with these functions sees the converted weights' bits.
//
// A matrix W [n, k] is n rows of k / QuantBlockValuesOf(type) blocks each, row after row.
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
  kQ4_0 = 3,
  kF16 = 4,
  kBF16 = 5,
  kQ4_K = 6,
  kQ6_K = 7,
};

inline constexpr int64_t kQuantBlockValues = 32;   // values per Q4_0 / Q4_1 / Q8_0 block
inline constexpr int64_t kQuantSuperValues = 256;  // values per Q4_K / Q6_K super-block
inline constexpr int kWeightTypeCount = 8;         // WeightType values are 0 .. count - 1

// Values per block of `type`: 1 for the plain types (F32, F16, BF16).
PAGEDKV_HD int64_t QuantBlockValuesOf(WeightType type) {
  switch (type) {
    case WeightType::kQ4_0:
    case WeightType::kQ4_1:
    case WeightType::kQ8_0:
      return kQuantBlockValues;
    case WeightType::kQ4_K:
    case WeightType::kQ6_K:
      return kQuantSuperValues;
    default:
      return 1;
  }
}

// Bytes of one block of `type` (4 for one fp32 value, 2 for one F16 / BF16 value).
PAGEDKV_HD int64_t QuantBlockBytes(WeightType type) {
  switch (type) {
    case WeightType::kQ4_0:
      return 18;
    case WeightType::kQ4_1:
      return 20;
    case WeightType::kQ8_0:
      return 34;
    case WeightType::kF16:
    case WeightType::kBF16:
      return 2;
    case WeightType::kQ4_K:
      return 144;
    case WeightType::kQ6_K:
      return 210;
    default:
      return 4;
  }
}

// Bytes of one row of k values. REQUIRES: k a multiple of QuantBlockValuesOf(type).
PAGEDKV_HD int64_t WeightRowBytes(WeightType type, int64_t k) {
  return k / QuantBlockValuesOf(type) * QuantBlockBytes(type);
}

PAGEDKV_HD const unsigned char* QuantRow(const void* w, WeightType type, int64_t k, int64_t row) {
  return static_cast<const unsigned char*>(w) + row * WeightRowBytes(type, k);
}

PAGEDKV_HD float QuantF16At(const unsigned char* p) {
  return F16BitsToF32(static_cast<uint16_t>(p[0] | (p[1] << 8)));
}

PAGEDKV_HD uint16_t QuantU16At(const unsigned char* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

// The 32-value block types (Q4_0, Q4_1, Q8_0): scale d, offset m (0 but for Q4_1), and the
// integer q of value j (0..31), Q4_0's already less 8.
PAGEDKV_HD float QuantBlockScale(const unsigned char* block) { return QuantF16At(block); }
PAGEDKV_HD float QuantBlockMin(WeightType type, const unsigned char* block) {
  return type == WeightType::kQ4_1 ? QuantF16At(block + 2) : 0.0f;
}
PAGEDKV_HD int32_t QuantBlockQ(WeightType type, const unsigned char* block, int32_t j) {
  if (type == WeightType::kQ4_1 || type == WeightType::kQ4_0) {
    const unsigned char byte = block[(type == WeightType::kQ4_1 ? 4 : 2) + (j & 15)];
    const int32_t q = j < 16 ? (byte & 0x0F) : (byte >> 4);
    return type == WeightType::kQ4_0 ? q - 8 : q;
  }
  return static_cast<int8_t>(block[2 + j]);
}

// The 6-bit scale and min of sub-block s (0..7) of a Q4_K super-block (ggml's get_scale_min_k4).
PAGEDKV_HD void QuantQ4KScaleMin(const unsigned char* block, int32_t s, int32_t* sc, int32_t* m) {
  const unsigned char* q = block + 4;
  if (s < 4) {
    *sc = q[s] & 63;
    *m = q[s + 4] & 63;
  } else {
    *sc = (q[s + 4] & 0x0F) | ((q[s - 4] >> 6) << 4);
    *m = (q[s + 4] >> 4) | ((q[s] >> 6) << 4);
  }
}

// Value j (0..255) of a Q4_K super-block: (d sc) q - dmin m, in that order.
PAGEDKV_HD float QuantQ4KValue(const unsigned char* block, int32_t j) {
  int32_t sc = 0, m = 0;
  QuantQ4KScaleMin(block, j / 32, &sc, &m);
  const unsigned char byte = block[16 + (j / 64) * 32 + (j % 32)];
  const int32_t q = (j / 32) % 2 == 0 ? (byte & 0x0F) : (byte >> 4);
  return QuantF16At(block) * static_cast<float>(sc) * static_cast<float>(q) -
         QuantF16At(block + 2) * static_cast<float>(m);
}

// Value j (0..255) of a Q6_K super-block: d * float(sc (q - 32)).
PAGEDKV_HD float QuantQ6KValue(const unsigned char* block, int32_t j) {
  const int32_t half = j / 128, r = j % 128, quarter = r / 32, l = r % 32;
  const unsigned char low = block[half * 64 + l + (quarter % 2) * 32];
  const int32_t nibble = quarter < 2 ? (low & 0x0F) : (low >> 4);
  const int32_t high = (block[128 + half * 32 + l] >> (2 * quarter)) & 3;
  const int32_t q = (nibble | (high << 4)) - 32;
  const int32_t sc = static_cast<int8_t>(block[192 + half * 8 + l / 16 + 2 * quarter]);
  return QuantF16At(block + 208) * static_cast<float>(sc * q);
}

// Value kk of a row, rounded once per operation as ggml's reference dequantizer.
PAGEDKV_HD float QuantValue(WeightType type, const unsigned char* row, int64_t kk) {
  switch (type) {
    case WeightType::kF32: {
      const unsigned char* p = row + 4 * kk;
      return BitsToFloat(static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
                         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24));
    }
    case WeightType::kF16:
      return F16BitsToF32(QuantU16At(row + 2 * kk));
    case WeightType::kBF16:
      return BF16BitsToF32(QuantU16At(row + 2 * kk));
    case WeightType::kQ4_K:
      return QuantQ4KValue(row + kk / kQuantSuperValues * 144,
                           static_cast<int32_t>(kk % kQuantSuperValues));
    case WeightType::kQ6_K:
      return QuantQ6KValue(row + kk / kQuantSuperValues * 210,
                           static_cast<int32_t>(kk % kQuantSuperValues));
    default:
      break;
  }
  const unsigned char* block = row + kk / kQuantBlockValues * QuantBlockBytes(type);
  const auto j = static_cast<int32_t>(kk % kQuantBlockValues);
  const float qd = static_cast<float>(QuantBlockQ(type, block, j)) * QuantBlockScale(block);
  // Q4_0 and Q4_1 add their offset (0 for Q4_0, which turns -0 into +0); Q8_0 adds none.
  return type == WeightType::kQ8_0 ? qd : qd + QuantBlockMin(type, block);
}

}  // namespace pagedkv

#endif  // PAGEDKV_KERNELS_QUANT_BLOCKS_H_
