// Copyright 2026 The pagedkv Authors.
//
// GPU parity: every op case of tests/kernels/op_cases/op_cases.h (every op of the plugin table:
// linear and LM head, embedding and row gathers, RMSNorm, SwiGLU, the KV write and re-rotation for
// every RoPE variant, dtype and strided layout of tests/kernels/layout_cases.h with guard bytes,
// paged attention over mixed batches, split-K shapes, sliding windows and every layout, sampling)
// on the pagedkv::cuda launchers against the CPU ops, validated and trusted, with a caller-owned
// workspace and the default one. Skips when no CUDA device is visible. Bad input is in
// cuda_bad_input_test.cc.
#include "gtest/gtest.h"
#include "pagedkv/kernels/cuda_ops.h"
#include "pagedkv/kernels/cuda_workspace.h"
#include "tests/kernels/cuda_op_backend.h"
#include "tests/kernels/cuda_test_util.h"
#include "tests/kernels/op_cases/op_cases.h"

namespace pagedkv {
namespace {

using cuda_testing::CudaLauncherBackend;

class CudaParityTest : public cuda_testing::CudaDeviceTest {
 protected:
  // Every case under `check`, with the test's own workspace and with the default one.
  void ExpectEveryCaseMatchesCpu(cuda::ContentCheck check) {
    cuda::Workspace workspace;
    for (cuda::Workspace* ws : {&workspace, static_cast<cuda::Workspace*>(nullptr)}) {
      CudaLauncherBackend backend(cublas_.get(), {.check = check, .workspace = ws});
      testing::ExpectEveryCaseMatchesCpu(backend);
    }
  }
};

TEST_F(CudaParityTest, EveryOpCaseMatchesTheCpuOpsValidated) {
  ExpectEveryCaseMatchesCpu(cuda::ContentCheck::kValidate);
}

TEST_F(CudaParityTest, EveryOpCaseMatchesTheCpuOpsTrusted) {
  ExpectEveryCaseMatchesCpu(cuda::ContentCheck::kTrusted);
}

}  // namespace
}  // namespace pagedkv
