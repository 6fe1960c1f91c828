// Copyright 2026 The pagedkv Authors.
//
// Argument checks shared by both backends: pointers, sizes, head dims, dtypes, head counts. They
// read no array contents, so the CUDA launchers can call them on device pointers; the CPU backend
// additionally checks contents (slots, positions, block ids) in kernels/cpu.
// Each returns OK or InvalidArgument naming the op and the field to fix.
#ifndef PAGEDKV_KERNELS_OP_VALIDATE_H_
#define PAGEDKV_KERNELS_OP_VALIDATE_H_

#include "absl/status/status.h"
#include "pagedkv/export.h"
#include "pagedkv/kernels/op_args.h"

namespace pagedkv {

PAGEDKV_EXPORT absl::Status ValidateLayout(const char* op, const PagedKvLayout& cache);
PAGEDKV_EXPORT absl::Status ValidateRopeView(const char* op, const RopeTableView& rope);
PAGEDKV_EXPORT absl::Status ValidateLinear(const LinearArgs& args);
PAGEDKV_EXPORT absl::Status ValidateQuantLinear(const QuantLinearArgs& args);
PAGEDKV_EXPORT absl::Status ValidateEmbeddingGather(const EmbeddingGatherArgs& args);
PAGEDKV_EXPORT absl::Status ValidateRmsNorm(const RmsNormArgs& args);
PAGEDKV_EXPORT absl::Status ValidateSwiGlu(const SwiGluArgs& args);
PAGEDKV_EXPORT absl::Status ValidateLmHead(const LmHeadArgs& args);
PAGEDKV_EXPORT absl::Status ValidateRope(const RopeArgs& args);
PAGEDKV_EXPORT absl::Status ValidateReshapeAndCache(const ReshapeAndCacheArgs& args);
PAGEDKV_EXPORT absl::Status ValidateReRotate(const ReRotateArgs& args);
PAGEDKV_EXPORT absl::Status ValidatePagedAttention(const PagedAttentionArgs& args);
PAGEDKV_EXPORT absl::Status ValidateSample(const SampleArgs& args);

}  // namespace pagedkv

#endif  // PAGEDKV_KERNELS_OP_VALIDATE_H_
