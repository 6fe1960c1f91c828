// Copyright 2026 The pagedkv Authors.
//
// Weight rows in GGUF's block formats for the kernel tests: seeded random blocks of every
// WeightType, and each weight's value in float64 read from ggml's block layouts (independent of
// the PAGEDKV_HD decode under test).
#ifndef PAGEDKV_TESTS_KERNELS_QUANT_TEST_ROWS_H_
#define PAGEDKV_TESTS_KERNELS_QUANT_TEST_ROWS_H_

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "pagedkv/kernels/dtype_convert.h"
#include "pagedkv/kernels/quant_blocks.h"

namespace pagedkv::testing {

// IEEE half -> double from the bit fields (independent of the code under test).
inline double HalfToDouble(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 31, frac = h & 1023;
  const double mag = exp == 0 ? std::ldexp(frac, -24) : std::ldexp(1024 + frac, exp - 25);
  return sign != 0 ? -mag : mag;
}

inline void PutHalf(unsigned char* p, float v) {
  const uint16_t h = F32ToF16Bits(v);
  p[0] = static_cast<unsigned char>(h & 0xFF);
  p[1] = static_cast<unsigned char>(h >> 8);
}

// n rows of k values of `type` in random blocks (random halves for F16 / BF16).
inline std::vector<unsigned char> RandomRows(WeightType type, int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> scale(0.002f, 0.08f), offset(-0.6f, 0.0f), value(-1, 1);
  std::uniform_int_distribution<int> byte(0, 255);
  const int64_t bb = QuantBlockBytes(type);
  std::vector<unsigned char> out(static_cast<size_t>(n * WeightRowBytes(type, k)));
  for (size_t at = 0; at < out.size(); at += static_cast<size_t>(bb)) {
    unsigned char* b = out.data() + at;
    for (int64_t i = 0; i < bb; ++i) b[i] = static_cast<unsigned char>(byte(rng));
    switch (type) {
      case WeightType::kF16:
        PutHalf(b, value(rng));
        break;
      case WeightType::kBF16: {
        const uint16_t h = F32ToBF16Bits(value(rng));
        b[0] = static_cast<unsigned char>(h & 0xFF);
        b[1] = static_cast<unsigned char>(h >> 8);
        break;
      }
      case WeightType::kQ4_K:  // d, dmin small: d sc q reaches 63 * 15 d
        PutHalf(b, scale(rng) / 64);
        PutHalf(b + 2, scale(rng) / 64);
        break;
      case WeightType::kQ6_K:  // d at the end: d sc q reaches 128 * 32 d
        PutHalf(b + 208, scale(rng) / 256);
        break;
      default:
        PutHalf(b, scale(rng));
        if (type == WeightType::kQ4_1) PutHalf(b + 2, offset(rng));
        break;
    }
  }
  return out;
}

inline double HalfAt(const unsigned char* p) {
  return HalfToDouble(static_cast<uint16_t>(p[0] | (p[1] << 8)));
}

// Value j of a Q4_K super-block in double, from ggml's layout (get_scale_min_k4,
// dequantize_row_q4_K).
inline double RefQ4K(const unsigned char* b, int64_t j) {
  const int64_t s = j / 32;
  const unsigned char* q = b + 4;
  const int sc = s < 4 ? q[s] & 63 : (q[s + 4] & 15) | ((q[s - 4] >> 6) << 4);
  const int m = s < 4 ? q[s + 4] & 63 : (q[s + 4] >> 4) | ((q[s] >> 6) << 4);
  const unsigned char byte = b[16 + 32 * (j / 64) + j % 32];
  const int nibble = s % 2 == 0 ? byte & 15 : byte >> 4;
  return HalfAt(b) * sc * nibble - HalfAt(b + 2) * m;
}

// Value j of a Q6_K super-block in double (dequantize_row_q6_K).
inline double RefQ6K(const unsigned char* b, int64_t j) {
  const int64_t half = j / 128, l = j % 32, quarter = (j % 128) / 32;
  const unsigned char low = b[64 * half + l + 32 * (quarter % 2)];
  const int nibble = quarter < 2 ? low & 15 : low >> 4;
  const int high = (b[128 + 32 * half + l] >> (2 * quarter)) & 3;
  const int sc = static_cast<int8_t>(b[192 + 8 * half + l / 16 + 2 * quarter]);
  return HalfAt(b + 208) * sc * ((nibble | (high << 4)) - 32);
}

// W[row][kk] in double, from ggml's block layouts.
inline double RefWeight(WeightType type, const std::vector<unsigned char>& w, int64_t k,
                        int64_t row, int64_t kk) {
  const int64_t bb = QuantBlockBytes(type), values = QuantBlockValuesOf(type);
  const unsigned char* b = w.data() + row * (k / values) * bb + kk / values * bb;
  const int64_t j = kk % values;
  switch (type) {
    case WeightType::kF16:
      return HalfAt(b);
    case WeightType::kBF16:
      return BitsToFloat(static_cast<uint32_t>(b[0] | (b[1] << 8)) << 16);
    case WeightType::kQ4_K:
      return RefQ4K(b, j);
    case WeightType::kQ6_K:
      return RefQ6K(b, j);
    case WeightType::kQ8_0:
      return static_cast<int8_t>(b[2 + j]) * HalfAt(b);
    case WeightType::kQ4_0: {
      const unsigned char byte = b[2 + j % 16];
      return ((j < 16 ? byte & 15 : byte >> 4) - 8) * HalfAt(b);
    }
    default: {
      const unsigned char byte = b[4 + j % 16];
      return (j < 16 ? byte & 15 : byte >> 4) * HalfAt(b) + HalfAt(b + 2);
    }
  }
}

}  // namespace pagedkv::testing

#endif  // PAGEDKV_TESTS_KERNELS_QUANT_TEST_ROWS_H_
