// Copyright 2026 The pagedkv Authors.
//
// CPU GatherRows.
#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "kernels/gather_rows_checks.h"
#include "pagedkv/dtype.h"
#include "pagedkv/kernels/cpu_ops.h"
#include "pagedkv/kernels/dtype_convert.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cpu {

absl::Status GatherRows(const GatherRowsArgs& args) {
  PAGEDKV_RETURN_IF_ERROR(ValidateGatherRows(args));
  PAGEDKV_RETURN_IF_ERROR(CheckGatherRowsContents(args));
  const int64_t stride = GatherSrcStride(args);
  for (int64_t i = 0; i < args.num_rows; ++i) {
    const int64_t offset = args.rows[i] * stride;
    float* out = args.out + i * args.width;
    if (args.src_dtype == DType::kF32) {
      std::memcpy(out, static_cast<const float*>(args.src) + offset,
                  static_cast<size_t>(args.width) * sizeof(float));
      continue;
    }
    for (int64_t e = 0; e < args.width; ++e) {
      out[e] = LoadElement(args.src, args.src_dtype, offset + e);
    }
  }
  return absl::OkStatus();
}

}  // namespace pagedkv::cpu
