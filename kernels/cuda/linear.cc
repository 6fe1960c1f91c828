// Copyright 2026 The pagedkv Authors.
//
// CUDA Linear and LM head through cuBLAS. Row-major y[m, n] = x[m, k] W[n, k]^T is, in cuBLAS's
// column-major terms, Y^T (n x m) = W^T^T ... i.e. SGEMM(op(A) = T on W (k x n col-major),
// op(B) = N on X^T (k x m col-major)).
#include <climits>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/op_validate.h"
#include "pagedkv/kernels/cuda_ops.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cuda {

absl::Status Linear(const LinearArgs& args, cublasHandle_t cublas, cudaStream_t stream) {
  PAGEDKV_RETURN_IF_ERROR(ValidateLinear(args));
  if (cublas == nullptr) return absl::InvalidArgumentError("Linear: cublas handle is null");
  if (args.m > INT_MAX || args.n > INT_MAX || args.k > INT_MAX) {
    return absl::InvalidArgumentError("Linear: m, n and k must fit int for cuBLAS");
  }
  if (args.m == 0) return absl::OkStatus();
  const float alpha = 1.0f;
  const float beta = args.accumulate ? 1.0f : 0.0f;
  const int m = static_cast<int>(args.m);
  const int n = static_cast<int>(args.n);
  const int k = static_cast<int>(args.k);
  PAGEDKV_CUBLAS_RETURN_IF_ERROR(cublasSetStream(cublas, stream));
  PAGEDKV_CUBLAS_RETURN_IF_ERROR(cublasSgemm(cublas, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha,
                                             args.w, k, args.x, k, &beta, args.y, n));
  return absl::OkStatus();
}

absl::Status LmHead(const LmHeadArgs& args, cublasHandle_t cublas, cudaStream_t stream) {
  PAGEDKV_RETURN_IF_ERROR(ValidateLmHead(args));
  LinearArgs linear;
  linear.x = args.hidden;
  linear.w = args.weight;
  linear.y = args.logits;
  linear.m = args.num_rows;
  linear.n = args.vocab_size;
  linear.k = args.d_model;
  return Linear(linear, cublas, stream);
}

}  // namespace pagedkv::cuda
