// Copyright 2026 The pagedkv Authors.
//
// The CUDA backend: cudaMalloc'd memory and the pagedkv::cuda launchers on one stream, with a
// cuBLAS handle bound to that stream. Built only when PAGEDKV_HAVE_CUDA.
#include "engine/model/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/model/backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "pagedkv/kernels/cuda_ops.h"
#include "pagedkv/kernels/cuda_workspace.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

class CudaBackend final : public Backend {
 public:
  static absl::StatusOr<std::unique_ptr<Backend>> Create(int device) {
    std::unique_ptr<CudaBackend> b(new CudaBackend());
    b->device_ = device;
    PAGEDKV_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
    cudaDeviceProp prop;
    PAGEDKV_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device));
    b->name_ = absl::StrCat("cuda:", device, " (", prop.name, ")");
    PAGEDKV_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&b->stream_, cudaStreamNonBlocking));
    PAGEDKV_ASSIGN_OR_RETURN(b->cublas_, cuda::CublasHandle::Create());
    PAGEDKV_CUBLAS_RETURN_IF_ERROR(cublasSetStream(b->cublas_.get(), b->stream_));
    return std::unique_ptr<Backend>(std::move(b));
  }

  // The cuBLAS handle goes before the stream it is bound to; workspace_ (a member) frees its
  // memory after both.
  ~CudaBackend() override {
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    cublas_ = cuda::CublasHandle();
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  BackendKind kind() const override { return BackendKind::kCuda; }
  std::string name() const override { return name_; }
  bool host_memory() const override { return false; }

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    void* ptr = nullptr;
    if (cudaMalloc(&ptr, bytes == 0 ? 1 : bytes) != cudaSuccess) {
      cudaGetLastError();
      return absl::ResourceExhaustedError(
          absl::StrCat(name_, ": cannot allocate ", bytes, " bytes of device memory"));
    }
    if (const cudaError_t error = cudaMemsetAsync(ptr, 0, bytes, stream_); error != cudaSuccess) {
      cudaFree(ptr);
      return cuda::CudaStatus(error, "cudaMemsetAsync(new allocation)", __FILE__, __LINE__);
    }
    return ptr;
  }
  void Free(void* ptr) override {
    if (ptr == nullptr) return;
    cudaStreamSynchronize(stream_);
    cudaFree(ptr);
  }
  // Pageable host sources are staged before cudaMemcpyAsync returns, so `src` may be reused.
  absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return absl::OkStatus();
    PAGEDKV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
    return absl::OkStatus();
  }
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return absl::OkStatus();
    PAGEDKV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    PAGEDKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }
  absl::Status CopyDeviceToDevice(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return absl::OkStatus();
    PAGEDKV_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
    return absl::OkStatus();
  }
  absl::Status Synchronize() override {
    PAGEDKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }

  absl::Status Linear(const LinearArgs& args) override {
    return cuda::Linear(args, cublas_.get(), stream_);
  }
  absl::Status EmbeddingGather(const EmbeddingGatherArgs& args) override {
    return cuda::EmbeddingGather(args, stream_, Trusted());
  }
  // Trusted: the runner gathers slots it validated (ReadKv) and rows it built (compaction).
  absl::Status GatherRows(const GatherRowsArgs& args) override {
    return cuda::GatherRows(args, stream_, Trusted());
  }
  absl::Status RmsNorm(const RmsNormArgs& args) override { return cuda::RmsNorm(args, stream_); }
  absl::Status SwiGlu(const SwiGluArgs& args) override { return cuda::SwiGlu(args, stream_); }
  absl::Status LmHead(const LmHeadArgs& args) override {
    return cuda::LmHead(args, cublas_.get(), stream_);
  }
  absl::Status ReshapeAndCache(const ReshapeAndCacheArgs& args) override {
    return cuda::ReshapeAndCache(args, stream_, Trusted());
  }
  absl::Status ReRotate(const ReRotateArgs& args) override {
    return cuda::ReRotate(args, stream_, Validated());
  }
  absl::Status PagedAttention(const PagedAttentionArgs& args) override {
    return cuda::PagedAttention(args, stream_, Trusted());
  }
  absl::Status Sample(const SampleArgs& args) override {
    return cuda::Sample(args, stream_, Validated());
  }

 private:
  // The per-layer ops skip the device content checks (a host round trip each): ModelRunner
  // validates every ModelInput on the host before any launch (token ids, slots, block tables,
  // kv_lens). ReRotate and Sample, once per step and fed by other callers, keep the checks.
  // Every launcher gets this backend's own workspace: the per-stream default one would outlive
  // stream_ and keep its split-K scratch for the life of the process.
  cuda::LaunchOptions Trusted() {
    return {.check = cuda::ContentCheck::kTrusted, .workspace = &workspace_};
  }
  cuda::LaunchOptions Validated() {
    return {.check = cuda::ContentCheck::kValidate, .workspace = &workspace_};
  }

  CudaBackend() = default;

  int device_ = 0;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  cuda::CublasHandle cublas_;
  cuda::Workspace workspace_;  // split-K scratch and check words of the launchers on stream_
};

}  // namespace

bool CudaDeviceVisible() { return cuda::VisibleDeviceCount() > 0; }

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(int device) {
  absl::StatusOr<std::unique_ptr<Backend>> backend = CudaBackend::Create(device);
  if (!backend.ok()) {
    return absl::UnavailableError(
        absl::StrCat("CUDA backend on device ", device, ": ", backend.status().message()));
  }
  return backend;
}

}  // namespace pagedkv
