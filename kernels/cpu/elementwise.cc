// Copyright 2026 The pagedkv Authors.
//
// CPU EmbeddingGather, RmsNorm and SwiGlu (vector rows from simd/elementwise_simd.cc, split over
// threads by rows).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "kernels/content_checks.h"
#include "kernels/cpu/simd/simd_kernels.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/threaded_ops.h"
#include "kernels/op_validate.h"
#include "pagedkv/kernels/cpu_ops.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cpu {
namespace {

// Rows of `dim` elements that make up kMinWorkPerThread elements (at least one).
int64_t MinRowsPerThread(int64_t dim) {
  return std::max<int64_t>(1, kMinWorkPerThread / std::max<int64_t>(dim, 1));
}

}  // namespace

absl::Status EmbeddingGather(const EmbeddingGatherArgs& args) {
  PAGEDKV_RETURN_IF_ERROR(ValidateEmbeddingGather(args));
  PAGEDKV_RETURN_IF_ERROR(CheckEmbeddingGatherContents(args));
  const size_t row_bytes = static_cast<size_t>(args.dim) * sizeof(float);
  for (int64_t t = 0; t < args.num_tokens; ++t) {
    std::memcpy(args.out + t * args.dim, args.table + args.token_ids[t] * args.dim, row_bytes);
  }
  return absl::OkStatus();
}

absl::Status RmsNorm(const RmsNormArgs& args, ThreadPool* pool) {
  PAGEDKV_RETURN_IF_ERROR(ValidateRmsNorm(args));
  ParallelFor(pool, args.num_rows, MinRowsPerThread(args.dim),
              [&](int64_t begin, int64_t end) { simd::RmsNormRows(args, begin, end); });
  return absl::OkStatus();
}

absl::Status SwiGlu(const SwiGluArgs& args, ThreadPool* pool) {
  PAGEDKV_RETURN_IF_ERROR(ValidateSwiGlu(args));
  ParallelFor(pool, args.num_rows, MinRowsPerThread(args.dim),
              [&](int64_t begin, int64_t end) { simd::SwiGluRows(args, begin, end); });
  return absl::OkStatus();
}

absl::Status RmsNorm(const RmsNormArgs& args) { return RmsNorm(args, nullptr); }

absl::Status SwiGlu(const SwiGluArgs& args) { return SwiGlu(args, nullptr); }

}  // namespace pagedkv::cpu
