// Copyright 2026 The pagedkv Authors.
//
// Vector decode of one stored quantized KV row to fp32 for the CPU attention
// (simd/attention_simd.cc; f16 / bf16 rows take the inline LoadRow loop the compiler vectorizes,
// which measured faster than a Highway bf16 decode): every quantized dtype of pagedkv/dtype.h,
// with the bits of the scalar decoders
// (pagedkv/kernels/dtype_convert.h LoadRow, pagedkv/kernels/kv_quant.h DequantizeKvRow; the
// attention tests compare against values read through those). Per-target header: include it
// after hwy/highway.h inside a foreach_target pass, as reduce-inl.h.
//
// Example (in HWY_NAMESPACE):
//   DecodeKvRow(cache.k, cache.dtype, offset, cache.head_dim, scratch);
#if defined(PAGEDKV_KERNELS_CPU_SIMD_KV_DEQUANT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PAGEDKV_KERNELS_CPU_SIMD_KV_DEQUANT_INL_H_
#undef PAGEDKV_KERNELS_CPU_SIMD_KV_DEQUANT_INL_H_
#else
#define PAGEDKV_KERNELS_CPU_SIMD_KV_DEQUANT_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"
#include "pagedkv/dtype.h"
#include "pagedkv/kernels/kv_quant.h"

HWY_BEFORE_NAMESPACE();
namespace pagedkv::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using KvDF = hn::ScalableTag<float>;

// dst[i] = float(int8 src[i]) * d, i < n.
HWY_INLINE void DecodeInt8(const int8_t* src, int32_t n, float d, float* dst) {
  const KvDF df;
  const hn::Rebind<int8_t, KvDF> d8;
  const hn::Rebind<int32_t, KvDF> d32;
  const auto lanes = static_cast<int32_t>(hn::Lanes(df));
  const auto vd = hn::Set(df, d);
  int32_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto x = hn::ConvertTo(df, hn::PromoteTo(d32, hn::LoadU(d8, src + i)));
    hn::StoreU(hn::Mul(x, vd), df, dst + i);
  }
  for (; i < n; ++i) dst[i] = KvMul(static_cast<float>(src[i]), d);
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
// DecodeFp8's vector loop through F16C (AVX2 and up); returns the values it decoded (whole
// vectors; none when the E4M3 scale is too large to take 2^8). An fp8 code is a binary16 with
// fewer bits, so a few 16-bit ops make it one and vcvtph2ps widens it exactly (binary16
// subnormals included, whatever MXCSR's flush-to-zero / denormals-are-zero bits say):
//   E5M2: the code is the top byte of its binary16 (the same exponent bias, 15);
//   E4M3: sign to bit 15, exponent and mantissa to bits 13..7: the binary16 is the value times
//         2^-8 (bias 7 against 15), so the scale is taken times 2^8, exactly.
// The product with the scale is the same real number as DecodeFp8's, so the same bits. The NaN
// codes become binary16's quiet NaN with their sign, which widens to DecodeFp8's.
template <int kMantissaBits>
HWY_INLINE int32_t DecodeFp8ByF16(const uint8_t* src, int32_t n, float d, float* dst) {
  constexpr bool kE4M3 = kMantissaBits == 3;
  if (kE4M3 && !(d > -0x1p100f && d < 0x1p100f)) return 0;  // d * 2^8 could overflow; or NaN
  const KvDF df;
  const hn::Rebind<int16_t, KvDF> d16;
  const hn::Rebind<int8_t, KvDF> d8;
  const hn::Rebind<hwy::float16_t, KvDF> dh;
  const auto vd = hn::Set(df, kE4M3 ? d * 256.0f : d);
  // The largest |binary16| that is not a NaN code (E4M3's 0x7E; E5M2's infinity).
  const auto below_nan = hn::Set(d16, int16_t{kE4M3 ? 0x3F7F : 0x7C00});
  const auto quiet_nan = hn::Set(d16, int16_t{0x7E00});
  const auto sign_bit = hn::Set(d16, int16_t{-32768});
  const auto lanes = static_cast<int32_t>(hn::Lanes(df));
  int32_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto code = hn::PromoteTo(d16, hn::LoadU(d8, reinterpret_cast<const int8_t*>(src) + i));
    // E4M3: the code sign-extended and shifted by 7; bit 14, a copy of the sign, cleared.
    const auto half = kE4M3 ? hn::AndNot(hn::Set(d16, int16_t{0x4000}), hn::ShiftLeft<7>(code))
                            : hn::ShiftLeft<8>(code);
    const auto sign = hn::And(half, sign_bit);
    const auto is_nan = hn::Gt(hn::AndNot(sign_bit, half), below_nan);
    const auto bits = hn::IfThenElse(is_nan, hn::Or(sign, quiet_nan), half);
    hn::StoreU(hn::Mul(hn::PromoteTo(df, hn::BitCast(dh, bits)), vd), df, dst + i);
  }
  return i;
}
#endif

