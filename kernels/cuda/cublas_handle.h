// Copyright 2026 The pagedkv Authors.
//
// RAII cuBLAS handle for the CUDA plugin and code that calls the kernels directly. Move-only;
// creation failures are an absl::Status.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(pagedkv::cuda::CublasHandle cublas,
//                            pagedkv::cuda::CublasHandle::Create());
//   PAGEDKV_RETURN_IF_ERROR(pagedkv::cuda::Linear(args, cublas.get(), stream));
#ifndef PAGEDKV_KERNELS_CUDA_CUBLAS_HANDLE_H_
#define PAGEDKV_KERNELS_CUDA_CUBLAS_HANDLE_H_

#include <cublas_v2.h>

#include <utility>

#include "absl/status/statusor.h"
#include "kernels/cuda/cuda_check.h"

namespace pagedkv::cuda {

// Owns a cuBLAS handle.
class CublasHandle {
 public:
  CublasHandle() = default;
  ~CublasHandle() {
    if (handle_ != nullptr) cublasDestroy(handle_);
  }
  CublasHandle(CublasHandle&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  CublasHandle& operator=(CublasHandle&& other) noexcept {
    if (this != &other) {
      if (handle_ != nullptr) cublasDestroy(handle_);
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;

  static absl::StatusOr<CublasHandle> Create() {
    CublasHandle out;
    PAGEDKV_CUBLAS_RETURN_IF_ERROR(cublasCreate(&out.handle_));
    return out;
  }
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

}  // namespace pagedkv::cuda

#endif  // PAGEDKV_KERNELS_CUDA_CUBLAS_HANDLE_H_
