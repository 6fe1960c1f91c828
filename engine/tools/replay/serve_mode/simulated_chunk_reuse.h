// Copyright 2026 The pagedkv Authors.
//
// SimulatedChunkReuse: shifted-position reuse for serve-mode replay, where there is no model and
// no KV. It is the scheduler's ChunkReuseProvider over a ChunkIndex on the KvCacheManager's
// BlockPool, and it does exactly the bookkeeping the Engine's provider does
// (engine/runtime/shift/engine_chunk_reuse.h) minus the data movement:
//   * Acquire finds a cached chunk by its content key (ChunkKey over the chunk's tokens, the cache
//     salt, the adapter and a model fingerprint) and pins its blocks, so the pool cannot evict
//     them while the step "re-rotates" them; ReleaseAcquired (the engine's RunMoves) unpins them.
//   * Register, called once the simulated executor has "computed" a chunk span, allocates
//     ceil(length / block_size) blocks from the same pool (evicting through its policy; nothing is
//     registered when no block can be given), registers them in the index at the span's position
//     and unpins them: a chunk copy takes pool capacity and leaves in the pool's eviction order,
//     like the engine's copy, so the capacity effect of caching chunks is real.
// The caller charges the moved and copied tokens' KV traffic in its cost model.
//
// Example:
//   auto reuse =
//       SimulatedChunkReuse::Create(manager->AttachChunkIndex().value(), {.first_k = 0}).value();
//   scheduler->SetChunkReuseProvider(reuse.get());
//   PAGEDKV_RETURN_IF_ERROR(scheduler->Schedule(&batch));   // may Acquire chunks
//   PAGEDKV_RETURN_IF_ERROR(reuse->ReleaseAcquired());      // moves "done"
//   ... simulate the forward pass ...
//   PAGEDKV_ASSIGN_OR_RETURN(bool copied, reuse->Register(chunk_tokens, "", 0, offset));
//
// Not thread-safe; the index's pool (its KvCacheManager) must outlive it.
#ifndef PAGEDKV_ENGINE_TOOLS_REPLAY_SERVE_MODE_SIMULATED_CHUNK_REUSE_H_
#define PAGEDKV_ENGINE_TOOLS_REPLAY_SERVE_MODE_SIMULATED_CHUNK_REUSE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/runtime/shift/chunk_pins.h"
#include "pagedkv/cache/chunk_index.h"
#include "pagedkv/export.h"
#include "pagedkv/runtime/scheduler.h"
#include "pagedkv/types.h"

namespace pagedkv::replay {

struct PAGEDKV_EXPORT SimulatedChunkReuseOptions {
  int32_t first_k = 0;            // leading tokens of each chunk always recomputed (EPIC); >= 0
  std::string model_fingerprint;  // model id, hashed into every chunk key
};

// Counters since construction.
struct PAGEDKV_EXPORT SimulatedChunkReuseStats {
  int64_t acquired = 0;            // Acquire calls that returned a chunk
  int64_t released_unused = 0;     // of those, released by the scheduler without using them
  int64_t registered = 0;          // chunk copies registered
  int64_t registered_tokens = 0;   // tokens of those copies
  int64_t register_failures = 0;   // Register calls that found no block to give
  int64_t already_registered = 0;  // Register calls for a chunk already cached
};

class PAGEDKV_EXPORT SimulatedChunkReuse final : public ChunkReuseProvider {
 public:
  // `index`: the KvCacheManager's (KvCacheManager::AttachChunkIndex), so chunks share the prefix
  // cache's pool; it owns it. InvalidArgument for a null index or a negative first_k.
  static absl::StatusOr<std::unique_ptr<SimulatedChunkReuse>> Create(
      std::unique_ptr<ChunkIndex> index, const SimulatedChunkReuseOptions& options);

  // Unpins every chunk still acquired.
  ~SimulatedChunkReuse() override;
  SimulatedChunkReuse(const SimulatedChunkReuse&) = delete;
  SimulatedChunkReuse& operator=(const SimulatedChunkReuse&) = delete;

  int32_t num_leading_tokens_to_compute() const override { return options_.first_k; }
  std::optional<AcquiredChunk> Acquire(std::span<const TokenId> tokens, std::string_view cache_salt,
                                       uint64_t adapter_id) override;
  void Release(int64_t handle) override;

  // Stands for the engine's RunMoves after Schedule: the moves need no work here; unpins every
  // chunk acquired for the step (the moved tokens are now the requests' own blocks).
  absl::Status ReleaseAcquired();

  // Registers chunk `tokens`, computed at positions position.., as a copy in blocks of its own
  // (see the banner). Returns true when a copy was made (the caller charges its KV copy), false
  // when the chunk is already registered or the pool has no block to give. InvalidArgument
  // (nothing changes) for an empty chunk or a negative position.
  absl::StatusOr<bool> Register(std::span<const TokenId> tokens, std::string_view cache_salt,
                                uint64_t adapter_id, int32_t position);

  // Chunks pinned by Acquire and not yet released.
  int32_t num_acquired() const { return pins_.size(); }
  const SimulatedChunkReuseStats& stats() const { return stats_; }
  const ChunkIndex& index() const { return *index_; }

 private:
  SimulatedChunkReuse(const SimulatedChunkReuseOptions& options, std::unique_ptr<ChunkIndex> index)
      : options_(options), index_(std::move(index)), pins_(index_.get()) {}
  BlockHash KeyOf(std::span<const TokenId> tokens, std::string_view cache_salt,
                  uint64_t adapter_id) const;

  SimulatedChunkReuseOptions options_;
  std::unique_ptr<ChunkIndex> index_;
  ChunkPins pins_;  // after index_: released before the index goes
  SimulatedChunkReuseStats stats_;
};

}  // namespace pagedkv::replay

#endif  // PAGEDKV_ENGINE_TOOLS_REPLAY_SERVE_MODE_SIMULATED_CHUNK_REUSE_H_