// dst[i] = fp8 src[i] * d, i < n, with Fp8ToF32's bits: the code's exponent and mantissa bits
// placed at the top of an fp32's, times 2^(127 - bias) (exact); a subnormal code (exponent 0) is
// its mantissa times the subnormal step instead, so no intermediate is an fp32 subnormal (a
// program running with flush-to-zero / denormals-are-zero keeps them); then the specials (E4M3's
// NaN code; E5M2's top exponent) selected.
template <int kMantissaBits, int kBias, bool kIeeeSpecials>
HWY_INLINE void DecodeFp8(const uint8_t* src, int32_t n, float d, float* dst) {
  const KvDF df;
  const hn::Rebind<uint8_t, KvDF> d8;
  const hn::RebindToUnsigned<KvDF> du;
  const auto lanes = static_cast<int32_t>(hn::Lanes(df));
  const auto rebias = hn::Set(df, BitsToFloat(static_cast<uint32_t>(127 + 127 - kBias) << 23));
  const auto step =
      hn::Set(df, BitsToFloat(static_cast<uint32_t>(127 + 1 - kBias - kMantissaBits) << 23));
  const hn::RebindToSigned<KvDF> di;  // magnitudes are < 128: signed compares and conversions
  const auto vd = hn::Set(df, d);
  constexpr int kShift = 23 - kMantissaBits;  // the mantissa just below the fp32 exponent
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  int32_t i = DecodeFp8ByF16<kMantissaBits>(src, n, d, dst);
#else
  int32_t i = 0;
#endif
  for (; i + lanes <= n; i += lanes) {
    const auto c = hn::PromoteTo(du, hn::LoadU(d8, src + i));
    const auto magnitude = hn::And(c, hn::Set(du, 0x7Fu));
    const auto sign = hn::ShiftLeft<24>(hn::And(c, hn::Set(du, 0x80u)));
    auto value = hn::Mul(hn::BitCast(df, hn::ShiftLeft<kShift>(magnitude)), rebias);
    const auto subnormal = hn::Mul(hn::ConvertTo(df, hn::BitCast(di, magnitude)), step);
    const auto exponent_zero = hn::Lt(hn::BitCast(di, magnitude), hn::Set(di, 1 << kMantissaBits));
    value = hn::IfThenElse(hn::RebindMask(df, exponent_zero), subnormal, value);
    if constexpr (kIeeeSpecials) {  // exponent 31: infinity (mantissa 0) or NaN
      const auto special = hn::IfThenElse(hn::Eq(magnitude, hn::Set(du, 0x7Cu)),
                                          hn::Set(du, 0x7F800000u), hn::Set(du, 0x7FC00000u));
      const auto top = hn::Gt(hn::BitCast(di, magnitude), hn::Set(di, 0x7B));
      value = hn::IfThenElse(hn::RebindMask(df, top), hn::BitCast(df, special), value);
    } else {
      value = hn::IfThenElse(hn::RebindMask(df, hn::Eq(magnitude, hn::Set(du, 0x7Fu))),
                             hn::BitCast(df, hn::Set(du, 0x7FC00000u)), value);
    }
    hn::StoreU(hn::Mul(hn::Or(value, hn::BitCast(df, sign)), vd), df, dst + i);
  }
  const Fp8Format f{kMantissaBits, kBias, static_cast<uint8_t>(kIeeeSpecials ? 0x7B : 0x7E),
                    kIeeeSpecials};
  for (; i < n; ++i) dst[i] = KvMul(Fp8ToF32Branchless(src[i], f), d);
}

