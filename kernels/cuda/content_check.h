// Copyright 2026 The pagedkv Authors.
//
// Device-side content checks of the CUDA launchers (ContentCheck::kValidate): a small kernel
// applies the PAGEDKV_HD predicates of kernels/content_checks.h to the device arrays, then one
// 8-byte device-to-host copy and a stream synchronisation bring back its verdict before the
// launcher enqueues anything that writes. Cost: one tiny kernel plus one round trip to the host
// (typically 10-30 us, dominated by the synchronisation), paid by every validated call. On a bad
// entry the arrays are copied to the host and the CPU backend's check words the InvalidArgument
// message, so both backends report the same first bad entry.
// REQUIRES for every function: the op's size checks (kernels/op_validate.h) passed, the
// workspace mutex is held.
#ifndef PAGEDKV_KERNELS_CUDA_CONTENT_CHECK_H_
#define PAGEDKV_KERNELS_CUDA_CONTENT_CHECK_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pagedkv/kernels/cuda_workspace.h"
#include "pagedkv/kernels/op_args.h"

namespace pagedkv::cuda {

absl::Status CheckRopeOnDevice(const RopeArgs& args, cudaStream_t stream, Workspace& workspace);
absl::Status CheckReshapeAndCacheOnDevice(const ReshapeAndCacheArgs& args, cudaStream_t stream,
                                          Workspace& workspace);
absl::Status CheckReRotateOnDevice(const ReRotateArgs& args, cudaStream_t stream,
                                   Workspace& workspace);
absl::Status CheckEmbeddingGatherOnDevice(const EmbeddingGatherArgs& args, cudaStream_t stream,
                                          Workspace& workspace);
// Returns the largest kv_len of the batch (used to size split-K partitions).
absl::StatusOr<int32_t> CheckPagedAttentionOnDevice(const PagedAttentionArgs& args,
                                                    cudaStream_t stream, Workspace& workspace);
absl::Status CheckSampleOnDevice(const SampleArgs& args, cudaStream_t stream, Workspace& workspace);

}  // namespace pagedkv::cuda

#endif  // PAGEDKV_KERNELS_CUDA_CONTENT_CHECK_H_
