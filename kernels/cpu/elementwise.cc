// Copyright 2026 The pagedkv Authors.
//
// CPU EmbeddingGather, RmsNorm and SwiGlu.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "kernels/content_checks.h"
#include "kernels/elementwise_math.h"
#include "kernels/op_validate.h"
#include "pagedkv/kernels/cpu_ops.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cpu {

absl::Status EmbeddingGather(const EmbeddingGatherArgs& args) {
  PAGEDKV_RETURN_IF_ERROR(ValidateEmbeddingGather(args));
  PAGEDKV_RETURN_IF_ERROR(CheckEmbeddingGatherContents(args));
  const size_t row_bytes = static_cast<size_t>(args.dim) * sizeof(float);
  for (int64_t t = 0; t < args.num_tokens; ++t) {
    std::memcpy(args.out + t * args.dim, args.table + args.token_ids[t] * args.dim, row_bytes);
  }
  return absl::OkStatus();
}

absl::Status RmsNorm(const RmsNormArgs& args) {
  PAGEDKV_RETURN_IF_ERROR(ValidateRmsNorm(args));
  for (int64_t r = 0; r < args.num_rows; ++r) {
    const float* x = args.x + r * args.dim;
    float* out = args.out + r * args.dim;
    float partial[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    int64_t i = 0;
    for (; i + 4 <= args.dim; i += 4) {
      for (int l = 0; l < 4; ++l) partial[l] += x[i + l] * x[i + l];
    }
    float sum_sq = (partial[0] + partial[1]) + (partial[2] + partial[3]);
    for (; i < args.dim; ++i) sum_sq += x[i] * x[i];
    const float inv_rms = RmsNormInverse(sum_sq, args.dim, args.eps);
    for (int64_t d = 0; d < args.dim; ++d) out[d] = x[d] * inv_rms * args.weight[d];
  }
  return absl::OkStatus();
}

absl::Status SwiGlu(const SwiGluArgs& args) {
  PAGEDKV_RETURN_IF_ERROR(ValidateSwiGlu(args));
  const int64_t gate_stride = args.gate_stride == 0 ? args.dim : args.gate_stride;
  const int64_t up_stride = args.up_stride == 0 ? args.dim : args.up_stride;
  for (int64_t r = 0; r < args.num_rows; ++r) {
    const float* gate = args.gate + r * gate_stride;
    const float* up = args.up + r * up_stride;
    float* out = args.out + r * args.dim;
    for (int64_t d = 0; d < args.dim; ++d) out[d] = SwiGluValue(gate[d], up[d]);
  }
  return absl::OkStatus();
}

}  // namespace pagedkv::cpu
