// Copyright 2026 The pagedkv Authors.
//
// The CPU backend: host memory and the pagedkv::cpu ops, the heavy ones (Linear, LM head, RMSNorm,
// SwiGLU, paged attention) split over the backend's thread pool. Linear and LM head weights in
// memory declared constant (a model's) are packed on first use and run the packed kernel; block-
// format weights there are repacked into Int8Tiles on first use when the VNNI int8 kernel runs.
// RunParts runs a step's parts on the pool's threads, one part per thread at a time; the ops a
// part calls then run on that thread alone.
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/model/runner/backend.h"
#include "kernels/cpu/int8_linear.h"
#include "kernels/cpu/int8_tiles.h"
#include "kernels/cpu/packed_linear.h"
#include "kernels/cpu/quant_linear.h"
#include "kernels/cpu/simd/simd_kernels.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/threaded_ops.h"
#include "kernels/op_validate.h"
#include "pagedkv/kernels/cpu_ops.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

constexpr size_t kAlignment = 64;
// Allocations from this size up are mapped lazily (page-aligned, so also kAlignment-aligned).
constexpr size_t kLazyBytes = size_t{1} << 21;

class CpuBackend;
// The backend whose RunParts part this thread is running (its ops then do not use the pool).
thread_local const CpuBackend* running_part_of = nullptr;

class CpuBackend final : public Backend {
 public:
  // pool: null for the calling thread alone.
  explicit CpuBackend(std::unique_ptr<cpu::ThreadPool> pool) : pool_(std::move(pool)) {}

  BackendKind kind() const override { return BackendKind::kCpu; }
  std::string name() const override {
    const int32_t threads = pool_ == nullptr ? 1 : pool_->num_threads();
    return absl::StrCat("cpu (", threads, threads == 1 ? " thread, " : " threads, ",
                        cpu::simd::TargetName(), ")");
  }
  bool host_memory() const override { return true; }

  // Zeroed memory. Allocations of kLazyBytes or more (a KV pool) are anonymous mappings, whose
  // pages the kernel zeroes on first touch: a pool costs resident memory only as blocks are used.
  absl::StatusOr<void*> Allocate(size_t bytes) override {
    if (bytes >= kLazyBytes) return MapZeroed(bytes);
    const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    void* ptr = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
    if (ptr == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cpu backend: cannot allocate ", bytes, " bytes"));
    }
    std::memset(ptr, 0, rounded == 0 ? kAlignment : rounded);
    return ptr;
  }
  void Free(void* ptr) override {
    {
      std::lock_guard<std::mutex> lock(mapped_mu_);
      auto it = mapped_.find(ptr);
      if (it != mapped_.end()) {
        munmap(ptr, it->second);
        mapped_.erase(it);
        return;
      }
    }
    std::free(ptr);
  }
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
  absl::Status DeclareConstant(const void* data, size_t bytes) override {
    std::lock_guard<std::mutex> lock(weights_mu_);
    return weights_.DeclareConstant(data, bytes);
  }

  // QuantLinear below then finds the tiles (the same test, Int8TilesUsable) and the int8 kernel
  // reads them alone (cpu::QuantLinear, Int8QuantLinear).
  absl::StatusOr<bool> PrepareQuantWeights(const void* w, WeightType type, int64_t n, int64_t k,
                                           ActivationType activations) override {
    if (activations != ActivationType::kInt8) return false;
    std::lock_guard<std::mutex> lock(weights_mu_);
    PAGEDKV_ASSIGN_OR_RETURN(const cpu::Int8Tiles* tiles,
                             weights_.FindInt8Tiles(w, type, n, k, pool()));
    return tiles != nullptr && cpu::Int8QuantLinearRuns(type, /*tiled=*/true);
  }

