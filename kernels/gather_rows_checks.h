// Copyright 2026 The pagedkv Authors.
//
// Checks of GatherRowsArgs shared by the CPU and CUDA backends: ValidateGatherRows checks sizes,
// pointers and the dtype (as kernels/op_validate.h does for the other ops), and
// CheckGatherRowsContents checks the row indices in host memory (as kernels/content_checks.h
// does). The per-row predicate is GatherRowValid, a PAGEDKV_HD function the CUDA check kernel
// calls too, so both backends accept and reject the same inputs.
//
// Example:
//   PAGEDKV_RETURN_IF_ERROR(pagedkv::ValidateGatherRows(args));
//   PAGEDKV_RETURN_IF_ERROR(pagedkv::CheckGatherRowsContents(args));  // host pointers
#ifndef PAGEDKV_KERNELS_GATHER_ROWS_CHECKS_H_
#define PAGEDKV_KERNELS_GATHER_ROWS_CHECKS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "pagedkv/export.h"
#include "pagedkv/hd.h"
#include "pagedkv/kernels/op_args.h"

namespace pagedkv {

// row in [0, num_src_rows).
PAGEDKV_HD bool GatherRowValid(int64_t row, int64_t num_src_rows) {
  return row >= 0 && row < num_src_rows;
}

// Elements between rows of args.src (src_stride, or width when 0).
PAGEDKV_HD int64_t GatherSrcStride(const GatherRowsArgs& args) {
  return args.src_stride == 0 ? args.width : args.src_stride;
}

// Pointers non-null, num_rows >= 0, num_src_rows, width >= 1, src_stride 0 or >= width, a valid
// dtype. InvalidArgument naming the field otherwise.
PAGEDKV_EXPORT absl::Status ValidateGatherRows(const GatherRowsArgs& args);

// Every rows[i] in [0, num_src_rows); InvalidArgument naming the first bad entry otherwise.
// REQUIRES: ValidateGatherRows(args) is ok; args.rows points to host memory.
PAGEDKV_EXPORT absl::Status CheckGatherRowsContents(const GatherRowsArgs& args);

}  // namespace pagedkv

#endif  // PAGEDKV_KERNELS_GATHER_ROWS_CHECKS_H_
