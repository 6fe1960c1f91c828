// Copyright 2026 The pagedkv Authors.
//
// Backend selection, BackendKind names and DeviceBuffer.
#include "engine/model/backend.h"

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "pagedkv/backend_kind.h"
#include "pagedkv/status_macros.h"
#if defined(PAGEDKV_HAVE_CUDA)
#include "engine/model/cuda_backend.h"
#endif

namespace pagedkv {

std::string_view BackendKindName(BackendKind kind) {
  switch (kind) {
    case BackendKind::kAuto:
      return "auto";
    case BackendKind::kCpu:
      return "cpu";
    case BackendKind::kCuda:
      return "cuda";
  }
  return "invalid";
}

absl::StatusOr<BackendKind> ParseBackendKind(std::string_view name) {
  if (name == "auto") return BackendKind::kAuto;
  if (name == "cpu") return BackendKind::kCpu;
  if (name == "cuda") return BackendKind::kCuda;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown backend '", std::string(name), "': use auto, cpu or cuda"));
}

bool CudaBackendAvailable() {
#if defined(PAGEDKV_HAVE_CUDA)
  return CudaDeviceVisible();
#else
  return false;
#endif
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(BackendKind kind) {
  switch (kind) {
    case BackendKind::kCpu:
      return CreateCpuBackend();
    case BackendKind::kAuto:
      if (!CudaBackendAvailable()) return CreateCpuBackend();
      [[fallthrough]];
    case BackendKind::kCuda:
#if defined(PAGEDKV_HAVE_CUDA)
      if (!CudaDeviceVisible()) {
        return absl::UnavailableError("CUDA backend requested but no CUDA device is visible");
      }
      return CreateCudaBackend(/*device=*/0);
#else
      return absl::UnavailableError(
          "CUDA backend requested but pagedkv was built without CUDA (no nvcc at configure time)");
#endif
  }
  return absl::InvalidArgumentError("invalid BackendKind");
}

absl::StatusOr<DeviceBuffer> DeviceBuffer::Create(Backend& backend, size_t bytes) {
  DeviceBuffer buffer;
  PAGEDKV_ASSIGN_OR_RETURN(buffer.data_, backend.Allocate(bytes));
  buffer.backend_ = &backend;
  buffer.bytes_ = bytes;
  return buffer;
}

}  // namespace pagedkv
