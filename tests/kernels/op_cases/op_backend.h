// Copyright 2026 The pagedkv Authors.
//
// OpBackend: what the kernel op cases (tests/kernels/op_cases/op_cases.h) run on: memory, and one
// Run overload per compute op of the plugin table (PAGEDKV_PLUGIN_OPS in
// kernels/backend_plugin_abi.h, so an op added to the table is a pure virtual every adapter must
// implement). Adapters:
//   - CpuOpBackend (here): pagedkv::cpu over host memory, the reference every case compares with;
//   - CudaLauncherBackend (tests/kernels/cuda_op_backend.h): the pagedkv::cuda launchers with
//     chosen LaunchOptions;
//   - tests/engine/model/runner/backend_ops_test.cc: any engine Backend (the CPU backend, a
//   plugin's).
// PluginOp names one op of the table; OpFor<RmsNormArgs>() is the op that takes RmsNormArgs.
// OpBuffer<T> owns one allocation of an OpBackend. Not thread-safe.
//
// Example:
//   CpuOpBackend cpu;
//   PAGEDKV_ASSIGN_OR_RETURN(auto x, OpBuffer<float>::Upload(cpu, host_x));
//   PAGEDKV_ASSIGN_OR_RETURN(auto y, OpBuffer<float>::Filled(cpu, host_x.size(), 0.0f));
//   PAGEDKV_RETURN_IF_ERROR(cpu.Run(RmsNormArgs{.x = x.data(), .weight = ..., .out = y.data(),
//                                               .num_rows = 2, .dim = 4}));
//   PAGEDKV_ASSIGN_OR_RETURN(std::vector<float> out, y.Download());
#ifndef PAGEDKV_TESTS_KERNELS_OP_CASES_OP_BACKEND_H_
#define PAGEDKV_TESTS_KERNELS_OP_CASES_OP_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/backend_plugin_abi.h"
#include "pagedkv/kernels/op_args.h"

namespace pagedkv::testing {

// One compute op of the plugin table: its position in PAGEDKV_PLUGIN_OPS.
struct PluginOp {
  size_t index = 0;
  // The table member's name, e.g. "rms_norm".
  std::string_view name() const { return kPagedkvPluginOpNames[index]; }
  friend bool operator==(PluginOp a, PluginOp b) { return a.index == b.index; }
};

// The op of the table that takes `Args`, e.g. OpFor<SampleArgs>() is "sample". Does not compile
// for a type that no op takes.
template <typename Args>
consteval PluginOp OpFor() {
  size_t index = 0;
#define PAGEDKV_TEST_OP_FOR(member, OpArgs)                            \
  if (std::is_same_v<Args, ::pagedkv::OpArgs>) return PluginOp{index}; \
  ++index;
  PAGEDKV_PLUGIN_OPS(PAGEDKV_TEST_OP_FOR)
#undef PAGEDKV_TEST_OP_FOR
  throw "no op of PAGEDKV_PLUGIN_OPS takes these arguments";
}

// Every op of the table, in table order.
inline std::vector<PluginOp> AllPluginOps() {
  std::vector<PluginOp> ops;
  for (size_t i = 0; i < kPagedkvPluginNumOps; ++i) ops.push_back(PluginOp{i});
  return ops;
}

class OpBackend {
 public:
  virtual ~OpBackend() = default;

  // Says which backend failed, e.g. "cpu ops" or "cuda launchers (trusted, default workspace)".
  virtual std::string name() const = 0;
  // False where `op` skips bad index-array entries instead of reporting them (a trusted CUDA
  // launch): bad-contents cases (BadInputKind::kContents) do not run there.
  virtual bool ReportsBadContents(PluginOp op) const = 0;

  // Zero-initialised memory of this backend; ResourceExhausted when it cannot. Free(nullptr) is a
  // no-op.
  virtual absl::StatusOr<void*> Allocate(size_t bytes) = 0;
  virtual void Free(void* ptr) = 0;
  virtual absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) = 0;
  // Waits for every op queued before it.
  virtual absl::Status CopyToHost(void* dst, const void* src, size_t bytes) = 0;

