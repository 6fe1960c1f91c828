// Copyright 2026 The pagedkv Authors.
//
// BackendKind: where the engine computes. The CPU backend is always built; the CUDA backend only
// when pagedkv is built with nvcc, and it runs only when a CUDA device is visible.
//
// Example:
//   pagedkv::EngineOptions options;
//   options.backend = pagedkv::BackendKind::kCpu;  // force the CPU reference backend
#ifndef PAGEDKV_MODEL_BACKEND_KIND_H_
#define PAGEDKV_MODEL_BACKEND_KIND_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "pagedkv/export.h"

namespace pagedkv {

enum class BackendKind {
  kAuto,  // CUDA when built with it and a device is visible, else CPU
  kCpu,   // the CPU reference backend (host memory, single thread)
  kCuda,  // the CUDA backend; Unavailable when not built with CUDA or no device is visible
};

// "auto", "cpu", "cuda".
PAGEDKV_EXPORT std::string_view BackendKindName(BackendKind kind);
// Parses "auto", "cpu", "cuda"; InvalidArgument otherwise.
PAGEDKV_EXPORT absl::StatusOr<BackendKind> ParseBackendKind(std::string_view name);

}  // namespace pagedkv

#endif  // PAGEDKV_MODEL_BACKEND_KIND_H_
