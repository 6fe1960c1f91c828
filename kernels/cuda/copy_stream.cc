// Copyright 2026 The pagedkv Authors.
#include "kernels/cuda/copy_stream.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_check.h"

namespace pagedkv::cuda {

absl::StatusOr<std::unique_ptr<CopyStream>> CopyStream::Create(cudaStream_t compute) {
  std::unique_ptr<CopyStream> s(new CopyStream(compute));
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s->copy_, cudaStreamNonBlocking));
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&s->loads_done_, cudaEventDisableTiming));
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&s->compute_done_, cudaEventDisableTiming));
  return s;
}

CopyStream::~CopyStream() {
  if (copy_ != nullptr) cudaStreamSynchronize(copy_);
  if (loads_done_ != nullptr) cudaEventDestroy(loads_done_);
  if (compute_done_ != nullptr) cudaEventDestroy(compute_done_);
  if (copy_ != nullptr) cudaStreamDestroy(copy_);
}

absl::StatusOr<void*> CopyStream::AllocateStaging(size_t bytes) {
  void* host = nullptr;
  if (cudaHostAlloc(&host, bytes == 0 ? 1 : bytes, cudaHostAllocDefault) != cudaSuccess) {
    cudaGetLastError();
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", bytes, " bytes of page-locked host memory for staging"));
  }
  return host;
}

void CopyStream::FreeStaging(void* host) {
  if (host == nullptr) return;
  cudaStreamSynchronize(copy_);  // no copy may still read or write it
  cudaFreeHost(host);
}

absl::Status CopyStream::Load(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, copy_));
  return absl::OkStatus();
}

absl::Status CopyStream::FenceLoads() {
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaEventRecord(loads_done_, copy_));
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(compute_, loads_done_, 0));
  return absl::OkStatus();
}

absl::Status CopyStream::Store(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  // After every op queued on the compute stream so far (the step that wrote the block).
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaEventRecord(compute_done_, compute_));
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(copy_, compute_done_, 0));
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, copy_));
  return absl::OkStatus();
}

absl::Status CopyStream::Synchronize() {
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(copy_));
  return absl::OkStatus();
}

}  // namespace pagedkv::cuda