// The 32 values of one Q4_0 / Q4_1 block: nibble j low -> value j, high -> value j + 16;
// (q - bias) * d (+ m for Q4_1).
template <bool kQ4_1>
HWY_INLINE void DecodeQ4Block(const unsigned char* block, float* out) {
  const KvDF df;
  const hn::Rebind<uint8_t, KvDF> d8;
  const hn::Rebind<int32_t, KvDF> d32;
  const auto lanes = static_cast<int32_t>(hn::Lanes(df));
  const float d = F16BitsToF32(KvLoadU16(block));
  const unsigned char* nibbles = block + (kQ4_1 ? 4 : 2);
  if (lanes > 16) return DequantizeKvRow(kQ4_1 ? DType::kQ4_1 : DType::kQ4_0, block, 32, out);
  const auto vd = hn::Set(df, d);
  const auto vm = hn::Set(df, kQ4_1 ? F16BitsToF32(KvLoadU16(block + 2)) : 0.0f);
  const auto bias = hn::Set(d32, kQ4_1 ? 0 : 8);
  for (int32_t j = 0; j < 16; j += lanes) {
    const auto bytes = hn::PromoteTo(d32, hn::LoadU(d8, nibbles + j));
    const auto lo = hn::Sub(hn::And(bytes, hn::Set(d32, 0x0F)), bias);
    const auto hi = hn::Sub(hn::ShiftRight<4>(bytes), bias);
    auto vlo = hn::Mul(hn::ConvertTo(df, lo), vd);
    auto vhi = hn::Mul(hn::ConvertTo(df, hi), vd);
    if constexpr (kQ4_1) {
      vlo = hn::Add(vlo, vm);
      vhi = hn::Add(vhi, vm);
    }
    hn::StoreU(vlo, df, out + j);
    hn::StoreU(vhi, df, out + 16 + j);
  }
}

// dst[0, n) = the row of n values at storage unit `offset` of `base` (n = head_dim); a plain
// dtype goes through LoadKvRow.
HWY_INLINE void DecodeKvRow(const void* base, DType dtype, int64_t offset, int32_t n, float* dst) {
  const auto* row =
      static_cast<const unsigned char*>(base) + (IsQuantizedDType(dtype) ? offset : 0);
  const int64_t block_bytes = KvRowUnits(dtype, kKvQuantBlockValues);
  switch (dtype) {
    case DType::kInt8:
      return DecodeInt8(reinterpret_cast<const int8_t*>(row), n, BF16BitsToF32(KvLoadU16(row + n)),
                        dst);
    case DType::kFp8E4M3:
      return DecodeFp8<3, 7, false>(row, n, BF16BitsToF32(KvLoadU16(row + n)), dst);
    case DType::kFp8E5M2:
      return DecodeFp8<2, 15, true>(row, n, BF16BitsToF32(KvLoadU16(row + n)), dst);
    case DType::kQ8_0:
      for (int32_t b = 0; b < n / kKvQuantBlockValues; ++b) {
        const unsigned char* block = row + b * block_bytes;
        DecodeInt8(reinterpret_cast<const int8_t*>(block + 2), kKvQuantBlockValues,
                   F16BitsToF32(KvLoadU16(block)), dst + b * kKvQuantBlockValues);
      }
      return;
    case DType::kQ4_0:
    case DType::kQ4_1:
      for (int32_t b = 0; b < n / kKvQuantBlockValues; ++b) {
        const unsigned char* block = row + b * block_bytes;
        float* out = dst + b * kKvQuantBlockValues;
        if (dtype == DType::kQ4_0) {
          DecodeQ4Block<false>(block, out);
        } else {
          DecodeQ4Block<true>(block, out);
        }
      }
      return;
    default:
      return LoadKvRow(base, dtype, offset, n, dst);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace pagedkv::cpu::simd
HWY_AFTER_NAMESPACE();

#endif  // PAGEDKV_KERNELS_CPU_SIMD_KV_DEQUANT_INL_H_
