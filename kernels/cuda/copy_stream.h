// Copyright 2026 The pagedkv Authors.
//
// CopyStream: the CUDA plugin's copy stream for KV-tier loads and stores, beside a backend's
// compute stream (the copy-stream extension of kernels/backend_plugin_abi.h). Loads are
// cudaMemcpyAsync host -> device on the copy stream; FenceLoads records an event there and makes
// the compute stream wait for it (cudaStreamWaitEvent), so the forward pass queued next reads the
// loaded blocks while the host goes on. Stores first record an event on the compute stream and
// make the copy stream wait for it, so they read what the step wrote, then copy device -> host on
// the copy stream. Staging buffers are page-locked (cudaHostAlloc), so the copies overlap
// compute.
//
// Compiled with -DPAGEDKV_CUDA=ON; not run here (no GPU) until a GPU check runs
// scripts/gpu_check.sh.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<CopyStream> copy, CopyStream::Create(compute));
//   PAGEDKV_RETURN_IF_ERROR(copy->Load(device_page, staged_value, bytes));
//   PAGEDKV_RETURN_IF_ERROR(copy->FenceLoads());   // then queue the forward pass on `compute`
//
// Not thread-safe (one engine thread drives a backend).
#ifndef PAGEDKV_KERNELS_CUDA_COPY_STREAM_H_
#define PAGEDKV_KERNELS_CUDA_COPY_STREAM_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pagedkv::cuda {

class CopyStream {
 public:
  // A non-blocking copy stream and its two events, on the current device. REQUIRES: `compute`
  // outlives the result.
  static absl::StatusOr<std::unique_ptr<CopyStream>> Create(cudaStream_t compute);
  ~CopyStream();  // waits for the copy stream, then destroys it and the events
  CopyStream(const CopyStream&) = delete;
  CopyStream& operator=(const CopyStream&) = delete;

  // Page-locked host memory; FreeStaging waits for the copy stream first.
  absl::StatusOr<void*> AllocateStaging(size_t bytes);
  void FreeStaging(void* host);
  // REQUIRES: `src` unchanged until Synchronize.
  absl::Status Load(void* dst, const void* src, size_t bytes);
  absl::Status FenceLoads();
  // REQUIRES: `dst` read only after Synchronize.
  absl::Status Store(void* dst, const void* src, size_t bytes);
  absl::Status Synchronize();

 private:
  explicit CopyStream(cudaStream_t compute) : compute_(compute) {}

  cudaStream_t compute_;
  cudaStream_t copy_ = nullptr;
  cudaEvent_t loads_done_ = nullptr;    // recorded on copy_ by FenceLoads
  cudaEvent_t compute_done_ = nullptr;  // recorded on compute_ by Store
};

}  // namespace pagedkv::cuda

#endif  // PAGEDKV_KERNELS_CUDA_COPY_STREAM_H_
