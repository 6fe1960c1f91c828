// Copyright 2026 The pagedkv Authors.
//
// fp16 / bf16 <-> fp32 conversions (round to nearest even) and typed element load/store, usable on
// host and device. The conversions are bit-exact on both: the same fp32 value is stored as the
// same bits. (The fp32 values a kernel computes may still differ from the CPU's by an ulp, since
// nvcc contracts multiply-adds into FMAs; the GPU parity tests' tolerances allow for that.)
//
// Example:
//   uint16_t h = pagedkv::F32ToF16Bits(1.5f);       // 0x3E00
//   float x = pagedkv::LoadElement(ptr, DType::kBF16, i);
//   pagedkv::StoreElement(ptr, DType::kF16, i, x);
#ifndef PAGEDKV_KERNELS_DTYPE_CONVERT_H_
#define PAGEDKV_KERNELS_DTYPE_CONVERT_H_

#include <cstdint>
#include <cstring>

#include "pagedkv/dtype.h"
#include "pagedkv/hd.h"

namespace pagedkv {

PAGEDKV_HD uint32_t FloatToBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

PAGEDKV_HD float BitsToFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

// IEEE binary16 bits of `f`, round to nearest even; overflow -> inf, NaN stays NaN. Mostly
// branch-free: subnormal results come from one fp32 addition that rounds at the right bit.
PAGEDKV_HD uint16_t F32ToF16Bits(float f) {
  uint32_t x = FloatToBits(f);
  const uint32_t sign = x & 0x80000000u;
  x ^= sign;
  uint32_t out;
  if (x >= 0x47800000u) {  // >= 65536, inf or NaN (65520..65536 overflow in the normal path)
    out = x > 0x7f800000u ? 0x7e00u : 0x7c00u;
  } else if (x < 0x38800000u) {          // below 2^-14: subnormal half or zero
    const uint32_t kMagic = 126u << 23;  // 0.5f: adding it rounds to a multiple of 2^-24
    out = FloatToBits(BitsToFloat(x) + BitsToFloat(kMagic)) - kMagic;
  } else {
    const uint32_t mantissa_odd = (x >> 13) & 1u;
    x += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu;  // rebias exponent, round half down
    x += mantissa_odd;                                      // ... ties to even
    out = x >> 13;
  }
  return static_cast<uint16_t>(out | (sign >> 16));
}

// fp32 value of IEEE binary16 bits (exact).
PAGEDKV_HD float F16BitsToF32(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    const float magnitude = static_cast<float>(mant) * 5.9604644775390625e-8f;  // mant * 2^-24
    return BitsToFloat(FloatToBits(magnitude) | sign);
  }
  if (exp == 31) return BitsToFloat(sign | 0x7f800000u | (mant << 13));
  return BitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

// bfloat16 bits of `f`, round to nearest even; NaN stays NaN.
PAGEDKV_HD uint16_t F32ToBF16Bits(float f) {
  const uint32_t x = FloatToBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// fp32 value of bfloat16 bits (exact).
PAGEDKV_HD float BF16BitsToF32(uint16_t b) { return BitsToFloat(static_cast<uint32_t>(b) << 16); }

// Element `index` of an array of `dtype` at `base`, as fp32.
PAGEDKV_HD float LoadElement(const void* base, DType dtype, int64_t index) {
  switch (dtype) {
    case DType::kF16:
      return F16BitsToF32(static_cast<const uint16_t*>(base)[index]);
    case DType::kBF16:
      return BF16BitsToF32(static_cast<const uint16_t*>(base)[index]);
    case DType::kF32:
    default:
      return static_cast<const float*>(base)[index];
  }
}

// Stores `value` rounded to `dtype` at element `index` of `base`.
PAGEDKV_HD void StoreElement(void* base, DType dtype, int64_t index, float value) {
  switch (dtype) {
    case DType::kF16:
      static_cast<uint16_t*>(base)[index] = F32ToF16Bits(value);
      return;
    case DType::kBF16:
      static_cast<uint16_t*>(base)[index] = F32ToBF16Bits(value);
      return;
    case DType::kF32:
    default:
      static_cast<float*>(base)[index] = value;
      return;
  }
}

// dst[i] = element (offset + i) of `base`, i < n, as fp32 (the dtype switch is outside the loop).
PAGEDKV_HD void LoadRow(const void* base, DType dtype, int64_t offset, int32_t n, float* dst) {
  switch (dtype) {
    case DType::kF16: {
      const uint16_t* src = static_cast<const uint16_t*>(base) + offset;
      for (int32_t i = 0; i < n; ++i) dst[i] = F16BitsToF32(src[i]);
      return;
    }
    case DType::kBF16: {
      const uint16_t* src = static_cast<const uint16_t*>(base) + offset;
      for (int32_t i = 0; i < n; ++i) dst[i] = BF16BitsToF32(src[i]);
      return;
    }
    case DType::kF32:
    default: {
      const float* src = static_cast<const float*>(base) + offset;
      for (int32_t i = 0; i < n; ++i) dst[i] = src[i];
      return;
    }
  }
}

// Stores src[i], i < n, rounded to `dtype`, at element (offset + i) of `base`.
PAGEDKV_HD void StoreRow(void* base, DType dtype, int64_t offset, int32_t n, const float* src) {
  switch (dtype) {
    case DType::kF16: {
      uint16_t* dst = static_cast<uint16_t*>(base) + offset;
      for (int32_t i = 0; i < n; ++i) dst[i] = F32ToF16Bits(src[i]);
      return;
    }
    case DType::kBF16: {
      uint16_t* dst = static_cast<uint16_t*>(base) + offset;
      for (int32_t i = 0; i < n; ++i) dst[i] = F32ToBF16Bits(src[i]);
      return;
    }
    case DType::kF32:
    default: {
      float* dst = static_cast<float*>(base) + offset;
      for (int32_t i = 0; i < n; ++i) dst[i] = src[i];
      return;
    }
  }
}

// `value` rounded to `dtype` and back (what a store followed by a load returns).
PAGEDKV_HD float RoundToDType(float value, DType dtype) {
  switch (dtype) {
    case DType::kF16:
      return F16BitsToF32(F32ToF16Bits(value));
    case DType::kBF16:
      return BF16BitsToF32(F32ToBF16Bits(value));
    case DType::kF32:
    default:
      return value;
  }
}

}  // namespace pagedkv

#endif  // PAGEDKV_KERNELS_DTYPE_CONVERT_H_
