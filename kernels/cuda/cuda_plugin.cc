// Copyright 2026 The pagedkv Authors.
//
// The CUDA backend plugin: the entry point of libpagedkv_cuda.so (kernels/backend_plugin_abi.h).
// One backend instance is a device, a non-blocking stream, a cuBLAS handle bound to it and the
// launchers' workspace. The per-layer ops skip the device content checks (ContentCheck::kTrusted:
// the engine's ModelRunner validates every ModelInput on the host before any launch); ReRotate
// and Sample, once per step and fed by other callers, keep them (kValidate). Each instance also
// has a copy stream for asynchronous KV-tier copies (kernels/cuda/copy_stream.h), offered through
// the copy-stream extension entry point.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kernels/backend_plugin_abi.h"
#include "kernels/cuda/copy_stream.h"
#include "kernels/cuda/cublas_handle.h"
#include "kernels/cuda/cuda_check.h"
#include "pagedkv/kernels/cuda_ops.h"
#include "pagedkv/kernels/cuda_workspace.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/version.h"

namespace pagedkv::cuda {
namespace {

struct PluginBackend {
  int device = 0;
  std::string name;
  cudaStream_t stream = nullptr;
  CublasHandle cublas;
  Workspace workspace;               // split-K scratch and check words of the launchers on `stream`
  std::unique_ptr<CopyStream> copy;  // tier loads and stores beside `stream`

  // The copy stream (which waits on `stream`) and the cuBLAS handle go before the stream; the
  // workspace frees its memory last.
  ~PluginBackend() {
    copy.reset();
    if (stream != nullptr) cudaStreamSynchronize(stream);
    cublas = CublasHandle();
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
  LaunchOptions Trusted() { return {.check = ContentCheck::kTrusted, .workspace = &workspace}; }
  LaunchOptions Validated() { return {.check = ContentCheck::kValidate, .workspace = &workspace}; }
};

PluginBackend* Self(PagedkvPluginBackend handle) { return static_cast<PluginBackend*>(handle); }

// Writes `status` into `error` and returns its code.
int32_t Report(const absl::Status& status, PagedkvPluginError* error) {
  const auto code = static_cast<int32_t>(status.code());
  if (error != nullptr) {
    error->code = code;
    const size_t n = std::min(status.message().size(), sizeof(error->message) - 1);
    std::memcpy(error->message, status.message().data(), n);
    error->message[n] = '\0';
  }
  return code;
}

absl::StatusOr<std::unique_ptr<PluginBackend>> CreateBackend(int32_t device) {
  auto b = std::make_unique<PluginBackend>();
  b->device = device;
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  cudaDeviceProp prop;
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device));
  b->name = absl::StrCat("cuda:", device, " (", prop.name, ")");
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking));
  PAGEDKV_ASSIGN_OR_RETURN(b->cublas, CublasHandle::Create());
  PAGEDKV_CUBLAS_RETURN_IF_ERROR(cublasSetStream(b->cublas.get(), b->stream));
  PAGEDKV_ASSIGN_OR_RETURN(b->copy, CopyStream::Create(b->stream));
  return b;
}

int32_t DeviceCount(int32_t* count, PagedkvPluginError* error) {
  int n = 0;
  const cudaError_t status = cudaGetDeviceCount(&n);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    *count = 0;
    return Report(
        absl::UnavailableError(absl::StrCat("cudaGetDeviceCount: ", cudaGetErrorName(status), " (",
                                            cudaGetErrorString(status), ")")),
        error);
  }
  *count = n;
  return Report(absl::OkStatus(), error);
}

int32_t Create(int32_t device, PagedkvPluginBackend* out, PagedkvPluginError* error) {
  absl::StatusOr<std::unique_ptr<PluginBackend>> backend = CreateBackend(device);
  if (!backend.ok()) {
    return Report(absl::UnavailableError(absl::StrCat("CUDA backend on device ", device, ": ",
                                                      backend.status().message())),
                  error);
  }
  *out = backend->release();
  return Report(absl::OkStatus(), error);
}

void Destroy(PagedkvPluginBackend handle) { delete Self(handle); }
const char* Name(PagedkvPluginBackend handle) { return Self(handle)->name.c_str(); }

