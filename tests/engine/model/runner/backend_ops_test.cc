// Copyright 2026 The pagedkv Authors.
//
// Every op case and bad-input case of tests/kernels/op_cases/op_cases.h on every engine Backend
// available at run time, against the CPU ops: the CPU backend on one thread and on a pool, a plugin
// loaded through the plugin table (fake_cpu_plugin.cc: the CPU ops behind the C table, so the whole
// dlopen path runs without a GPU), and the CUDA plugin when a device is visible (skipped
// otherwise). Backends that run the CPU code must match it bit for bit.
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/runner/backend.h"
#include "engine/model/runner/plugin_backend.h"
#include "gtest/gtest.h"
#include "tests/kernels/op_cases/op_backend.h"
#include "tests/kernels/op_cases/op_cases.h"

namespace pagedkv {
namespace {

using testing::OpFor;
using testing::PluginOp;

// An engine Backend as an OpBackend. `reports_bad_contents` says which ops report bad index
// entries rather than skipping them.
class EngineBackendOps final : public testing::OpBackend {
 public:
  EngineBackendOps(Backend& backend, std::function<bool(PluginOp)> reports_bad_contents)
      : backend_(backend), reports_bad_contents_(std::move(reports_bad_contents)) {}

  std::string name() const override { return "backend " + backend_.name(); }
  bool ReportsBadContents(PluginOp op) const override { return reports_bad_contents_(op); }
  absl::StatusOr<void*> Allocate(size_t bytes) override { return backend_.Allocate(bytes); }
  void Free(void* ptr) override { backend_.Free(ptr); }
  absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) override {
    return backend_.CopyToDevice(dst, src, bytes);
  }
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    return backend_.CopyToHost(dst, src, bytes);
  }
  absl::Status Run(const LinearArgs& args) override { return backend_.Linear(args); }
  absl::Status Run(const EmbeddingGatherArgs& args) override {
    return backend_.EmbeddingGather(args);
  }
  absl::Status Run(const GatherRowsArgs& args) override { return backend_.GatherRows(args); }
  absl::Status Run(const RmsNormArgs& args) override { return backend_.RmsNorm(args); }
  absl::Status Run(const SwiGluArgs& args) override { return backend_.SwiGlu(args); }
  absl::Status Run(const LmHeadArgs& args) override { return backend_.LmHead(args); }
  absl::Status Run(const ReshapeAndCacheArgs& args) override {
    return backend_.ReshapeAndCache(args);
  }
  absl::Status Run(const ReRotateArgs& args) override { return backend_.ReRotate(args); }
  absl::Status Run(const PagedAttentionArgs& args) override {
    return backend_.PagedAttention(args);
  }
  absl::Status Run(const SampleArgs& args) override { return backend_.Sample(args); }

 private:
  Backend& backend_;
  std::function<bool(PluginOp)> reports_bad_contents_;
};

bool Always(PluginOp) { return true; }

// Every case and every bad input on `backend`.
void ExpectEveryCase(Backend& backend, std::function<bool(PluginOp)> reports_bad_contents,
                     const testing::CompareOptions& options) {
  EngineBackendOps ops(backend, std::move(reports_bad_contents));
  testing::ExpectEveryCaseMatchesCpu(ops, options);
  testing::ExpectEveryBadInputRejected(ops);
}

TEST(EveryBackendTest, CpuBackendOnOneThread) {
  std::unique_ptr<Backend> cpu = CreateCpuBackend();
  ExpectEveryCase(*cpu, Always, {.exact = true});
}

TEST(EveryBackendTest, CpuBackendOnAPoolOfThreeThreads) {
  auto cpu = CreateCpuBackend({.num_threads = 3});
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ExpectEveryCase(**cpu, Always, {.exact = true});
}

TEST(EveryBackendTest, PluginBackendOverTheCpuOps) {
  auto plugin = BackendPlugin::Load(FAKE_PLUGIN_OK, BackendKind::kCuda);
  ASSERT_TRUE(plugin.ok()) << plugin.status();
  auto backend = (*plugin)->CreateBackend(0);
  ASSERT_TRUE(backend.ok()) << backend.status();
  ExpectEveryCase(**backend, Always, {.exact = true});
}

// The CUDA plugin validates the contents of ReRotate and Sample only; the per-layer ops run
// trusted (kernels/cuda/cuda_plugin.cc), skipping bad entries, so their bad-contents cases do not
// apply.
TEST(EveryBackendTest, CudaPluginBackend) {
  if (!CudaBackendAvailable()) GTEST_SKIP() << "no CUDA device visible; skipping";
  auto backend = CreateBackend(BackendKind::kCuda);
  ASSERT_TRUE(backend.ok()) << backend.status();
  ExpectEveryCase(
      **backend,
      [](PluginOp op) { return op == OpFor<ReRotateArgs>() || op == OpFor<SampleArgs>(); }, {});
}

}  // namespace
}  // namespace pagedkv