  absl::Status Linear(const LinearArgs& args) override {
    PAGEDKV_RETURN_IF_ERROR(ValidateLinear(args));
    PAGEDKV_ASSIGN_OR_RETURN(const cpu::PackedWeights* packed, FindPacked(args));
    if (packed == nullptr) return cpu::Linear(args, pool());
    return cpu::PackedLinear(args, *packed, pool());
  }
  absl::Status QuantLinear(const QuantLinearArgs& args) override {
    PAGEDKV_RETURN_IF_ERROR(ValidateQuantLinear(args));
    const cpu::Int8Tiles* tiles = nullptr;
    // Only where the running kernel reads tiles: elsewhere no lock or lookup per call.
    if (args.activations == ActivationType::kInt8 &&
        cpu::Int8TilesUsable(args.w_type, args.n, args.k)) {
      std::lock_guard<std::mutex> lock(weights_mu_);  // parts may build a weight's tiles at once
      PAGEDKV_ASSIGN_OR_RETURN(tiles, weights_.FindInt8Tiles(args.w, args.w_type, args.n, args.k));
    }
    return cpu::QuantLinear(args, pool(), tiles);
  }
  // From the table's Int8Tiles when it has them (a table tied to the LM head): its rows, which
  // may have been let go (ModelWeights::ReleaseInPlaceRows), are then not read back.
  absl::Status QuantEmbeddingGather(const QuantEmbeddingGatherArgs& args) override {
    const cpu::Int8Tiles* tiles = nullptr;
    {
      std::lock_guard<std::mutex> lock(weights_mu_);
      tiles = weights_.BuiltInt8Tiles(args.table, args.table_type, args.vocab_size, args.dim);
    }
    return cpu::QuantEmbeddingGather(args, tiles);
  }
  absl::Status EmbeddingGather(const EmbeddingGatherArgs& args) override {
    return cpu::EmbeddingGather(args);
  }
  absl::Status GatherRows(const GatherRowsArgs& args) override { return cpu::GatherRows(args); }
  absl::Status RmsNorm(const RmsNormArgs& args) override { return cpu::RmsNorm(args, pool()); }
  absl::Status SwiGlu(const SwiGluArgs& args) override { return cpu::SwiGlu(args, pool()); }
  absl::Status LmHead(const LmHeadArgs& args) override {
    PAGEDKV_RETURN_IF_ERROR(ValidateLmHead(args));
    return Linear({.x = args.hidden,
                   .w = args.weight,
                   .y = args.logits,
                   .m = args.num_rows,
                   .n = args.vocab_size,
                   .k = args.d_model});
  }
  absl::Status ReshapeAndCache(const ReshapeAndCacheArgs& args) override {
    return cpu::ReshapeAndCache(args);
  }
  absl::Status ReRotate(const ReRotateArgs& args) override { return cpu::ReRotate(args); }
  absl::Status PagedAttention(const PagedAttentionArgs& args) override {
    return cpu::PagedAttention(args, pool());
  }
  absl::Status Sample(const SampleArgs& args) override { return cpu::Sample(args, pool()); }

  int32_t max_concurrent_parts() const override {
    return pool_ == nullptr ? 1 : pool_->num_threads();
  }
  absl::Status RunParts(int32_t num_parts, absl::FunctionRef<absl::Status(int32_t)> part) override {
    if (pool_ == nullptr || num_parts <= 1 || running_part_of == this) {
      return Backend::RunParts(num_parts, part);
    }
    std::vector<absl::Status> results(static_cast<size_t>(std::max(num_parts, 0)));
    pool_->ParallelFor(num_parts, 1, [&](int64_t begin, int64_t end) {
      const CpuBackend* outer = std::exchange(running_part_of, this);
      for (int64_t p = begin; p < end; ++p) {
        results[static_cast<size_t>(p)] = part(static_cast<int32_t>(p));
      }
      running_part_of = outer;
    });
    for (absl::Status& status : results) {
      if (!status.ok()) return std::move(status);
    }
    return absl::OkStatus();
  }

 private:
  absl::StatusOr<void*> MapZeroed(size_t bytes) {
    void* ptr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ptr == MAP_FAILED) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cpu backend: cannot map ", bytes, " bytes; lower --num-kv-blocks"));
    }
    std::lock_guard<std::mutex> lock(mapped_mu_);
    mapped_.emplace(ptr, bytes);
    return ptr;
  }

  std::mutex mapped_mu_;
  absl::flat_hash_map<void*, size_t> mapped_;  // MapZeroed's mappings and their sizes

  // The pool for an op: none inside a part (the part already has its thread).
  cpu::ThreadPool* pool() const { return running_part_of == this ? nullptr : pool_.get(); }
  absl::StatusOr<const cpu::PackedWeights*> FindPacked(const LinearArgs& args) {
    std::lock_guard<std::mutex> lock(weights_mu_);  // parts may pack a weight at once
    return weights_.Find(args.w, args.n, args.k);
  }

  std::unique_ptr<cpu::ThreadPool> pool_;
  std::mutex weights_mu_;
  cpu::PackedWeightCache weights_;  // guarded by weights_mu_
};

}  // namespace

std::unique_ptr<Backend> CreateCpuBackend() { return std::make_unique<CpuBackend>(nullptr); }

absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const CpuBackendOptions& options) {
  if (options.num_threads < 0 || options.num_threads > cpu::kMaxThreads) {
    return absl::InvalidArgumentError(
        absl::StrCat("cpu backend: num_threads must be in [0, ", cpu::kMaxThreads,
                     "] (0: all hardware threads), got ", options.num_threads));
  }
  const int32_t threads = options.num_threads == 0 ? cpu::HardwareThreads() : options.num_threads;
  if (threads == 1) return std::make_unique<CpuBackend>(nullptr);
  PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<cpu::ThreadPool> pool, cpu::ThreadPool::Create(threads));
  return std::make_unique<CpuBackend>(std::move(pool));
}

}  // namespace pagedkv