absl::Status AllocateZeroed(PluginBackend& b, size_t bytes, void** out) {
  void* ptr = nullptr;
  if (cudaMalloc(&ptr, bytes == 0 ? 1 : bytes) != cudaSuccess) {
    cudaGetLastError();
    return absl::ResourceExhaustedError(
        absl::StrCat(b.name, ": cannot allocate ", bytes, " bytes of device memory"));
  }
  if (const cudaError_t status = cudaMemsetAsync(ptr, 0, bytes, b.stream); status != cudaSuccess) {
    cudaFree(ptr);
    return CudaStatus(status, "cudaMemsetAsync(new allocation)", __FILE__, __LINE__);
  }
  *out = ptr;
  return absl::OkStatus();
}

int32_t Allocate(PagedkvPluginBackend handle, size_t bytes, void** ptr, PagedkvPluginError* error) {
  return Report(AllocateZeroed(*Self(handle), bytes, ptr), error);
}

void Free(PagedkvPluginBackend handle, void* ptr) {
  if (ptr == nullptr) return;
  cudaStreamSynchronize(Self(handle)->stream);
  cudaFree(ptr);
}

absl::Status Copy(PluginBackend& b, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return absl::OkStatus();
  // Pageable host sources are staged before cudaMemcpyAsync returns, so `src` may be reused.
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, kind, b.stream));
  if (kind == cudaMemcpyDeviceToHost) PAGEDKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(b.stream));
  return absl::OkStatus();
}

int32_t CopyToDevice(PagedkvPluginBackend handle, void* dst, const void* src, size_t bytes,
                     PagedkvPluginError* error) {
  return Report(Copy(*Self(handle), dst, src, bytes, cudaMemcpyHostToDevice), error);
}
int32_t CopyToHost(PagedkvPluginBackend handle, void* dst, const void* src, size_t bytes,
                   PagedkvPluginError* error) {
  return Report(Copy(*Self(handle), dst, src, bytes, cudaMemcpyDeviceToHost), error);
}
int32_t CopyDeviceToDevice(PagedkvPluginBackend handle, void* dst, const void* src, size_t bytes,
                           PagedkvPluginError* error) {
  return Report(Copy(*Self(handle), dst, src, bytes, cudaMemcpyDeviceToDevice), error);
}
int32_t Synchronize(PagedkvPluginBackend handle, PagedkvPluginError* error) {
  return Report(CudaStatus(cudaStreamSynchronize(Self(handle)->stream), "cudaStreamSynchronize",
                           __FILE__, __LINE__),
                error);
}

int32_t OpLinear(PagedkvPluginBackend h, const LinearArgs* a, PagedkvPluginError* e) {
  return Report(Linear(*a, Self(h)->cublas.get(), Self(h)->stream), e);
}
int32_t OpEmbeddingGather(PagedkvPluginBackend h, const EmbeddingGatherArgs* a,
                          PagedkvPluginError* e) {
  return Report(EmbeddingGather(*a, Self(h)->stream, Self(h)->Trusted()), e);
}
// Trusted: the runner gathers slots it validated (ReadKv) and rows it built (compaction).
int32_t OpGatherRows(PagedkvPluginBackend h, const GatherRowsArgs* a, PagedkvPluginError* e) {
  return Report(GatherRows(*a, Self(h)->stream, Self(h)->Trusted()), e);
}
int32_t OpRmsNorm(PagedkvPluginBackend h, const RmsNormArgs* a, PagedkvPluginError* e) {
  return Report(RmsNorm(*a, Self(h)->stream), e);
}
int32_t OpSwiGlu(PagedkvPluginBackend h, const SwiGluArgs* a, PagedkvPluginError* e) {
  return Report(SwiGlu(*a, Self(h)->stream), e);
}
int32_t OpLmHead(PagedkvPluginBackend h, const LmHeadArgs* a, PagedkvPluginError* e) {
  return Report(LmHead(*a, Self(h)->cublas.get(), Self(h)->stream), e);
}
int32_t OpReshapeAndCache(PagedkvPluginBackend h, const ReshapeAndCacheArgs* a,
                          PagedkvPluginError* e) {
  return Report(ReshapeAndCache(*a, Self(h)->stream, Self(h)->Trusted()), e);
}
int32_t OpReRotate(PagedkvPluginBackend h, const ReRotateArgs* a, PagedkvPluginError* e) {
  return Report(ReRotate(*a, Self(h)->stream, Self(h)->Validated()), e);
}
int32_t OpPagedAttention(PagedkvPluginBackend h, const PagedAttentionArgs* a,
                         PagedkvPluginError* e) {
  return Report(PagedAttention(*a, Self(h)->stream, Self(h)->Trusted()), e);
}
int32_t OpSample(PagedkvPluginBackend h, const SampleArgs* a, PagedkvPluginError* e) {
  return Report(Sample(*a, Self(h)->stream, Self(h)->Validated()), e);
}

