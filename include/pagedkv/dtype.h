// Copyright 2026 The pagedkv Authors.
//
// Storage types of the KV cache. Arithmetic is always fp32; every type is a storage format
// converted on load and store (pagedkv/kernels/dtype_convert.h for the 16-bit floats,
// pagedkv/kernels/kv_quant.h for the quantized rows).
//
// Plain types store one value per element: f32 (4 bytes), f16 and bf16 (2 bytes). Quantized types
// store each (token, KV head) row of head_dim values as one row of bytes with its scales inside:
//   int8      head_dim int8 values, then a bf16 scale d:     x = q d          (head_dim + 2 bytes)
//   fp8_e4m3  head_dim E4M3 values, then a bf16 scale d:     x = fp8(q) d     (head_dim + 2 bytes)
//   fp8_e5m2  head_dim E5M2 values, then a bf16 scale d:     x = fp8(q) d     (head_dim + 2 bytes)
//   q8_0      GGUF Q8_0 blocks of 32 values (f16 d, 32 int8)                 (34 per 32 values)
//   q4_0      GGUF Q4_0 blocks of 32 values (f16 d, 16 bytes of nibbles)     (18 per 32 values)
//   q4_1      GGUF Q4_1 blocks of 32 values (f16 d, f16 m, 16 bytes)         (20 per 32 values)
// A layout's strides count storage units: elements for the plain types, bytes for the quantized
// ones (DTypeSize is the unit's size), and a row is KvRowUnits(dtype, head_dim) units.
//
// Example:
//   absl::StatusOr<pagedkv::DType> dtype = pagedkv::ParseDType("q8_0");
//   int64_t bytes = pagedkv::KvRowBytes(*dtype, 128);  // 136: 4 blocks of 34 bytes
#ifndef PAGEDKV_DTYPE_H_
#define PAGEDKV_DTYPE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pagedkv/hd.h"

namespace pagedkv {

// Storage type of K/V values (see the banner).
enum class DType : int32_t {
  kF32 = 0,      // IEEE binary32
  kF16 = 1,      // IEEE binary16
  kBF16 = 2,     // bfloat16 (upper half of binary32)
  kInt8 = 3,     // symmetric int8 per row, bf16 scale
  kFp8E4M3 = 4,  // OCP E4M3 per row, bf16 scale
  kFp8E5M2 = 5,  // E5M2 per row, bf16 scale
  kQ8_0 = 6,     // GGUF Q8_0 blocks
  kQ4_0 = 7,     // GGUF Q4_0 blocks
  kQ4_1 = 8,     // GGUF Q4_1 blocks
};

// Bytes per storage unit (per element for the plain types, 1 for the quantized ones); 0 for a
// value outside the enum.
PAGEDKV_HD constexpr int DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kInt8:
    case DType::kFp8E4M3:
    case DType::kFp8E5M2:
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
      return 1;
  }
  return 0;
}

// True for every value of the enum.
PAGEDKV_HD constexpr bool IsValidDType(DType dtype) { return DTypeSize(dtype) != 0; }

// True for the quantized types (rows with scales; loaded and stored a whole row at a time).
PAGEDKV_HD constexpr bool IsQuantizedDType(DType dtype) {
  return IsValidDType(dtype) && dtype != DType::kF32 && dtype != DType::kF16 &&
         dtype != DType::kBF16;
}

// True for the GGUF block types (q8_0, q4_0, q4_1): rows of 32-value blocks.
PAGEDKV_HD constexpr bool IsBlockDType(DType dtype) {
  return dtype == DType::kQ8_0 || dtype == DType::kQ4_0 || dtype == DType::kQ4_1;
}

inline constexpr int32_t kKvQuantBlockValues = 32;  // values per GGUF block of a KV row

// head_dim must be a multiple of this: 32 for the block types, 1 otherwise.
PAGEDKV_HD constexpr int32_t KvRowValuesMultiple(DType dtype) {
  return IsBlockDType(dtype) ? kKvQuantBlockValues : 1;
}

// Storage units of one (token, KV head) row of head_dim values, scales included. REQUIRES:
// head_dim a multiple of KvRowValuesMultiple(dtype).
PAGEDKV_HD constexpr int64_t KvRowUnits(DType dtype, int64_t head_dim) {
  switch (dtype) {
    case DType::kInt8:
    case DType::kFp8E4M3:
    case DType::kFp8E5M2:
      return head_dim + 2;
    case DType::kQ8_0:
      return head_dim / kKvQuantBlockValues * 34;
    case DType::kQ4_0:
      return head_dim / kKvQuantBlockValues * 18;
    case DType::kQ4_1:
      return head_dim / kKvQuantBlockValues * 20;
    default:
      return head_dim;
  }
}

// Bytes of one row (KvRowUnits in bytes).
PAGEDKV_HD constexpr int64_t KvRowBytes(DType dtype, int64_t head_dim) {
  return KvRowUnits(dtype, head_dim) * DTypeSize(dtype);
}

// "f32", "f16", "bf16", "int8", "fp8_e4m3", "fp8_e5m2", "q8_0", "q4_0", "q4_1" ("invalid"
// otherwise).
inline const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kInt8:
      return "int8";
    case DType::kFp8E4M3:
      return "fp8_e4m3";
    case DType::kFp8E5M2:
      return "fp8_e5m2";
    case DType::kQ8_0:
      return "q8_0";
    case DType::kQ4_0:
      return "q4_0";
    case DType::kQ4_1:
      return "q4_1";
  }
  return "invalid";
}

// A KV cache's dtypes for messages and labels: "q8_0" when K and V share it, else "q8_0/q4_0"
// (K's, then V's).
inline std::string KvDTypesName(DType k, DType v) {
  return k == v ? DTypeName(k) : std::string(DTypeName(k)) + "/" + DTypeName(v);
}

// Parses "f32"/"fp32"/"float32", "f16"/"fp16"/"float16"/"half", "bf16"/"bfloat16", "int8",
// "fp8"/"fp8_e4m3", "fp8_e5m2", "q8_0", "q4_0", "q4_1".
inline absl::StatusOr<DType> ParseDType(std::string_view name) {
  if (name == "f32" || name == "fp32" || name == "float32") return DType::kF32;
  if (name == "f16" || name == "fp16" || name == "float16" || name == "half") return DType::kF16;
  if (name == "bf16" || name == "bfloat16") return DType::kBF16;
  if (name == "int8") return DType::kInt8;
  if (name == "fp8" || name == "fp8_e4m3") return DType::kFp8E4M3;
  if (name == "fp8_e5m2") return DType::kFp8E5M2;
  if (name == "q8_0") return DType::kQ8_0;
  if (name == "q4_0") return DType::kQ4_0;
  if (name == "q4_1") return DType::kQ4_1;
  return absl::InvalidArgumentError(
      "unknown dtype '" + std::string(name) +
      "': use f32, f16, bf16, int8, fp8_e4m3 (fp8), fp8_e5m2, q8_0, q4_0 or q4_1");
}

}  // namespace pagedkv

#endif  // PAGEDKV_DTYPE_H_
