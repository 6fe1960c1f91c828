// Copyright 2026 The pagedkv Authors.
//
// Quantized KV rows (pagedkv/dtype.h's int8, fp8_e4m3, fp8_e5m2, q8_0, q4_0, q4_1): one (token,
// KV head) row of n = head_dim values is quantized from fp32 and dequantized to fp32 as a whole,
// on host and device with the same bits. Every KV op loads and stores rows through LoadKvRow /
// StoreKvRow, which also take the plain types (f32, f16, bf16) element by element.
//
// Rounding, per type (d: scale, q: stored value):
//   int8       d = bf16 rounded up (toward +inf) of max|x| / 127; q = clamp(rint(x * (1 / d)),
//              -127, 127) (rint: nearest, ties to even); x' = q * d. d = 0 for an all-zero row.
//   fp8_e4m3   d = bf16 rounded up of max|x| / 448; q = E4M3(x * (1 / d)) (nearest even,
//   fp8_e5m2   saturating; pagedkv/kernels/fp8_convert.h); x' = fp8(q) * d (57344 for E5M2).
//              Rounding d up keeps every x * (1 / d) within the format (no clipping beyond one
//              rounding), and a bf16 d covers fp32's range, so tiny rows keep their precision.
//   q8_0       ggml's quantize_row_q8_0_ref per 32-value block: d = max|x| / 127, q =
//              round(x * (1 / d)) (ties away from zero), f16 d stored; x' = q * f16(d).
//   q4_0       ggml's quantize_row_q4_0_ref: m = the value of largest magnitude, d = m / -8, q =
//              min(15, trunc(x * (1 / d) + 8.5)), f16 d; x' = (q - 8) * f16(d).
//   q4_1       ggml's quantize_row_q4_1_ref: d = (max - min) / 15, q = min(15, trunc((x - min) *
//              (1 / d) + 0.5)), f16 d and f16 min; x' = q * f16(d) + f16(min).
// The block types' bytes are GGUF's, so a row is what llama.cpp's `-ctk q8_0` cache holds.
// Multiplies and adds are rounded one at a time (no fused multiply-add on either side).
//
// Example:
//   unsigned char row[pagedkv::KvRowBytes(pagedkv::DType::kInt8, 64)];
//   pagedkv::QuantizeKvRow(pagedkv::DType::kInt8, x, 64, row);
//   float y[64];
//   pagedkv::DequantizeKvRow(pagedkv::DType::kInt8, row, 64, y);  // y[i] ~ x[i]
#ifndef PAGEDKV_KERNELS_KV_QUANT_H_
#define PAGEDKV_KERNELS_KV_QUANT_H_

#include <cstdint>

#if !defined(__CUDA_ARCH__)
#include <cmath>
#endif

#include "pagedkv/dtype.h"
#include "pagedkv/hd.h"
#include "pagedkv/kernels/dtype_convert.h"
#include "pagedkv/kernels/fp8_convert.h"