  // The ops of PAGEDKV_PLUGIN_OPS, `args` pointing into this backend's memory (one overload per
  // op: Run(const LinearArgs&), Run(const EmbeddingGatherArgs&), ...).
#define PAGEDKV_TEST_OP_BACKEND_RUN(member, Args) \
  virtual absl::Status Run(const ::pagedkv::Args& args) = 0;
  PAGEDKV_PLUGIN_OPS(PAGEDKV_TEST_OP_BACKEND_RUN)
#undef PAGEDKV_TEST_OP_BACKEND_RUN
};

// pagedkv::cpu over 64-byte aligned host memory: the reference of every op case.
class CpuOpBackend final : public OpBackend {
 public:
  std::string name() const override { return "cpu ops"; }
  bool ReportsBadContents(PluginOp) const override { return true; }
  absl::StatusOr<void*> Allocate(size_t bytes) override;
  void Free(void* ptr) override;
  absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) override;
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override;
  absl::Status Run(const LinearArgs& args) override;
  absl::Status Run(const EmbeddingGatherArgs& args) override;
  absl::Status Run(const GatherRowsArgs& args) override;
  absl::Status Run(const RmsNormArgs& args) override;
  absl::Status Run(const SwiGluArgs& args) override;
  absl::Status Run(const LmHeadArgs& args) override;
  absl::Status Run(const ReshapeAndCacheArgs& args) override;
  absl::Status Run(const ReRotateArgs& args) override;
  absl::Status Run(const PagedAttentionArgs& args) override;
  absl::Status Run(const SampleArgs& args) override;
};

// `count` elements of T in an OpBackend's memory, freed on destruction. Move-only. The backend
// must outlive it.
template <typename T>
class OpBuffer {
 public:
  OpBuffer() = default;
  ~OpBuffer() { Reset(); }
  OpBuffer(OpBuffer&& other) noexcept
      : backend_(std::exchange(other.backend_, nullptr)),
        data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)) {}
  OpBuffer& operator=(OpBuffer&& other) noexcept {
    if (this != &other) {
      Reset();
      backend_ = std::exchange(other.backend_, nullptr);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  OpBuffer(const OpBuffer&) = delete;
  OpBuffer& operator=(const OpBuffer&) = delete;

  // A copy of `host` in `backend`'s memory.
  static absl::StatusOr<OpBuffer> Upload(OpBackend& backend, const std::vector<T>& host) {
    OpBuffer buffer;
    buffer.backend_ = &backend;
    absl::StatusOr<void*> data = backend.Allocate(host.size() * sizeof(T));
    if (!data.ok()) return data.status();
    buffer.data_ = static_cast<T*>(*data);
    buffer.size_ = host.size();
    absl::Status written = buffer.Write(host);
    if (!written.ok()) return written;
    return buffer;
  }
  // `count` copies of `value`.
  static absl::StatusOr<OpBuffer> Filled(OpBackend& backend, size_t count, T value) {
    return Upload(backend, std::vector<T>(count, value));
  }

  // Overwrites the contents. REQUIRES: host.size() == size().
  absl::Status Write(const std::vector<T>& host) {
    if (host.size() != size_) return absl::InvalidArgumentError("OpBuffer::Write: size differs");
    return backend_->CopyToDevice(data_, host.data(), size_ * sizeof(T));
  }
  // The contents, after every op queued so far.
  absl::StatusOr<std::vector<T>> Download() const {
    std::vector<T> host(size_);
    absl::Status copied = backend_->CopyToHost(host.data(), data_, size_ * sizeof(T));
    if (!copied.ok()) return copied;
    return host;
  }

  T* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void Reset() {
    if (backend_ != nullptr) backend_->Free(data_);
    backend_ = nullptr;
    data_ = nullptr;
    size_ = 0;
  }

  OpBackend* backend_ = nullptr;
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace pagedkv::testing

#endif  // PAGEDKV_TESTS_KERNELS_OP_CASES_OP_BACKEND_H_
