// Copyright 2026 The pagedkv Authors.
//
// Backend selection, BackendKind names and DeviceBuffer.
#include "engine/model/runner/backend.h"

#include <filesystem>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/model/runner/plugin_backend.h"
#include "pagedkv/model/backend_kind.h"
#include "pagedkv/status_macros.h"

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

namespace {

// True when an NVIDIA driver device node exists, so a CUDA device may be visible. kAuto loads the
// CUDA plugin (and with it cuBLAS and the driver) only then, which keeps CPU-only runs small.
bool NvidiaDriverPresent() {
  std::error_code error;
  return std::filesystem::exists("/dev/nvidiactl", error) ||
         std::filesystem::exists("/dev/dxg", error);
}

// The CUDA plugin's backend on device 0, or Unavailable saying what is missing.
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend() {
  absl::StatusOr<const BackendPlugin*> plugin = LoadCudaPlugin();
  if (!plugin.ok()) {
    return absl::UnavailableError(
        absl::StrCat("CUDA backend requested but ", plugin.status().message()));
  }
  absl::StatusOr<int> devices = (*plugin)->DeviceCount();
  if (!devices.ok()) {
    return absl::UnavailableError(
        absl::StrCat("CUDA backend requested but ", devices.status().message()));
  }
  return (*plugin)->CreateBackend(/*device=*/0);
}

}  // namespace

bool CudaBackendAvailable() {
  if (!NvidiaDriverPresent()) return false;
  absl::StatusOr<const BackendPlugin*> plugin = LoadCudaPlugin();
  return plugin.ok() && (*plugin)->DeviceCount().ok();
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(BackendKind kind) {
  return CreateBackend(kind, CpuBackendOptions{.num_threads = 1});
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(BackendKind kind,
                                                       const CpuBackendOptions& cpu) {
  switch (kind) {
    case BackendKind::kCpu:
      return CreateCpuBackend(cpu);
    case BackendKind::kAuto:
      if (!CudaBackendAvailable()) return CreateCpuBackend(cpu);
      return CreateCudaBackend();
    case BackendKind::kCuda:
      return CreateCudaBackend();
  }
  return absl::InvalidArgumentError("invalid BackendKind");
}

absl::Status Backend::QuantLinear(const QuantLinearArgs& /*args*/) {
  return absl::UnimplementedError(
      absl::StrCat("backend ", name(),
                   " cannot compute over block-format weights; load the model with fp32 "
                   "weights (--weights f32, EngineOptions::weights = WeightStorage::kF32)"));
}

absl::Status Backend::QuantEmbeddingGather(const QuantEmbeddingGatherArgs& /*args*/) {
  return QuantLinear({});
}

absl::StatusOr<void*> Backend::AllocateStaging(size_t bytes) {
  void* host = ::operator new (bytes == 0 ? 1 : bytes, std::align_val_t{64}, std::nothrow);
  if (host == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot allocate ", bytes,
        "  bytes of host staging memory for tier copies; free host memory or shrink the tiers"));
  }
  return host;
}

void Backend::FreeStaging(void* host) {
  if (host != nullptr) ::operator delete (host, std::align_val_t{64});
}

absl::Status Backend::RunParts(int32_t num_parts, absl::FunctionRef<absl::Status(int32_t)> part) {
  absl::Status first = absl::OkStatus();
  for (int32_t p = 0; p < num_parts; ++p) {
    absl::Status status = part(p);
    if (first.ok()) first = std::move(status);
  }
  return first;
}

absl::StatusOr<DeviceBuffer> DeviceBuffer::Create(Backend& backend, size_t bytes) {
  DeviceBuffer buffer;
  PAGEDKV_ASSIGN_OR_RETURN(buffer.data_, backend.Allocate(bytes));
  buffer.backend_ = &backend;
  buffer.bytes_ = bytes;
  return buffer;
}

}  // namespace pagedkv
