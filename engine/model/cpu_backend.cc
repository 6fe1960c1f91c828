// Copyright 2026 The pagedkv Authors.
//
// The CPU backend: host memory and the pagedkv::cpu reference ops.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/model/backend.h"
#include "pagedkv/kernels/cpu_ops.h"

namespace pagedkv {
namespace {

constexpr size_t kAlignment = 64;

class CpuBackend final : public Backend {
 public:
  BackendKind kind() const override { return BackendKind::kCpu; }
  std::string name() const override { return "cpu"; }
  bool host_memory() const override { return true; }

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    void* ptr = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
    if (ptr == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cpu backend: cannot allocate ", bytes, " bytes"));
    }
    std::memset(ptr, 0, rounded == 0 ? kAlignment : rounded);
    return ptr;
  }
  void Free(void* ptr) override { std::free(ptr); }
  absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) override {
    if (bytes != 0) std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    if (bytes != 0) std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status CopyDeviceToDevice(void* dst, const void* src, size_t bytes) override {
    if (bytes != 0) std::memmove(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status Synchronize() override { return absl::OkStatus(); }

  absl::Status Linear(const LinearArgs& args) override { return cpu::Linear(args); }
  absl::Status EmbeddingGather(const EmbeddingGatherArgs& args) override {
    return cpu::EmbeddingGather(args);
  }
  absl::Status GatherRows(const GatherRowsArgs& args) override { return cpu::GatherRows(args); }
  absl::Status RmsNorm(const RmsNormArgs& args) override { return cpu::RmsNorm(args); }
  absl::Status SwiGlu(const SwiGluArgs& args) override { return cpu::SwiGlu(args); }
  absl::Status LmHead(const LmHeadArgs& args) override { return cpu::LmHead(args); }
  absl::Status ReshapeAndCache(const ReshapeAndCacheArgs& args) override {
    return cpu::ReshapeAndCache(args);
  }
  absl::Status ReRotate(const ReRotateArgs& args) override { return cpu::ReRotate(args); }
  absl::Status PagedAttention(const PagedAttentionArgs& args) override {
    return cpu::PagedAttention(args);
  }
  absl::Status Sample(const SampleArgs& args) override { return cpu::Sample(args); }
};

}  // namespace

std::unique_ptr<Backend> CreateCpuBackend() { return std::make_unique<CpuBackend>(); }

}  // namespace pagedkv
