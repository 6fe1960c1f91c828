// Copyright 2026 The pagedkv Authors.
//
// Backend: the memory and compute interface the model runner is written against, so one forward
// pass runs on the CPU reference ops (pagedkv::cpu, host memory) or on the CUDA launchers
// (pagedkv::cuda, device memory). Every op takes the kernels' argument structs
// (pagedkv/kernels/op_args.h) with pointers into this backend's memory; ops may run asynchronously,
// in order, until Synchronize() or a CopyToHost.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, CreateBackend(BackendKind::kAuto));
//   PAGEDKV_ASSIGN_OR_RETURN(DeviceBuffer x, DeviceBuffer::Create(*backend, 1024 * sizeof(float)));
//   PAGEDKV_RETURN_IF_ERROR(backend->CopyToDevice(x.data(), host, 1024 * sizeof(float)));
//   PAGEDKV_RETURN_IF_ERROR(backend->RmsNorm({.x = x.as<float>(), ...}));
#ifndef PAGEDKV_ENGINE_MODEL_RUNNER_BACKEND_H_
#define PAGEDKV_ENGINE_MODEL_RUNNER_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pagedkv/export.h"
#include "pagedkv/kernels/op_args.h"
#include "pagedkv/model/backend_kind.h"

namespace pagedkv {

class PAGEDKV_EXPORT Backend {
 public:
  virtual ~Backend() = default;

  virtual BackendKind kind() const = 0;
  // Human-readable name, e.g. "cpu" or "cuda:0 (NVIDIA H100)".
  virtual std::string name() const = 0;
  // True when this backend's memory is host memory (the CPU backend): host pointers, e.g. model
  // weights, may then be passed to ops directly without a copy.
  virtual bool host_memory() const = 0;

  // Memory. Allocate returns zero-initialised memory aligned to 64 bytes; ResourceExhausted when
  // it cannot. Free(nullptr) is a no-op.
  virtual absl::StatusOr<void*> Allocate(size_t bytes) = 0;
  virtual void Free(void* ptr) = 0;
  virtual absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) = 0;
  virtual absl::Status CopyToHost(void* dst, const void* src, size_t bytes) = 0;
  virtual absl::Status CopyDeviceToDevice(void* dst, const void* src, size_t bytes) = 0;
  // Waits for every queued op.
  virtual absl::Status Synchronize() = 0;
  // Declares [data, data + bytes) of this backend's memory constant for the backend's lifetime
  // (model weights): ops may then keep a faster copy of what they read there. The CPU backend
  // packs Linear / LM head weights found there on first use (results: see cpu/packed_linear.h).
  // Default: nothing. REQUIRES: the memory stays unchanged and alive while the backend exists.
  virtual absl::Status DeclareConstant(const void* /*data*/, size_t /*bytes*/) {
    return absl::OkStatus();
  }
  // Prepares now what QuantLinear over the block-format matrix W [n, k] of `type` (in memory
  // declared constant) would otherwise prepare on its first call: the CPU backend builds W's
  // Int8Tiles (cpu/int8_tiles.h) when int8 activations would multiply them. True when
  // QuantLinear over W with these activations then reads that copy only, never W's rows (the
  // caller may let W's pages go, ModelWeights::ReleaseInPlaceRows). Default: nothing, false.
  // ResourceExhausted when that cannot allocate (nothing kept).
  virtual absl::StatusOr<bool> PrepareQuantWeights(const void* /*w*/, WeightType /*type*/,
                                                   int64_t /*n*/, int64_t /*k*/,
                                                   ActivationType /*activations*/) {
    return false;
  }

  // Compute (see pagedkv/kernels/op_args.h for each op's contract).
  virtual absl::Status Linear(const LinearArgs& args) = 0;
  virtual absl::Status EmbeddingGather(const EmbeddingGatherArgs& args) = 0;
  // REQUIRES: args.rows validated by the caller (the CUDA backend runs it trusted: out-of-range
  // rows are skipped, not reported).
  virtual absl::Status GatherRows(const GatherRowsArgs& args) = 0;
  virtual absl::Status RmsNorm(const RmsNormArgs& args) = 0;
  virtual absl::Status SwiGlu(const SwiGluArgs& args) = 0;
  virtual absl::Status LmHead(const LmHeadArgs& args) = 0;
  // Linear / embedding rows over weights kept in block format (ModelWeights with native
  // matrices). Default: Unimplemented, saying to load the model with fp32 weights.
  virtual absl::Status QuantLinear(const QuantLinearArgs& args);
  virtual absl::Status QuantEmbeddingGather(const QuantEmbeddingGatherArgs& args);
  virtual absl::Status ReshapeAndCache(const ReshapeAndCacheArgs& args) = 0;
  virtual absl::Status ReRotate(const ReRotateArgs& args) = 0;
  virtual absl::Status PagedAttention(const PagedAttentionArgs& args) = 0;
  virtual absl::Status Sample(const SampleArgs& args) = 0;

