// Copyright 2026 The pagedkv Authors.
//
// Workspace allocation and the per-(device, stream) default workspaces.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "kernels/cuda/cuda_check.h"
#include "pagedkv/kernels/cuda_workspace.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cuda {

Workspace::~Workspace() {
  absl::MutexLock lock(&mutex_);
  if (scratch_ == nullptr && device_words_ == nullptr && host_words_ == nullptr) return;
  cudaDeviceSynchronize();  // errors here are not actionable; the frees below still run
  if (scratch_ != nullptr) cudaFree(scratch_);
  if (device_words_ != nullptr) cudaFree(device_words_);
  if (host_words_ != nullptr) cudaFreeHost(host_words_);
  cudaGetLastError();
}

absl::Status Workspace::BindDevice() {
  int device = 0;
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  if (device_ == -1) device_ = device;
  if (device != device_) {
    return absl::InvalidArgumentError(absl::StrCat("cuda::Workspace: allocated on device ", device_,
                                                   " but used on device ", device,
                                                   "; use one workspace per device"));
  }
  return absl::OkStatus();
}

absl::StatusOr<void*> Workspace::Scratch(size_t bytes) {
  PAGEDKV_RETURN_IF_ERROR(BindDevice());
  if (bytes <= scratch_bytes_) return scratch_;
  if (scratch_ != nullptr) {
    // Earlier launches (on any stream) may still read the old memory.
    PAGEDKV_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
    PAGEDKV_CUDA_RETURN_IF_ERROR(cudaFree(scratch_));
    scratch_ = nullptr;
    scratch_bytes_ = 0;
  }
  // Grow geometrically so a slowly rising demand reallocates O(log) times.
  const size_t want = bytes < SIZE_MAX / 2 ? bytes + bytes / 2 : bytes;
  void* ptr = nullptr;
  if (cudaMalloc(&ptr, want) != cudaSuccess) {
    cudaGetLastError();
    PAGEDKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&ptr, bytes));
    scratch_bytes_ = bytes;
  } else {
    scratch_bytes_ = want;
  }
  scratch_ = ptr;
  return scratch_;
}

absl::StatusOr<uint64_t*> Workspace::DeviceCheckWords() {
  PAGEDKV_RETURN_IF_ERROR(BindDevice());
  if (device_words_ == nullptr) {
    // kCheckWords check words, then the deferred flag (zeroed once here, then only by callers).
    constexpr size_t kBytes = (kCheckWords + 1) * sizeof(uint64_t);
    void* device = nullptr;
    PAGEDKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&device, kBytes));
    if (const cudaError_t error = cudaMemset(device, 0, kBytes); error != cudaSuccess) {
      cudaFree(device);
      return CudaStatus(error, "cudaMemset(check words)", __FILE__, __LINE__);
    }
    void* host = nullptr;
    if (const cudaError_t error = cudaMallocHost(&host, kCheckWords * sizeof(uint64_t));
        error != cudaSuccess) {
      cudaFree(device);
      return CudaStatus(error, "cudaMallocHost(check words)", __FILE__, __LINE__);
    }
    device_words_ = static_cast<uint64_t*>(device);
    host_words_ = static_cast<uint64_t*>(host);
  }
  return device_words_;
}

absl::StatusOr<uint64_t*> Workspace::DeferredFlag() {
  PAGEDKV_ASSIGN_OR_RETURN(uint64_t * words, DeviceCheckWords());
  return words + kCheckWords;
}

absl::StatusOr<Workspace*> DefaultWorkspace(cudaStream_t stream) {
  struct Registry {
    absl::Mutex mutex;
    absl::flat_hash_map<std::pair<int, cudaStream_t>, std::unique_ptr<Workspace>> workspaces
        ABSL_GUARDED_BY(mutex);
  };
  static Registry* const registry = new Registry();  // never destroyed: outlives every stream
  int device = 0;
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  absl::MutexLock lock(&registry->mutex);
  std::unique_ptr<Workspace>& slot = registry->workspaces[{device, stream}];
  if (slot == nullptr) slot = std::make_unique<Workspace>();
  return slot.get();
}

absl::StatusOr<Workspace*> WorkspaceOrDefault(Workspace* workspace, cudaStream_t stream) {
  if (workspace != nullptr) return workspace;
  return DefaultWorkspace(stream);
}

}  // namespace pagedkv::cuda
