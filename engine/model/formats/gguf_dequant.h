// Copyright 2026 The pagedkv Authors.
//
// GGUF tensor types (ggml's `ggml_type` numbering) and their conversion to fp32, as ggml's
// reference dequantizers define them (ggml-quants.c, block structs in ggml-common.h):
//   F32 (0), F16 (1), BF16 (30)    plain little-endian values
//   Q4_0 (2)   32 per block: f16 d, 16 bytes of nibbles; x = (q - 8) d
//   Q4_1 (3)   32 per block: f16 d, f16 m, 16 bytes of nibbles; x = q d + m
//   Q8_0 (8)   32 per block: f16 d, 32 int8; x = q d
//   Q4_K (12)  256 per super-block: f16 d, f16 dmin, 12 bytes of 6-bit scales and mins for 8
//              sub-blocks of 32, 128 bytes of nibbles; x = d sc q - dmin m
//   Q6_K (14)  256 per super-block: 128 bytes low nibbles, 64 bytes high 2-bit pairs, 16 int8
//              scales (one per 16 values), f16 d; x = d sc (q - 32)
// Nibble order within a 32-value block: byte j holds value j (low) and value j + 16 (high) for
// Q4_0 / Q4_1; Q4_K's 64-value halves take the low nibbles of 32 bytes, then their high ones.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(const GgufTypeTraits* t, GgufTypeInfo(3));  // Q4_1
//   std::vector<float> out(32);
//   PAGEDKV_RETURN_IF_ERROR(DequantizeGguf(3, block_bytes, 32, out.data()));
#ifndef PAGEDKV_ENGINE_MODEL_FORMATS_GGUF_DEQUANT_H_
#define PAGEDKV_ENGINE_MODEL_FORMATS_GGUF_DEQUANT_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pagedkv/export.h"

namespace pagedkv::model_internal {

struct PAGEDKV_EXPORT GgufTypeTraits {
  uint32_t id;           // ggml_type value
  const char* name;      // "Q4_1"
  int64_t block_values;  // values per block (1 for plain types)
  int64_t block_bytes;   // bytes per block
  bool supported;        // DequantizeGguf converts it
};

// The traits of ggml type `id` (also known-but-unsupported ones, e.g. Q5_K, for error
// messages); InvalidArgument for an id ggml does not define.
PAGEDKV_EXPORT absl::StatusOr<const GgufTypeTraits*> GgufTypeInfo(uint32_t id);

// Converts `n` values of type `id` stored in `bytes` to out[0, n). InvalidArgument when the type
// is not supported, n is not a whole number of blocks, or bytes.size() is not exactly the size
// of n values. REQUIRES: out holds n floats.
PAGEDKV_EXPORT absl::Status DequantizeGguf(uint32_t id, std::string_view bytes, int64_t n,
                                           float* out);

}  // namespace pagedkv::model_internal

#endif  // PAGEDKV_ENGINE_MODEL_FORMATS_GGUF_DEQUANT_H_
