// Copyright 2026 The pagedkv Authors.
//
// The model runner's small helpers over device buffers, shared by its files (internal).
#ifndef PAGEDKV_ENGINE_MODEL_RUNNER_RUNNER_BUFFERS_H_
#define PAGEDKV_ENGINE_MODEL_RUNNER_RUNNER_BUFFERS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/model/runner/backend.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace runner_internal {

// Capacity for `needed` elements when growing from `current`: at least double.
inline int64_t Grow(int64_t current, int64_t needed) {
  return std::max({needed, current * 2, int64_t{16}});
}

// A new device buffer of `bytes` holding a copy of `host`.
inline absl::StatusOr<DeviceBuffer> Upload(Backend& backend, const void* host, size_t bytes) {
  PAGEDKV_ASSIGN_OR_RETURN(DeviceBuffer buffer, DeviceBuffer::Create(backend, bytes));
  PAGEDKV_RETURN_IF_ERROR(backend.CopyToDevice(buffer.data(), host, bytes));
  return buffer;
}

// Copies `src` to the start of `dst`. REQUIRES: dst holds at least src.size() elements.
template <typename T>
absl::Status CopySpan(Backend& backend, const DeviceBuffer& dst, absl::Span<const T> src) {
  return backend.CopyToDevice(dst.data(), src.data(), src.size() * sizeof(T));
}

}  // namespace runner_internal
}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_MODEL_RUNNER_RUNNER_BUFFERS_H_
