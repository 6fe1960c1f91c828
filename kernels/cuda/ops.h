// Copyright 2026 The pagedkv Authors.
//
// CUDA backend: the same ops and argument structs as pagedkv::cpu (kernels/cpu/ops.h), over
// device pointers, enqueued on `stream` (asynchronous; errors of the launch itself are returned,
// errors during execution surface at the next synchronising call). Launchers validate sizes, head
// dims and dtypes (InvalidArgument) but cannot read device-side contents: out-of-range slots,
// token ids and block ids are skipped by the kernels instead of being reported, so validate
// those on the host (the CPU backend does) when they come from untrusted input.
// Only built when PAGEDKV_HAVE_CUDA.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(auto cublas, pagedkv::cuda::CublasHandle::Create());
//   PAGEDKV_RETURN_IF_ERROR(pagedkv::cuda::Linear(args, cublas.get(), stream));
//   PAGEDKV_RETURN_IF_ERROR(pagedkv::cuda::PagedAttention(attn, stream));
#ifndef PAGEDKV_KERNELS_CUDA_OPS_H_
#define PAGEDKV_KERNELS_CUDA_OPS_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "kernels/op_args.h"

namespace pagedkv::cuda {

// y = x W^T (+ y) with cuBLAS SGEMM (fp32 math, no TF32).
absl::Status Linear(const LinearArgs& args, cublasHandle_t cublas, cudaStream_t stream = nullptr);
// logits = hidden W^T via Linear.
absl::Status LmHead(const LmHeadArgs& args, cublasHandle_t cublas, cudaStream_t stream = nullptr);
// out[t] = table[token_ids[t]]; rows of out-of-range ids are left unwritten.
absl::Status EmbeddingGather(const EmbeddingGatherArgs& args, cudaStream_t stream = nullptr);
// Row-wise RMSNorm.
absl::Status RmsNorm(const RmsNormArgs& args, cudaStream_t stream = nullptr);
// silu(gate) * up.
absl::Status SwiGlu(const SwiGluArgs& args, cudaStream_t stream = nullptr);
// Rotates q and k in place by per-token positions.
absl::Status Rope(const RopeArgs& args, cudaStream_t stream = nullptr);
// Rotates q (in place) and k, writes k and v to slot_mapping slots (-1 and out-of-range skipped).
absl::Status ReshapeAndCache(const ReshapeAndCacheArgs& args, cudaStream_t stream = nullptr);
// Re-rotates cached keys from old to new positions and copies values (out-of-range skipped).
absl::Status ReRotate(const ReRotateArgs& args, cudaStream_t stream = nullptr);
// Causal paged attention over a flat batch of query tokens (keys in out-of-range blocks skipped).
absl::Status PagedAttention(const PagedAttentionArgs& args, cudaStream_t stream = nullptr);
// One token per sequence: greedy, temperature, top-p, seeded (same rule and random stream as
// the CPU backend; Thrust computes each row's max / argmax).
absl::Status Sample(const SampleArgs& args, cudaStream_t stream = nullptr);

}  // namespace pagedkv::cuda

#endif  // PAGEDKV_KERNELS_CUDA_OPS_H_
