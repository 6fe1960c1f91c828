// Copyright 2026 The pagedkv Authors.
//
// QuantLinear: validation, then output columns split over the pool in groups of 4 (the kernel's
// tile width).
#include "kernels/cpu/quant_linear.h"

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
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

absl::Status QuantEmbeddingGather(const QuantEmbeddingGatherArgs& a) {
  const bool block_type = a.table_type == WeightType::kQ4_1 || a.table_type == WeightType::kQ8_0;
  if (a.table == nullptr || a.token_ids == nullptr || a.out == nullptr || a.num_tokens < 0 ||
      a.vocab_size <= 0 || a.dim <= 0 || !block_type || a.dim % kQuantBlockValues != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "QuantEmbeddingGather: needs table, token_ids and out, num_tokens >= 0, vocab_size > 0, "
        "a block type and dim a positive multiple of ",
        kQuantBlockValues, " (dim = ", a.dim, ")"));
  }
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    if (a.token_ids[t] < 0 || a.token_ids[t] >= a.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("QuantEmbeddingGather: token id ",
                                                     a.token_ids[t], " at ", t, " is outside [0, ",
                                                     a.vocab_size, ")"));
    }
  }
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    const unsigned char* row = QuantRow(a.table, a.table_type, a.dim, a.token_ids[t]);
    float* out = a.out + t * a.dim;
    for (int64_t i = 0; i < a.dim; ++i) out[i] = QuantValue(a.table_type, row, i);
  }
  return absl::OkStatus();
}

}  // namespace pagedkv::cpu
