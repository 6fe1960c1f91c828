// Copyright 2026 The pagedkv Authors.
//
// CUDA GatherRows: one thread block per gathered row, converting each element to fp32 with the
// PAGEDKV_HD LoadElement of pagedkv/kernels/dtype_convert.h (the CPU op uses the same function).
// With ContentCheck::kValidate a small kernel first flags any row index outside the source; its
// verdict comes back through the workspace's check words (one 8-byte copy and one
// synchronisation), and on a bad entry the indices are copied to the host so the message names
// the same first bad entry as the CPU backend.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/gather_rows_checks.h"
#include "pagedkv/kernels/cuda_ops.h"
#include "pagedkv/kernels/cuda_workspace.h"
#include "pagedkv/kernels/dtype_convert.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int64_t kMaxCheckBlocks = 1024;

__global__ void GatherRowsKernel(GatherRowsArgs a, int64_t stride) {
  const int64_t i = blockIdx.x;
  const int64_t row = a.rows[i];
  if (!GatherRowValid(row, a.num_src_rows)) return;  // only reachable with ContentCheck::kTrusted
  float* out = a.out + i * a.width;
  for (int64_t e = threadIdx.x; e < a.width; e += blockDim.x) {
    out[e] = LoadElement(a.src, a.src_dtype, row * stride + e);
  }
}

__global__ void CheckGatherRowsKernel(const int64_t* rows, int64_t n, int64_t num_src_rows,
                                      unsigned long long* words) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    if (!GatherRowValid(rows[i], num_src_rows)) atomicOr(&words[0], 1ull);
  }
}

// Runs the check kernel; on a flagged entry words the error from a host copy of the indices.
// REQUIRES: the workspace mutex is held.
absl::Status CheckRowsOnDevice(const GatherRowsArgs& args, cudaStream_t stream,
                               Workspace& workspace) {
  // This call's own use of the check words: word 0 != 0 when some row is out of range.
  PAGEDKV_ASSIGN_OR_RETURN(uint64_t * words, workspace.DeviceCheckWords());
  const size_t bytes = Workspace::kCheckWords * sizeof(uint64_t);
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(words, 0, bytes, stream));
  const auto blocks = static_cast<unsigned>(
      std::clamp<int64_t>((args.num_rows + kThreads - 1) / kThreads, 1, kMaxCheckBlocks));
  CheckGatherRowsKernel<<<blocks, kThreads, 0, stream>>>(
      args.rows, args.num_rows, args.num_src_rows, reinterpret_cast<unsigned long long*>(words));
  PAGEDKV_CUDA_CHECK_LAUNCH("CheckGatherRowsKernel");
  uint64_t* host_words = workspace.HostCheckWords();
  PAGEDKV_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host_words, words, bytes, cudaMemcpyDeviceToHost, stream));
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  if (host_words[0] == 0) return absl::OkStatus();
  std::vector<int64_t> rows(static_cast<size_t>(args.num_rows));
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
      rows.data(), args.rows, rows.size() * sizeof(int64_t), cudaMemcpyDeviceToHost, stream));
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  GatherRowsArgs host = args;
  host.rows = rows.data();
  const absl::Status verdict = CheckGatherRowsContents(host);
  if (!verdict.ok()) return verdict;
  return absl::InternalError(
      "GatherRows: the device content check rejected an input the host check accepts");
}

}  // namespace

absl::Status GatherRows(const GatherRowsArgs& args, cudaStream_t stream,
                        const LaunchOptions& options) {
  PAGEDKV_RETURN_IF_ERROR(ValidateGatherRows(args));
  if (args.num_rows == 0) return absl::OkStatus();
  if (args.num_rows > INT32_MAX) {
    return absl::InvalidArgumentError("GatherRows: num_rows must be < 2^31");
  }
  if (options.check == ContentCheck::kDeferred) {
    return absl::InvalidArgumentError(
        "GatherRows: ContentCheck::kDeferred is not supported; use kValidate or kTrusted");
  }
  if (options.check == ContentCheck::kValidate) {
    PAGEDKV_ASSIGN_OR_RETURN(Workspace * workspace, WorkspaceOrDefault(options.workspace, stream));
    absl::MutexLock lock(&workspace->mutex());
    PAGEDKV_RETURN_IF_ERROR(CheckRowsOnDevice(args, stream, *workspace));
  }
  GatherRowsKernel<<<static_cast<unsigned>(args.num_rows), kThreads, 0, stream>>>(
      args, GatherSrcStride(args));
  PAGEDKV_CUDA_CHECK_LAUNCH("GatherRowsKernel");
  return absl::OkStatus();
}

}  // namespace pagedkv::cuda