namespace pagedkv {

// a * b and a + b rounded once each (nvcc would otherwise contract them into an FMA).
PAGEDKV_HD float KvMul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
PAGEDKV_HD float KvAdd(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
PAGEDKV_HD float KvAbs(float x) { return BitsToFloat(FloatToBits(x) & 0x7fffffffu); }

// Nearest integer, ties to even (rint in the default rounding mode).
PAGEDKV_HD float KvRintEven(float x) {
#if defined(__CUDA_ARCH__)
  return rintf(x);
#else
  return std::rint(x);
#endif
}

// Nearest integer, ties away from zero (C's roundf, ggml's q8_0).
PAGEDKV_HD float KvRoundAway(float x) {
#if defined(__CUDA_ARCH__)
  return roundf(x);
#else
  return std::round(x);
#endif
}

// bf16 bits of d >= 0 rounded toward +inf (an exact bf16 value stays; NaN and inf kept).
PAGEDKV_HD uint16_t F32ToBF16BitsUp(float d) {
  uint32_t u = FloatToBits(d);
  if ((u & 0x7f800000u) != 0x7f800000u && (u & 0xffffu) != 0) u += 0x10000u;
  return static_cast<uint16_t>(u >> 16);
}

PAGEDKV_HD void KvStoreU16(unsigned char* p, uint16_t v) {
  p[0] = static_cast<unsigned char>(v & 0xffu);
  p[1] = static_cast<unsigned char>(v >> 8);
}
PAGEDKV_HD uint16_t KvLoadU16(const unsigned char* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

// max |src[i]| over i < n.
PAGEDKV_HD float KvAbsMax(const float* src, int32_t n) {
  float amax = 0.0f;
  for (int32_t i = 0; i < n; ++i) amax = KvAbs(src[i]) > amax ? KvAbs(src[i]) : amax;
  return amax;
}

// The per-row scale of int8 / fp8 rows: bf16 of max|x| / `range`, rounded up; 1 / d is returned
// in *inverse (0 for d = 0).
PAGEDKV_HD uint16_t KvRowScale(const float* src, int32_t n, float range, float* inverse) {
  const uint16_t bits = F32ToBF16BitsUp(KvAbsMax(src, n) / range);
  const float d = BF16BitsToF32(bits);
  *inverse = d > 0.0f ? 1.0f / d : 0.0f;
  return bits;
}

// int8 / fp8 row: n values then the bf16 scale.
PAGEDKV_HD void QuantizeScaledRow(DType dtype, const float* src, int32_t n, unsigned char* dst) {
  const float range = dtype == DType::kInt8 ? 127.0f : dtype == DType::kFp8E4M3 ? 448.0f : 57344.0f;
  float inverse = 0.0f;
  const uint16_t d = KvRowScale(src, n, range, &inverse);
  for (int32_t i = 0; i < n; ++i) {
    const float x = KvMul(src[i], inverse);
    if (dtype == DType::kInt8) {
      const float q = KvRintEven(x);
      dst[i] = static_cast<unsigned char>(static_cast<int8_t>(q > 127.0f    ? 127.0f
                                                              : q < -127.0f ? -127.0f
                                                                            : q));
    } else {
      dst[i] = dtype == DType::kFp8E4M3 ? F32ToFp8E4M3(x) : F32ToFp8E5M2(x);
    }
  }
  KvStoreU16(dst + n, d);
}

// One 32-value Q8_0 block (ggml's reference rounding).
PAGEDKV_HD void QuantizeQ8_0Block(const float* x, unsigned char* block) {
  const float d = KvAbsMax(x, kKvQuantBlockValues) / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  KvStoreU16(block, F32ToF16Bits(d));
  for (int32_t j = 0; j < kKvQuantBlockValues; ++j) {
    block[2 + j] = static_cast<unsigned char>(static_cast<int8_t>(KvRoundAway(KvMul(x[j], id))));
  }
}

// One 32-value Q4_0 block (ggml's reference rounding).
PAGEDKV_HD void QuantizeQ4_0Block(const float* x, unsigned char* block) {
  float amax = 0.0f, max = 0.0f;
  for (int32_t j = 0; j < kKvQuantBlockValues; ++j) {
    if (amax < KvAbs(x[j])) {
      amax = KvAbs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  KvStoreU16(block, F32ToF16Bits(d));
  for (int32_t j = 0; j < kKvQuantBlockValues / 2; ++j) {
    const int lo = static_cast<int>(KvAdd(KvMul(x[j], id), 8.5f));
    const int hi = static_cast<int>(KvAdd(KvMul(x[j + 16], id), 8.5f));
    block[2 + j] = static_cast<unsigned char>((lo < 15 ? lo : 15) | ((hi < 15 ? hi : 15) << 4));
  }
}

// One 32-value Q4_1 block (ggml's reference rounding).
PAGEDKV_HD void QuantizeQ4_1Block(const float* x, unsigned char* block) {
  float min = x[0], max = x[0];
  for (int32_t j = 1; j < kKvQuantBlockValues; ++j) {
    min = x[j] < min ? x[j] : min;
    max = x[j] > max ? x[j] : max;
  }
  const float d = (max - min) / 15.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  KvStoreU16(block, F32ToF16Bits(d));
  KvStoreU16(block + 2, F32ToF16Bits(min));
  for (int32_t j = 0; j < kKvQuantBlockValues / 2; ++j) {
    const int lo = static_cast<int>(KvAdd(KvMul(x[j] - min, id), 0.5f));
    const int hi = static_cast<int>(KvAdd(KvMul(x[j + 16] - min, id), 0.5f));
    block[4 + j] = static_cast<unsigned char>((lo < 15 ? lo : 15) | ((hi < 15 ? hi : 15) << 4));
  }
}

// Quantizes src[0, n) into one row of `dtype` (KvRowBytes(dtype, n) bytes at dst).
// REQUIRES: IsQuantizedDType(dtype); n a multiple of KvRowValuesMultiple(dtype).
PAGEDKV_HD void QuantizeKvRow(DType dtype, const float* src, int32_t n, unsigned char* dst) {
  if (!IsBlockDType(dtype)) return QuantizeScaledRow(dtype, src, n, dst);
  const int64_t block_bytes = KvRowUnits(dtype, kKvQuantBlockValues);
  for (int32_t b = 0; b < n / kKvQuantBlockValues; ++b) {
    const float* x = src + b * kKvQuantBlockValues;
    unsigned char* block = dst + b * block_bytes;
    if (dtype == DType::kQ8_0) {
      QuantizeQ8_0Block(x, block);
    } else if (dtype == DType::kQ4_0) {
      QuantizeQ4_0Block(x, block);
    } else {
      QuantizeQ4_1Block(x, block);
    }
  }
}

// Value j (< 32) of a block of `dtype`.
PAGEDKV_HD float DequantizeBlockValue(DType dtype, const unsigned char* block, int32_t j) {
  const float d = F16BitsToF32(KvLoadU16(block));
  if (dtype == DType::kQ8_0) return KvMul(static_cast<float>(static_cast<int8_t>(block[2 + j])), d);
  const unsigned char byte = block[(dtype == DType::kQ4_1 ? 4 : 2) + (j & 15)];
  const int32_t q = j < 16 ? (byte & 0x0F) : (byte >> 4);
  if (dtype == DType::kQ4_0) return KvMul(static_cast<float>(q - 8), d);
  return KvAdd(KvMul(static_cast<float>(q), d), F16BitsToF32(KvLoadU16(block + 2)));
}

// Value j (< n) of a quantized row of n values. REQUIRES: as QuantizeKvRow.
PAGEDKV_HD float DequantizeKvValue(DType dtype, const unsigned char* row, int32_t n, int32_t j) {
  if (IsBlockDType(dtype)) {
    const unsigned char* block =
        row + (j / kKvQuantBlockValues) * KvRowUnits(dtype, kKvQuantBlockValues);
    return DequantizeBlockValue(dtype, block, j % kKvQuantBlockValues);
  }
  const float d = BF16BitsToF32(KvLoadU16(row + n));
  const float v = dtype == DType::kInt8      ? static_cast<float>(static_cast<int8_t>(row[j]))
                  : dtype == DType::kFp8E4M3 ? Fp8E4M3ToF32(row[j])
                                             : Fp8E5M2ToF32(row[j]);
  return KvMul(v, d);
}

// Fp8ToF32(c, f) without branches (selects a compiler can turn into vector blends): the same
// bits for every code (tests/kernels/kv_quant_test.cc).
PAGEDKV_HD float Fp8ToF32Branchless(uint8_t c, Fp8Format f) {
  const uint32_t sign = static_cast<uint32_t>(c & 0x80u) << 24;
  const uint32_t magnitude = c & 0x7Fu;
  const uint32_t exponent = magnitude >> f.mantissa_bits;
  const uint32_t mantissa = magnitude & ((1u << f.mantissa_bits) - 1u);
  const uint32_t step = static_cast<uint32_t>(127 + 1 - f.bias - f.mantissa_bits) << 23;
  const uint32_t subnormal = FloatToBits(static_cast<float>(mantissa) * BitsToFloat(step));
  const uint32_t normal = ((exponent + static_cast<uint32_t>(127 - f.bias)) << 23) |
                          (mantissa << (23 - f.mantissa_bits));
  const uint32_t top = (1u << (7 - f.mantissa_bits)) - 1u;  // E5M2's special exponent
  const uint32_t special = mantissa == 0 ? 0x7F800000u : 0x7FC00000u;
  uint32_t bits = exponent == 0 ? subnormal : normal;
  bits = f.ieee_specials && exponent == top ? special : bits;
  bits = !f.ieee_specials && magnitude == kFp8NanCode ? 0x7FC00000u : bits;
  return BitsToFloat(sign | bits);
}

// dst[0, n) = the values of a quantized row of n values: each dtype as a plain loop over its
// blocks (the CPU attention has its own vector decode, kernels/cpu/simd/kv_dequant-inl.h, with
// the same bits). REQUIRES: as QuantizeKvRow.
PAGEDKV_HD void DequantizeKvRow(DType dtype, const unsigned char* row, int32_t n, float* dst) {
  if (!IsBlockDType(dtype)) {
    const float d = BF16BitsToF32(KvLoadU16(row + n));
    if (dtype == DType::kInt8) {
      for (int32_t i = 0; i < n; ++i) {
        dst[i] = KvMul(static_cast<float>(static_cast<int8_t>(row[i])), d);
      }
      return;
    }
    const Fp8Format f = dtype == DType::kFp8E4M3 ? kFp8E4M3 : kFp8E5M2;
    for (int32_t i = 0; i < n; ++i) dst[i] = KvMul(Fp8ToF32Branchless(row[i], f), d);
    return;
  }
  const int64_t block_bytes = KvRowUnits(dtype, kKvQuantBlockValues);
  for (int32_t b = 0; b < n / kKvQuantBlockValues; ++b) {
    const unsigned char* block = row + b * block_bytes;
    float* out = dst + b * kKvQuantBlockValues;
    const float d = F16BitsToF32(KvLoadU16(block));
    if (dtype == DType::kQ8_0) {
      for (int32_t j = 0; j < kKvQuantBlockValues; ++j) {
        out[j] = KvMul(static_cast<float>(static_cast<int8_t>(block[2 + j])), d);
      }
      continue;
    }
    const bool q4_1 = dtype == DType::kQ4_1;
    const unsigned char* nibbles = block + (q4_1 ? 4 : 2);
    const float m = q4_1 ? F16BitsToF32(KvLoadU16(block + 2)) : 0.0f;
    const int32_t bias = q4_1 ? 0 : 8;
    for (int32_t j = 0; j < kKvQuantBlockValues / 2; ++j) {
      const float lo = KvMul(static_cast<float>((nibbles[j] & 0x0F) - bias), d);
      const float hi = KvMul(static_cast<float>((nibbles[j] >> 4) - bias), d);
      out[j] = q4_1 ? KvAdd(lo, m) : lo;
      out[j + 16] = q4_1 ? KvAdd(hi, m) : hi;
    }
  }
}

// dst[i], i < n: value i of the row at storage unit `offset` of `base` (a whole row of a
// quantized type, n = head_dim; any run of elements of a plain type).
PAGEDKV_HD void LoadKvRow(const void* base, DType dtype, int64_t offset, int32_t n, float* dst) {
  if (!IsQuantizedDType(dtype)) return LoadRow(base, dtype, offset, n, dst);
  DequantizeKvRow(dtype, static_cast<const unsigned char*>(base) + offset, n, dst);
}

// Stores src[0, n) as the row at storage unit `offset` of `base` (as LoadKvRow).
PAGEDKV_HD void StoreKvRow(void* base, DType dtype, int64_t offset, int32_t n, const float* src) {
  if (!IsQuantizedDType(dtype)) return StoreRow(base, dtype, offset, n, src);
  QuantizeKvRow(dtype, src, n, static_cast<unsigned char*>(base) + offset);
}

// Value j of the row of n values at storage unit `row_offset` of `base`, any type.
PAGEDKV_HD float LoadKvValue(const void* base, DType dtype, int64_t row_offset, int32_t n,
                             int32_t j) {
  if (!IsQuantizedDType(dtype)) return LoadElement(base, dtype, row_offset + j);
  return DequantizeKvValue(dtype, static_cast<const unsigned char*>(base) + row_offset, n, j);
}

}  // namespace pagedkv

#endif  // PAGEDKV_KERNELS_KV_QUANT_H_
