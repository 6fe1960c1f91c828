// Copyright 2026 The pagedkv Authors.
//
// CPU Linear (y = x W^T) and LM head: the vector kernel of simd/linear_simd.cc over column ranges
// of y, one range per thread (groups of 4 columns, the kernel's register tile).
#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cpu/simd/simd_kernels.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/threaded_ops.h"
#include "kernels/op_validate.h"
#include "pagedkv/kernels/cpu_ops.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cpu {
namespace {

constexpr int64_t kColumnGroup = 4;

LinearArgs LmHeadAsLinear(const LmHeadArgs& args) {
  LinearArgs linear;
  linear.x = args.hidden;
  linear.w = args.weight;
  linear.y = args.logits;
  linear.m = args.num_rows;
  linear.n = args.vocab_size;
  linear.k = args.d_model;
  return linear;
}

}  // namespace

absl::Status Linear(const LinearArgs& args, ThreadPool* pool) {
  PAGEDKV_RETURN_IF_ERROR(ValidateLinear(args));
  const int64_t groups = (args.n + kColumnGroup - 1) / kColumnGroup;
  // In double: m * k of a caller's (validated but unchecked-size) shape may not fit int64.
  const double work_per_group =
      static_cast<double>(args.m) * static_cast<double>(args.k) * static_cast<double>(kColumnGroup);
  ParallelFor(pool, groups, MinItemsPerRange(work_per_group), [&](int64_t begin, int64_t end) {
    simd::LinearColumns(args, begin * kColumnGroup, std::min(args.n, end * kColumnGroup));
  });
  return absl::OkStatus();
}

absl::Status LmHead(const LmHeadArgs& args, ThreadPool* pool) {
  PAGEDKV_RETURN_IF_ERROR(ValidateLmHead(args));
  return Linear(LmHeadAsLinear(args), pool);
}

absl::Status Linear(const LinearArgs& args) { return Linear(args, nullptr); }

absl::Status LmHead(const LmHeadArgs& args) { return LmHead(args, nullptr); }

}  // namespace pagedkv::cpu
