// Copyright 2026 The pagedkv Authors.
//
// fp8 <-> fp32 conversions, usable on host and device, the storage formats of an 8-bit KV cache
// (issue 41; the KV pages do not use them yet):
//   E4M3 ("e4m3fn", OCP 8-bit floating point): sign, 4 exponent bits (bias 7), 3 mantissa bits;
//        no infinity, S.1111.111 is NaN; largest finite 448, smallest subnormal 2^-9.
//   E5M2: sign, 5 exponent bits (bias 15), 2 mantissa bits; IEEE-like, with infinities and NaNs;
//        largest finite 57344, smallest subnormal 2^-16.
// Encoding rounds to nearest, ties to even, subnormals included, and saturates: a finite value or
// an infinity beyond the largest finite magnitude becomes that magnitude with its sign (as CUDA's
// __nv_cvt_float_to_fp8 does with __NV_SATFINITE). NaN stays NaN (sign kept). Decoding is exact.
// The same bits on host and device.
//
// Example:
//   uint8_t q = pagedkv::F32ToFp8E4M3(0.3f);  // 0x2A (0.3125)
//   float x = pagedkv::Fp8E4M3ToF32(q);
#ifndef PAGEDKV_KERNELS_FP8_CONVERT_H_
#define PAGEDKV_KERNELS_FP8_CONVERT_H_

#include <cstdint>

#include "pagedkv/hd.h"
#include "pagedkv/kernels/dtype_convert.h"

namespace pagedkv {

// The two fp8 formats as parameters of the shared conversion.
struct Fp8Format {
  int mantissa_bits;   // 3 (E4M3) or 2 (E5M2)
  int bias;            // 7 or 15
  uint8_t max_code;    // largest finite magnitude's code: 0x7E or 0x7B
  bool ieee_specials;  // the top exponent holds infinity and NaNs (E5M2); else only 0x7F is NaN
};
inline constexpr Fp8Format kFp8E4M3 = {3, 7, 0x7E, false};
inline constexpr Fp8Format kFp8E5M2 = {2, 15, 0x7B, true};
inline constexpr uint8_t kFp8NanCode = 0x7F;  // the NaN both formats produce (with the sign)

// `value` shifted right by `shift` (1..31), rounded to nearest even.
PAGEDKV_HD uint32_t ShiftRoundEven(uint32_t value, int shift) {
  const uint32_t kept = value >> shift;
  const uint32_t rest = value & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  return kept + ((rest > half || (rest == half && (kept & 1u) != 0)) ? 1u : 0u);
}

// The fp8 code of `x` in format `f` (see the banner).
PAGEDKV_HD uint8_t F32ToFp8(float x, Fp8Format f) {
  const uint32_t bits = FloatToBits(x);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return static_cast<uint8_t>(sign | kFp8NanCode);
  if (magnitude == 0x7F800000u) return static_cast<uint8_t>(sign | f.max_code);  // saturate inf
  const int exponent = static_cast<int>(magnitude >> 23) - 127 + f.bias;  // fp8 biased exponent
  const int drop = 23 - f.mantissa_bits;  // fp32 mantissa bits below the fp8 ones
  uint32_t code;
  if (exponent >= 1) {
    // Normal in fp8: the exponent and mantissa fields round together (a carry bumps the exponent).
    const uint32_t fields = (static_cast<uint32_t>(exponent) << 23) | (magnitude & 0x7FFFFFu);
    code = ShiftRoundEven(fields, drop);
  } else {
    // Subnormal in fp8 (or zero): the significand, implicit bit included, scaled to the
    // subnormal step 2^(1 - bias - mantissa_bits). fp32 subnormals are far below that step.
    const int shift = drop + 1 - exponent;
    const bool f32_normal = (magnitude >> 23) != 0;
    const uint32_t significand = f32_normal ? ((magnitude & 0x7FFFFFu) | 0x800000u) : 0u;
    code = shift > 25 ? 0u : ShiftRoundEven(significand, shift);
  }
  if (code > f.max_code) code = f.max_code;
  return static_cast<uint8_t>(sign | code);
}

// The fp32 value of fp8 code `c` in format `f` (exact).
PAGEDKV_HD float Fp8ToF32(uint8_t c, Fp8Format f) {
  const uint32_t sign = static_cast<uint32_t>(c & 0x80u) << 24;
  const uint32_t magnitude = c & 0x7Fu;
  const int exponent = static_cast<int>(magnitude >> f.mantissa_bits);
  const uint32_t mantissa = magnitude & ((1u << f.mantissa_bits) - 1u);
  if (!f.ieee_specials && magnitude == kFp8NanCode) return BitsToFloat(sign | 0x7FC00000u);
  if (f.ieee_specials && exponent == (1 << (7 - f.mantissa_bits)) - 1) {
    return BitsToFloat(sign | (mantissa == 0 ? 0x7F800000u : 0x7FC00000u));
  }
  if (exponent == 0) {
    // mantissa * 2^(1 - bias - mantissa_bits), exact in fp32.
    const uint32_t step = static_cast<uint32_t>(127 + 1 - f.bias - f.mantissa_bits) << 23;
    const float value = static_cast<float>(mantissa) * BitsToFloat(step);
    return BitsToFloat(sign | FloatToBits(value));
  }
  return BitsToFloat(sign | (static_cast<uint32_t>(exponent - f.bias + 127) << 23) |
                     (mantissa << (23 - f.mantissa_bits)));
}

PAGEDKV_HD uint8_t F32ToFp8E4M3(float x) { return F32ToFp8(x, kFp8E4M3); }
PAGEDKV_HD uint8_t F32ToFp8E5M2(float x) { return F32ToFp8(x, kFp8E5M2); }
PAGEDKV_HD float Fp8E4M3ToF32(uint8_t c) { return Fp8ToF32(c, kFp8E4M3); }
PAGEDKV_HD float Fp8E5M2ToF32(uint8_t c) { return Fp8ToF32(c, kFp8E5M2); }

}  // namespace pagedkv

#endif  // PAGEDKV_KERNELS_FP8_CONVERT_H_