  // ---- KV-tier copies (asynchronous on a copy stream where the backend has one) ----------------
  // The defaults are synchronous (a host-memory backend needs nothing else): LoadAsync is
  // CopyToDevice, StoreAsync is CopyToHost, the fence and SynchronizeCopies do nothing, staging
  // is ordinary aligned host memory. A backend with a copy stream (the CUDA plugin's extension,
  // kernels/backend_plugin_abi.h) overrides them all and answers async_copies() true.
  // The contract, for both:
  //   LoadAsync(dst, src)  - REQUIRES: src staging memory, unchanged until SynchronizeCopies().
  //                          Ops queued after the next FenceLoads() read the loaded bytes; ops
  //                          queued before it must not touch dst.
  //   FenceLoads()         - the compute stream waits for every load queued so far.
  //   StoreAsync(dst, src) - after every op queued before the call; REQUIRES: dst staging memory,
  //                          read only after SynchronizeCopies().
  //   SynchronizeCopies()  - the host waits for every queued load and store.
  virtual bool async_copies() const { return false; }
  // `bytes` of host memory for staging (page-locked on CUDA); ResourceExhausted when it cannot.
  virtual absl::StatusOr<void*> AllocateStaging(size_t bytes);
  // FreeStaging(nullptr) is a no-op; waits for the copies first where they are asynchronous.
  virtual void FreeStaging(void* host);
  virtual absl::Status LoadAsync(void* dst, const void* src, size_t bytes) {
    return CopyToDevice(dst, src, bytes);
  }
  virtual absl::Status FenceLoads() { return absl::OkStatus(); }
  virtual absl::Status StoreAsync(void* dst, const void* src, size_t bytes) {
    return CopyToHost(dst, src, bytes);
  }
  virtual absl::Status SynchronizeCopies() { return absl::OkStatus(); }

  // ---- Parts of a batch run at once (the CPU backend's threads) --------------------------------
  // How many parts RunParts runs at once: the CPU backend's thread count; 1 (the default) where
  // ops are queued on one stream, and the model runner then never splits a step.
  virtual int32_t max_concurrent_parts() const { return 1; }
  // Runs part(0), ..., part(num_parts - 1), at once where the backend can; the ops a part calls
  // run on the thread running that part (not split further). Returns when every part is done:
  // the error of the lowest-numbered part that failed, else OK. Parts must touch disjoint memory
  // (or only read what they share). Default: in order on the calling thread.
  virtual absl::Status RunParts(int32_t num_parts, absl::FunctionRef<absl::Status(int32_t)> part);
};

// Settings of the CPU backend.
struct PAGEDKV_EXPORT CpuBackendOptions {
  // Threads its ops use, the caller included; 0: every hardware thread. Results are bit-identical
  // for any count. In [0, 1024].
  int32_t num_threads = 0;
};

// The CPU backend on the calling thread alone (always available).
PAGEDKV_EXPORT std::unique_ptr<Backend> CreateCpuBackend();
// The CPU backend with a pool of options.num_threads threads. InvalidArgument for a count outside
// [0, 1024], ResourceExhausted when the threads cannot be started.
PAGEDKV_EXPORT absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(
    const CpuBackendOptions& options);

// True when the CUDA plugin (engine/model/runner/plugin_backend.h) loads and sees a device. Without
// an NVIDIA driver device node (/dev/nvidiactl) it is false without loading anything.
PAGEDKV_EXPORT bool CudaBackendAvailable();

// kCpu: the CPU backend. kCuda: the CUDA plugin's backend on device 0, Unavailable saying what is
// missing (the plugin library, a library it needs, or a device). kAuto: CUDA when available, else
// CPU.
PAGEDKV_EXPORT absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(BackendKind kind);
// The same, with `cpu` for a CPU backend (ignored by CUDA); CreateBackend(kind) uses one thread.
PAGEDKV_EXPORT absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(BackendKind kind,
                                                                      const CpuBackendOptions& cpu);

// Owns one allocation of a Backend. Movable, not copyable. The backend must outlive it.
class PAGEDKV_EXPORT DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static absl::StatusOr<DeviceBuffer> Create(Backend& backend, size_t bytes);
  ~DeviceBuffer() { Reset(); }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : backend_(std::exchange(other.backend_, nullptr)),
        data_(std::exchange(other.data_, nullptr)),
        bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      Reset();
      backend_ = std::exchange(other.backend_, nullptr);
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }
  // Frees the allocation (empty afterwards).
  void Reset() {
    if (backend_ != nullptr) backend_->Free(data_);
    backend_ = nullptr;
    data_ = nullptr;
    bytes_ = 0;
  }

 private:
  Backend* backend_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_MODEL_RUNNER_BACKEND_H_
