// Copyright 2026 The pagedkv Authors.
#include "kernels/gather_rows_checks.h"

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "pagedkv/dtype.h"

namespace pagedkv {

absl::Status ValidateGatherRows(const GatherRowsArgs& args) {
  const auto invalid = [](auto&&... what) {
    return absl::InvalidArgumentError(absl::StrCat("GatherRows: ", what...));
  };
  if (args.src == nullptr) return invalid("src is null");
  if (args.rows == nullptr) return invalid("rows is null");
  if (args.out == nullptr) return invalid("out is null");
  if (args.num_rows < 0) return invalid("num_rows = ", args.num_rows, " must be >= 0");
  if (args.num_src_rows < 1) {
    return invalid("num_src_rows = ", args.num_src_rows, " must be >= 1");
  }
  if (args.width < 1) return invalid("width = ", args.width, " must be >= 1");
  if (args.src_stride != 0 && args.src_stride < args.width) {
    return invalid("src_stride = ", args.src_stride,
                   " must be 0 (contiguous) or >= width = ", args.width);
  }
  if (!IsValidDType(args.src_dtype)) return invalid("src_dtype is not a DType value");
  if (IsQuantizedDType(args.src_dtype)) {
    return invalid(absl::StrCat("src_dtype ", DTypeName(args.src_dtype),
                                " is quantized: gather f32, f16 or bf16 rows"));
  }
  return absl::OkStatus();
}

absl::Status CheckGatherRowsContents(const GatherRowsArgs& args) {
  for (int64_t i = 0; i < args.num_rows; ++i) {
    if (!GatherRowValid(args.rows[i], args.num_src_rows)) {
      return absl::InvalidArgumentError(absl::StrCat("GatherRows: rows[", i, "] = ", args.rows[i],
                                                     " is outside [0, ", args.num_src_rows, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace pagedkv