// The copy-stream extension (kernels/backend_plugin_abi.h).
int32_t StageAlloc(PagedkvPluginBackend h, size_t bytes, void** host, PagedkvPluginError* e) {
  absl::StatusOr<void*> staged = Self(h)->copy->AllocateStaging(bytes);
  if (staged.ok()) *host = *staged;
  return Report(staged.status(), e);
}
void StageFree(PagedkvPluginBackend h, void* host) { Self(h)->copy->FreeStaging(host); }
int32_t LoadAsync(PagedkvPluginBackend h, void* dst, const void* src, size_t bytes,
                  PagedkvPluginError* e) {
  return Report(Self(h)->copy->Load(dst, src, bytes), e);
}
int32_t FenceLoads(PagedkvPluginBackend h, PagedkvPluginError* e) {
  return Report(Self(h)->copy->FenceLoads(), e);
}
int32_t StoreAsync(PagedkvPluginBackend h, void* dst, const void* src, size_t bytes,
                   PagedkvPluginError* e) {
  return Report(Self(h)->copy->Store(dst, src, bytes), e);
}
int32_t CopySynchronize(PagedkvPluginBackend h, PagedkvPluginError* e) {
  return Report(Self(h)->copy->Synchronize(), e);
}

constexpr PagedkvCopyStreamPlugin kCopyStreamTable = {
    .abi_version = kPagedkvCopyStreamAbiVersion,
    .table_size = sizeof(PagedkvCopyStreamPlugin),
    .stage_alloc = StageAlloc,
    .stage_free = StageFree,
    .load_async = LoadAsync,
    .fence_loads = FenceLoads,
    .store_async = StoreAsync,
    .copy_synchronize = CopySynchronize,
};

constexpr PagedkvBackendPlugin kTable = {
    .abi_version = kPagedkvPluginAbiVersion,
    .table_size = sizeof(PagedkvBackendPlugin),
    .args_fingerprint = PagedkvPluginArgsFingerprint(),
    .pagedkv_version = PAGEDKV_VERSION_STRING,
    .backend_name = "cuda",
    .device_count = DeviceCount,
    .create = Create,
    .destroy = Destroy,
    .name = Name,
    .allocate = Allocate,
    .free = Free,
    .copy_to_device = CopyToDevice,
    .copy_to_host = CopyToHost,
    .copy_device_to_device = CopyDeviceToDevice,
    .synchronize = Synchronize,
    .linear = OpLinear,
    .embedding_gather = OpEmbeddingGather,
    .gather_rows = OpGatherRows,
    .rms_norm = OpRmsNorm,
    .swiglu = OpSwiGlu,
    .lm_head = OpLmHead,
    .reshape_and_cache = OpReshapeAndCache,
    .rerotate = OpReRotate,
    .paged_attention = OpPagedAttention,
    .sample = OpSample,
};

}  // namespace
}  // namespace pagedkv::cuda

// The plugin's only C entry point (see kernels/backend_plugin_abi.h).
extern "C" __attribute__((visibility("default"))) const PagedkvBackendPlugin*
pagedkv_backend_plugin(uint32_t abi_version) {
  return abi_version == kPagedkvPluginAbiVersion ? &pagedkv::cuda::kTable : nullptr;
}

// The optional copy-stream extension's entry point (see kernels/backend_plugin_abi.h).
extern "C" __attribute__((visibility("default"))) const PagedkvCopyStreamPlugin*
pagedkv_backend_copy_stream(uint32_t abi_version) {
  return abi_version == kPagedkvCopyStreamAbiVersion ? &pagedkv::cuda::kCopyStreamTable : nullptr;
}
