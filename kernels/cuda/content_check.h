// Copyright 2026 The pagedkv Authors.
//
// Device-side content checks of the CUDA launchers. A small kernel applies the PAGEDKV_HD
// predicates of kernels/content_checks.h to the device arrays and keeps the smallest bad-entry
// word (pagedkv/kernels/bad_entry.h; the minimum FirstBadEntry computes on the host).
// ContentCheck::kValidate: one 16-byte device-to-host copy and a stream synchronisation bring
// back its verdict before the launcher enqueues anything that writes. Cost: one tiny kernel plus
// one round trip to the host (typically 10-30 us, dominated by the synchronisation), paid by every
// validated call. On a bad entry the arrays are copied to the host and the CPU backend's check
// words the InvalidArgument message, so both backends report the same first bad entry.
// ContentCheck::kDeferred: a one-thread kernel copies the word into the deferred flag unless the
// flag already holds one; nothing waits, and the function returns OK whatever the contents.
// REQUIRES for every function: the op's size checks (kernels/op_validate.h) passed, the
// workspace mutex is held, options.check is kValidate or kDeferred.
#ifndef PAGEDKV_KERNELS_CUDA_CONTENT_CHECK_H_
#define PAGEDKV_KERNELS_CUDA_CONTENT_CHECK_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pagedkv/kernels/cuda_ops.h"
#include "pagedkv/kernels/cuda_workspace.h"
#include "pagedkv/kernels/op_args.h"

namespace pagedkv::cuda {

absl::Status CheckRopeOnDevice(const RopeArgs& args, cudaStream_t stream, Workspace& workspace,
                               const LaunchOptions& options);
absl::Status CheckReshapeAndCacheOnDevice(const ReshapeAndCacheArgs& args, cudaStream_t stream,
                                          Workspace& workspace, const LaunchOptions& options);
absl::Status CheckReRotateOnDevice(const ReRotateArgs& args, cudaStream_t stream,
                                   Workspace& workspace, const LaunchOptions& options);
absl::Status CheckEmbeddingGatherOnDevice(const EmbeddingGatherArgs& args, cudaStream_t stream,
                                          Workspace& workspace, const LaunchOptions& options);
// Returns the largest kv_len of the batch (used to size split-K partitions) with kValidate; -1
// (unknown) with kDeferred.
absl::StatusOr<int32_t> CheckPagedAttentionOnDevice(const PagedAttentionArgs& args,
                                                    cudaStream_t stream, Workspace& workspace,
                                                    const LaunchOptions& options);
absl::Status CheckSampleOnDevice(const SampleArgs& args, cudaStream_t stream, Workspace& workspace,
                                 const LaunchOptions& options);

}  // namespace pagedkv::cuda

#endif  // PAGEDKV_KERNELS_CUDA_CONTENT_CHECK_H_
