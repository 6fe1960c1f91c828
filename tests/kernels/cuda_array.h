// Copyright 2026 The pagedkv Authors.
//
// For tests and benchmarks that call the CUDA kernels directly (no Backend): typed RAII device
// memory from cudaMalloc, and a device copy of a RopeTable. Move-only; every failure is an
// absl::Status. The engine allocates through its Backend instead (CudaArray in
// engine/model/runner/backend.h, the library's one device-buffer type).
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(auto q, pagedkv::cuda::CudaArray<float>::FromHost(host_q));
//   PAGEDKV_ASSIGN_OR_RETURN(auto rope, pagedkv::cuda::DeviceRopeTable::Upload(table));
//   args.q = q.data();
//   args.rope = rope.View();
//   PAGEDKV_RETURN_IF_ERROR(pagedkv::cuda::Rope(args));
//   PAGEDKV_RETURN_IF_ERROR(q.CopyToHost(host_q));
#ifndef PAGEDKV_TESTS_KERNELS_CUDA_ARRAY_H_
#define PAGEDKV_TESTS_KERNELS_CUDA_ARRAY_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_check.h"
#include "pagedkv/kernels/rope_table.h"

namespace pagedkv::cuda {

// `count` elements of T in CUDA device memory (uninitialised), freed on destruction.
template <typename T>
class CudaArray {
 public:
  CudaArray() = default;
  ~CudaArray() { Reset(); }
  CudaArray(CudaArray&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  CudaArray& operator=(CudaArray&& other) noexcept {
    if (this != &other) {
      Reset();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  CudaArray(const CudaArray&) = delete;
  CudaArray& operator=(const CudaArray&) = delete;

  static absl::StatusOr<CudaArray> Create(size_t count) {
    CudaArray buffer;
    if (count > 0) {
      void* ptr = nullptr;
      PAGEDKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&ptr, count * sizeof(T)));
      buffer.data_ = static_cast<T*>(ptr);
    }
    buffer.size_ = count;
    return buffer;
  }

  static absl::StatusOr<CudaArray> FromHost(const std::vector<T>& host) {
    absl::StatusOr<CudaArray> buffer = Create(host.size());
    if (!buffer.ok()) return buffer.status();
    absl::Status copied = buffer->CopyFromHost(host);
    if (!copied.ok()) return copied;
    return buffer;
  }

  // REQUIRES: host.size() == size().
  absl::Status CopyFromHost(const std::vector<T>& host) {
    if (host.size() != size_) return SizeMismatch(host.size());
    if (size_ == 0) return absl::OkStatus();
    PAGEDKV_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(data_, host.data(), size_ * sizeof(T), cudaMemcpyHostToDevice));
    return absl::OkStatus();
  }

  // Resizes `host` to size() and copies the device contents into it (synchronous).
  absl::Status CopyToHost(std::vector<T>& host) const {
    host.resize(size_);
    if (size_ == 0) return absl::OkStatus();
    PAGEDKV_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(host.data(), data_, size_ * sizeof(T), cudaMemcpyDeviceToHost));
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<T>> ToHost() const {
    std::vector<T> host;
    absl::Status status = CopyToHost(host);
    if (!status.ok()) return status;
    return host;
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  size_t bytes() const { return size_ * sizeof(T); }

 private:
  void Reset() {
    if (data_ != nullptr) cudaFree(data_);  // errors on free are not actionable
    data_ = nullptr;
    size_ = 0;
  }
  absl::Status SizeMismatch(size_t host_size) const {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaArray: host has ", host_size, " elements, device buffer ", size_));
  }

  T* data_ = nullptr;
  size_t size_ = 0;
};

// Device copy of a RopeTable; View() has device pointers for pagedkv::cuda ops.
class DeviceRopeTable {
 public:
  static absl::StatusOr<DeviceRopeTable> Upload(const RopeTable& table) {
    DeviceRopeTable out;
    auto cos_sin = CudaArray<float>::FromHost(table.cos_sin());
    if (!cos_sin.ok()) return cos_sin.status();
    auto inv_freq = CudaArray<double>::FromHost(table.inv_freq());
    if (!inv_freq.ok()) return inv_freq.status();
    out.cos_sin_ = std::move(*cos_sin);
    out.inv_freq_ = std::move(*inv_freq);
    out.view_ = table.View();
    out.view_.cos_sin = out.cos_sin_.data();
    out.view_.inv_freq = out.inv_freq_.data();
    return out;
  }
  RopeTableView View() const { return view_; }

 private:
  CudaArray<float> cos_sin_;
  CudaArray<double> inv_freq_;
  RopeTableView view_;
};

}  // namespace pagedkv::cuda

#endif  // PAGEDKV_TESTS_KERNELS_CUDA_ARRAY_H_
