// Copyright 2026 The pagedkv Authors.
//
// CUDA EmbeddingGather, RmsNorm and SwiGlu over the PAGEDKV_HD math of kernels/elementwise_math.h.
#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "kernels/content_checks.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/content_check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/elementwise_math.h"
#include "kernels/op_validate.h"
#include "pagedkv/kernels/cuda_ops.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void EmbeddingGatherKernel(EmbeddingGatherArgs a, bool vectorised) {
  const int64_t t = blockIdx.x;
  const int32_t id = a.token_ids[t];
  if (!TokenIdValid(id, a.vocab_size)) return;  // only reachable with ContentCheck::kTrusted
  const float* src = a.table + static_cast<int64_t>(id) * a.dim;
  float* dst = a.out + t * a.dim;
  if (vectorised) {
    const float4* src4 = reinterpret_cast<const float4*>(src);
    float4* dst4 = reinterpret_cast<float4*>(dst);
    for (int64_t i = threadIdx.x; i < a.dim / 4; i += blockDim.x) dst4[i] = src4[i];
  } else {
    for (int64_t i = threadIdx.x; i < a.dim; i += blockDim.x) dst[i] = src[i];
  }
}

__global__ void RmsNormKernel(RmsNormArgs a) {
  __shared__ float scratch[32];
  const float* x = a.x + static_cast<int64_t>(blockIdx.x) * a.dim;
  float* out = a.out + static_cast<int64_t>(blockIdx.x) * a.dim;
  float sum_sq = 0.0f;
  for (int64_t i = threadIdx.x; i < a.dim; i += blockDim.x) sum_sq += x[i] * x[i];
  sum_sq = BlockSum(sum_sq, scratch);
  const float inv_rms = RmsNormInverse(sum_sq, a.dim, a.eps);
  for (int64_t i = threadIdx.x; i < a.dim; i += blockDim.x) out[i] = x[i] * inv_rms * a.weight[i];
}

__global__ void SwiGluKernel(SwiGluArgs a, int64_t gate_stride, int64_t up_stride) {
  const int64_t total = a.num_rows * a.dim;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / a.dim;
    const int64_t d = i % a.dim;
    a.out[i] = SwiGluValue(a.gate[r * gate_stride + d], a.up[r * up_stride + d]);
  }
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

absl::Status EmbeddingGather(const EmbeddingGatherArgs& args, cudaStream_t stream,
                             const LaunchOptions& options) {
  PAGEDKV_RETURN_IF_ERROR(ValidateEmbeddingGather(args));
  if (args.num_tokens == 0) return absl::OkStatus();
  if (args.num_tokens > INT32_MAX) {
    return absl::InvalidArgumentError("EmbeddingGather: num_tokens must be < 2^31");
  }
  if (options.check != ContentCheck::kTrusted) {
    PAGEDKV_ASSIGN_OR_RETURN(Workspace * workspace, WorkspaceOrDefault(options.workspace, stream));
    absl::MutexLock lock(&workspace->mutex());
    PAGEDKV_RETURN_IF_ERROR(CheckEmbeddingGatherOnDevice(args, stream, *workspace, options));
  }
  // float4 copies when every row starts 16-byte aligned, scalar copies otherwise.
  const bool vectorised = args.dim % 4 == 0 && Aligned16(args.table) && Aligned16(args.out);
  EmbeddingGatherKernel<<<static_cast<unsigned>(args.num_tokens), kThreads, 0, stream>>>(
      args, vectorised);
  PAGEDKV_CUDA_CHECK_LAUNCH("EmbeddingGatherKernel");
  return absl::OkStatus();
}

absl::Status RmsNorm(const RmsNormArgs& args, cudaStream_t stream) {
  PAGEDKV_RETURN_IF_ERROR(ValidateRmsNorm(args));
  if (args.num_rows == 0) return absl::OkStatus();
  if (args.num_rows > INT32_MAX) return absl::InvalidArgumentError("RmsNorm: too many rows");
  RmsNormKernel<<<static_cast<unsigned>(args.num_rows), kThreads, 0, stream>>>(args);
  PAGEDKV_CUDA_CHECK_LAUNCH("RmsNormKernel");
  return absl::OkStatus();
}

absl::Status SwiGlu(const SwiGluArgs& args, cudaStream_t stream) {
  PAGEDKV_RETURN_IF_ERROR(ValidateSwiGlu(args));
  const int64_t total = args.num_rows * args.dim;
  if (total == 0) return absl::OkStatus();
  const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, 65536);
  SwiGluKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      args, args.gate_stride == 0 ? args.dim : args.gate_stride,
      args.up_stride == 0 ? args.dim : args.up_stride);
  PAGEDKV_CUDA_CHECK_LAUNCH("SwiGluKernel");
  return absl::OkStatus();
}

}  // namespace pagedkv::cuda
