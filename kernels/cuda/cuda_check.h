// Copyright 2026 The pagedkv Authors.
//
// absl::Status wrappers for CUDA runtime and cuBLAS errors. Every CUDA call in the backend goes
// through one of these, and every kernel launch is followed by PAGEDKV_CUDA_CHECK_LAUNCH.
//
// Example:
//   PAGEDKV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
//   MyKernel<<<grid, block, 0, stream>>>(args);
//   PAGEDKV_CUDA_CHECK_LAUNCH("MyKernel");
#ifndef PAGEDKV_KERNELS_CUDA_CUDA_CHECK_H_
#define PAGEDKV_KERNELS_CUDA_CUDA_CHECK_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace pagedkv::cuda {

// OK for cudaSuccess, else Internal with the call site and CUDA's message.
inline absl::Status CudaStatus(cudaError_t error, const char* what, const char* file, int line) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, " failed at ", file, ":", line, ": ",
                                          cudaGetErrorName(error), " (", cudaGetErrorString(error),
                                          ")"));
}

// OK for CUBLAS_STATUS_SUCCESS, else Internal with the call site and cuBLAS's status name.
inline absl::Status CublasStatus(cublasStatus_t status, const char* what, const char* file,
                                 int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, " failed at ", file, ":", line, ": ",
                                          cublasGetStatusName(status), " (",
                                          cublasGetStatusString(status), ")"));
}

// Number of visible CUDA devices; 0 when none (or no driver), never an error.
inline int VisibleDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return count;
}

}  // namespace pagedkv::cuda

#define PAGEDKV_CUDA_RETURN_IF_ERROR(expr)                              \
  do {                                                                  \
    ::absl::Status pagedkv_cuda_status_ =                               \
        ::pagedkv::cuda::CudaStatus((expr), #expr, __FILE__, __LINE__); \
    if (!pagedkv_cuda_status_.ok()) return pagedkv_cuda_status_;        \
  } while (0)

#define PAGEDKV_CUBLAS_RETURN_IF_ERROR(expr)                              \
  do {                                                                    \
    ::absl::Status pagedkv_cuda_status_ =                                 \
        ::pagedkv::cuda::CublasStatus((expr), #expr, __FILE__, __LINE__); \
    if (!pagedkv_cuda_status_.ok()) return pagedkv_cuda_status_;          \
  } while (0)

// Checks the launch (configuration) error of the kernel just launched; `kernel_name` names it in
// the message.
#define PAGEDKV_CUDA_CHECK_LAUNCH(kernel_name)                             \
  do {                                                                     \
    ::absl::Status pagedkv_cuda_status_ = ::pagedkv::cuda::CudaStatus(     \
        cudaGetLastError(), "launch of " kernel_name, __FILE__, __LINE__); \
    if (!pagedkv_cuda_status_.ok()) return pagedkv_cuda_status_;           \
  } while (0)

#endif  // PAGEDKV_KERNELS_CUDA_CUDA_CHECK_H_
