// Copyright 2026 The pagedkv Authors.
//
// Argument checks shared by both backends: pointers, sizes, head dims, dtypes, head counts. They
// read no array contents, so the CUDA launchers can call them on device pointers; the CPU backend
// additionally checks contents (slots, positions, block ids) in kernels/cpu.
// Each returns OK or InvalidArgument naming the op and the field to fix.
#ifndef PAGEDKV_KERNELS_OP_VALIDATE_H_
#define PAGEDKV_KERNELS_OP_VALIDATE_H_

#include "absl/status/status.h"
#include "pagedkv/kernels/op_args.h"

namespace pagedkv {

absl::Status ValidateLayout(const char* op, const PagedKvLayout& cache);
absl::Status ValidateRopeView(const char* op, const RopeTableView& rope);
absl::Status ValidateLinear(const LinearArgs& args);
absl::Status ValidateEmbeddingGather(const EmbeddingGatherArgs& args);
absl::Status ValidateRmsNorm(const RmsNormArgs& args);
absl::Status ValidateSwiGlu(const SwiGluArgs& args);
absl::Status ValidateLmHead(const LmHeadArgs& args);
absl::Status ValidateRope(const RopeArgs& args);
absl::Status ValidateReshapeAndCache(const ReshapeAndCacheArgs& args);
absl::Status ValidateReRotate(const ReRotateArgs& args);
absl::Status ValidatePagedAttention(const PagedAttentionArgs& args);
absl::Status ValidateSample(const SampleArgs& args);

}  // namespace pagedkv

#endif  // PAGEDKV_KERNELS_OP_VALIDATE_H_
