// Copyright 2026 The pagedkv Authors.
//
// CudaLauncherBackend: the pagedkv::cuda launchers as an OpBackend
// (tests/kernels/op_cases/op_backend.h), so the op cases of tests/kernels/op_cases/op_cases.h run
// on them. Memory is cudaMalloc'ed; the launchers run on the legacy default stream, so a CopyToHost
// (cudaMemcpy) waits for them. Every launcher that takes LaunchOptions gets the ones given here;
// RMSNorm and SwiGLU take none. Needs a visible device (use it inside
// cuda_testing::CudaDeviceTest).
//
// Example:
//   CudaLauncherBackend cuda(cublas_.get(), {.check = cuda::ContentCheck::kTrusted});
//   testing::ExpectEveryCaseMatchesCpu(cuda);
#ifndef PAGEDKV_TESTS_KERNELS_CUDA_OP_BACKEND_H_
#define PAGEDKV_TESTS_KERNELS_CUDA_OP_BACKEND_H_

#include <cuda_runtime_api.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_check.h"
#include "pagedkv/kernels/cuda_ops.h"
#include "tests/kernels/op_cases/op_backend.h"

namespace pagedkv::cuda_testing {

class CudaLauncherBackend final : public testing::OpBackend {
 public:
  // `cublas` serves Linear and the LM head; it must outlive this object, as must
  // options.workspace when set.
  CudaLauncherBackend(cublasHandle_t cublas, const cuda::LaunchOptions& options)
      : cublas_(cublas), options_(options) {}

  std::string name() const override {
    const char* check = options_.check == cuda::ContentCheck::kValidate  ? "validate"
                        : options_.check == cuda::ContentCheck::kTrusted ? "trusted"
                                                                         : "deferred";
    return absl::StrCat("cuda launchers (", check, ", ",
                        options_.workspace == nullptr ? "default" : "own", " workspace)");
  }
  // Only validated launches report bad entries; trusted and deferred ones skip them.
  bool ReportsBadContents(testing::PluginOp) const override {
    return options_.check == cuda::ContentCheck::kValidate;
  }

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    void* ptr = nullptr;
    PAGEDKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&ptr, bytes == 0 ? 1 : bytes));
    PAGEDKV_CUDA_RETURN_IF_ERROR(cudaMemset(ptr, 0, bytes));
    return ptr;
  }
  void Free(void* ptr) override {
    if (ptr != nullptr) cudaFree(ptr);  // errors on free are not actionable
  }
  absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) override {
    if (bytes != 0)
      PAGEDKV_CUDA_RETURN_IF_ERROR(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    return absl::OkStatus();
  }
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    PAGEDKV_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
    if (bytes != 0)
      PAGEDKV_CUDA_RETURN_IF_ERROR(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
    return absl::OkStatus();
  }

  absl::Status Run(const LinearArgs& args) override { return cuda::Linear(args, cublas_); }
  absl::Status Run(const EmbeddingGatherArgs& args) override {
    return cuda::EmbeddingGather(args, nullptr, options_);
  }
  absl::Status Run(const GatherRowsArgs& args) override {
    return cuda::GatherRows(args, nullptr, options_);
  }
  absl::Status Run(const RmsNormArgs& args) override { return cuda::RmsNorm(args); }
  absl::Status Run(const SwiGluArgs& args) override { return cuda::SwiGlu(args); }
  absl::Status Run(const LmHeadArgs& args) override { return cuda::LmHead(args, cublas_); }
  absl::Status Run(const ReshapeAndCacheArgs& args) override {
    return cuda::ReshapeAndCache(args, nullptr, options_);
  }
  absl::Status Run(const ReRotateArgs& args) override {
    return cuda::ReRotate(args, nullptr, options_);
  }
  absl::Status Run(const PagedAttentionArgs& args) override {
    return cuda::PagedAttention(args, nullptr, options_);
  }
  absl::Status Run(const SampleArgs& args) override {
    return cuda::Sample(args, nullptr, options_);
  }

 private:
  cublasHandle_t cublas_;
  cuda::LaunchOptions options_;
};

}  // namespace pagedkv::cuda_testing

#endif  // PAGEDKV_TESTS_KERNELS_CUDA_OP_BACKEND_H_
