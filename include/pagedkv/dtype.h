// Copyright 2026 The pagedkv Authors.
//
// Storage element types of the KV cache. Arithmetic is always fp32; fp16 and bf16 are storage
// formats converted on load and store (see pagedkv/kernels/dtype_convert.h for the conversions).
//
// Example:
//   absl::StatusOr<pagedkv::DType> dtype = pagedkv::ParseDType("bf16");
//   size_t bytes = pagedkv::DTypeSize(*dtype) * num_elements;  // 2 bytes per element
#ifndef PAGEDKV_DTYPE_H_
#define PAGEDKV_DTYPE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pagedkv/hd.h"

namespace pagedkv {

// Element type of stored K/V values.
enum class DType : int32_t {
  kF32 = 0,   // IEEE binary32
  kF16 = 1,   // IEEE binary16
  kBF16 = 2,  // bfloat16 (upper half of binary32)
};

// Bytes per element; 0 for a value outside the enum.
PAGEDKV_HD constexpr int DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
  }
  return 0;
}

// True for the three supported values.
PAGEDKV_HD constexpr bool IsValidDType(DType dtype) { return DTypeSize(dtype) != 0; }

// "f32", "f16", "bf16" ("invalid" otherwise).
inline const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
  }
  return "invalid";
}

// Parses "f32"/"fp32"/"float32", "f16"/"fp16"/"float16", "bf16"/"bfloat16".
inline absl::StatusOr<DType> ParseDType(std::string_view name) {
  if (name == "f32" || name == "fp32" || name == "float32") return DType::kF32;
  if (name == "f16" || name == "fp16" || name == "float16") return DType::kF16;
  if (name == "bf16" || name == "bfloat16") return DType::kBF16;
  return absl::InvalidArgumentError("unknown dtype '" + std::string(name) +
                                    "': use f32, f16 or bf16");
}

}  // namespace pagedkv

#endif  // PAGEDKV_DTYPE_H_
