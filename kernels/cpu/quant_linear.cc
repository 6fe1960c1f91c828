// Copyright 2026 The pagedkv Authors.
//
// QuantLinear: validation, then output columns split over the pool in groups of 4 (the kernel's
// tile width).
#include "kernels/cpu/quant_linear.h"

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cpu/simd/simd_kernels.h"
#include "kernels/cpu/threaded_ops.h"
#include "kernels/op_validate.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cpu {

absl::Status QuantLinear(const QuantLinearArgs& args, ThreadPool* pool) {
  PAGEDKV_RETURN_IF_ERROR(ValidateQuantLinear(args));
  if (args.m == 0) return absl::OkStatus();
  constexpr int64_t kGroup = 4;
  const int64_t groups = (args.n + kGroup - 1) / kGroup;
  const double work_per_group =
      static_cast<double>(kGroup) * static_cast<double>(args.m) * static_cast<double>(args.k);
  const auto min_groups =
      static_cast<int64_t>(std::max(1.0, static_cast<double>(kMinWorkPerThread) / work_per_group));
  ParallelFor(pool, groups, min_groups, [&](int64_t begin, int64_t end) {
    simd::QuantLinearColumns(args, begin * kGroup, std::min(args.n, end * kGroup));
  });
  return absl::OkStatus();
}

}  // namespace pagedkv::cpu
