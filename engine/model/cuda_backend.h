// Copyright 2026 The pagedkv Authors.
//
// The CUDA backend (compiled only when PAGEDKV_HAVE_CUDA): device memory from cudaMalloc, ops
// from the pagedkv::cuda launchers on one stream. Use CreateBackend(BackendKind::kCuda) rather
// than these directly.
//
// Example:
//   if (CudaDeviceVisible()) backend = CreateCudaBackend(/*device=*/0);
#ifndef PAGEDKV_ENGINE_MODEL_CUDA_BACKEND_H_
#define PAGEDKV_ENGINE_MODEL_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "engine/model/backend.h"

namespace pagedkv {

// True when the CUDA runtime reports at least one device.
bool CudaDeviceVisible();

// A backend on `device`. Unavailable when the device cannot be used.
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(int device);

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_MODEL_CUDA_BACKEND_H_
