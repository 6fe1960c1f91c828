// Copyright 2026 The pagedkv Authors.
//
// ShiftedChunkReuse: the scheduler's ChunkReuseProvider for shifted-position reuse, used by the
// Engine and by serve-mode replay alike. It works over a ChunkIndex on the KvCacheManager's
// BlockPool (one set of reference counts, one eviction order with the prefix cache):
//   * Acquire finds a cached chunk by its content key (ChunkKey over the chunk's tokens, the cache
//     salt, the adapter, the mover's RoPE fingerprint and the model fingerprint) and pins its
//     blocks, so the pool cannot evict them while the step re-rotates them;
//   * RunMoves runs the scheduler's KvSlotMoves through the mover, then releases every chunk still
//     acquired (the moved KV is now the requests' own);
//   * Register, once a chunk span has been computed, allocates ceil(length / block_size) blocks
//     from the same pool (ChunkIndex::InsertCopy, evicting through the pool's policy; nothing is
//     registered when no block can be given), has the mover copy the span's KV into them,
//     registers them at the span's position and leaves them evictable.
// The data movement is a ChunkKvMover (chunk_kv_mover.h). The engine passes one over the model
// runner's pages (runner_kv_mover.h: CreateRunnerChunkReuse); serve-mode replay, which has no KV,
// passes none: nothing moves, and the pins, pool calls and stats are the same as with a mover.
//
// Hash level (TouchKey, RegisterKey): for a caller that names chunks by key and holds neither
// their tokens nor their KV (cache-mode replay, whose workload marks chunks by content id). The
// same index, pool and eviction rules as Acquire / Register; a chunk stands as `num_tokens`
// placeholder tokens, so the index should not verify tokens (ChunkIndexOptions::verify_tokens =
// false). A BeforeUnpin callback sees a chunk's blocks while they are still pinned, right before
// they are unpinned: a clairvoyant eviction policy learns their next use there.
//
// CacheBlend (options.recompute_fraction > 0, only with a mover): the scheduler also schedules the
// reused tokens (blend_reused_tokens()); the engine turns them into a CacheBlendHook with
// MakeBlendHook (cache_blend_hook.h).
//
// Per step:
//   PAGEDKV_ASSIGN_OR_RETURN(auto reuse, ShiftedChunkReuse::Create(
//       manager->AttachChunkIndex().value(), /*mover=*/nullptr, {.model_fingerprint = "m"}));
//   scheduler->SetChunkReuseProvider(reuse.get());
//   PAGEDKV_RETURN_IF_ERROR(scheduler->Schedule(&batch));         // may Acquire chunks
//   PAGEDKV_RETURN_IF_ERROR(reuse->RunMoves(batch.slot_moves));   // moves, then releases
//   ...  // forward pass (or its simulation)
//   PAGEDKV_ASSIGN_OR_RETURN(bool copied, reuse->Register(chunk_tokens, "", 0, offset, slots));
//
// Hash level, on a bare pool (cache-mode replay):
//   PAGEDKV_ASSIGN_OR_RETURN(auto index, ChunkIndex::Create(pool, {.verify_tokens = false}));
//   PAGEDKV_ASSIGN_OR_RETURN(auto reuse, ShiftedChunkReuse::Create(std::move(index), nullptr, {}));
//   PAGEDKV_ASSIGN_OR_RETURN(std::optional<int32_t> cached_at, reuse->TouchKey(doc_key, 512));
//   if (!cached_at) PAGEDKV_RETURN_IF_ERROR(reuse->RegisterKey(doc_key, 512, 700).status());
//
// Not thread-safe; the index's pool (its KvCacheManager), and whatever the mover works on, must
// outlive it.
#ifndef PAGEDKV_ENGINE_RUNTIME_SHIFT_SHIFTED_CHUNK_REUSE_H_
#define PAGEDKV_ENGINE_RUNTIME_SHIFT_SHIFTED_CHUNK_REUSE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/runtime/shift/chunk_kv_mover.h"
#include "engine/runtime/shift/chunk_pins.h"
#include "pagedkv/cache/chunk_index.h"
#include "pagedkv/export.h"
#include "pagedkv/runtime/scheduler.h"
#include "pagedkv/types.h"

namespace pagedkv {

struct PAGEDKV_EXPORT ShiftedChunkReuseOptions {
  int32_t first_k = 0;  // leading tokens of each chunk always recomputed (EPIC); >= 0
  // CacheBlend: fraction of each reused chunk's tokens recomputed through every layer (those whose
  // K/V deviate most at deviation_layer); in [0, 1]; 0: off (plain re-rotated reuse). Needs a
  // mover (there is no KV to recompute without one).
  double recompute_fraction = 0.0;
  // Layer whose K/V deviation ranks the tokens; >= 0 (and below the model's layer count with
  // blending on: CreateRunnerChunkReuse checks it).
  int32_t deviation_layer = 1;
  std::string model_fingerprint;  // model id / shape / KV dtype, hashed into every chunk key
};

// Counters since construction.
struct PAGEDKV_EXPORT ShiftedChunkReuseStats {
  int64_t acquired = 0;            // Acquire and TouchKey calls that found a chunk
  int64_t released_unused = 0;     // of those, released by the scheduler without using them
  int64_t registered = 0;          // chunk copies registered
  int64_t registered_tokens = 0;   // tokens of those copies
  int64_t register_failures = 0;   // Register(Key) calls that found no block to give
  int64_t already_registered = 0;  // Register(Key) calls for a chunk already cached
};

// Sees a chunk's blocks (in order) while they are pinned, right before ShiftedChunkReuse unpins
// them. It must not touch the pool, the index or the ShiftedChunkReuse. Empty: nothing is called.
using BeforeUnpin = std::function<void(std::span<const BlockId> blocks)>;

// The longest chunk TouchKey and RegisterKey take (2^30 tokens).
inline constexpr int32_t kMaxKeyedChunkTokens = int32_t{1} << 30;

// The RoPE fingerprint in the keys of a provider without a mover: the simulated model has no
// rotation of its own, its model fingerprint names it.
inline constexpr std::string_view kNoMoverRopeFingerprint = "replay";

class PAGEDKV_EXPORT ShiftedChunkReuse final : public ChunkReuseProvider {
 public:
  // `index`: the KvCacheManager's (KvCacheManager::AttachChunkIndex), so chunks share the prefix
  // cache's pool; it owns it. `mover`: owned; null for bookkeeping only (nothing moves).
  // InvalidArgument for a null index, a negative first_k, a recompute_fraction outside [0, 1] or
  // above 0 without a mover, or a negative deviation_layer.
  static absl::StatusOr<std::unique_ptr<ShiftedChunkReuse>> Create(
      std::unique_ptr<ChunkIndex> index, std::unique_ptr<ChunkKvMover> mover,
      const ShiftedChunkReuseOptions& options);

  // Unpins every chunk still acquired.
  ~ShiftedChunkReuse() override;
  ShiftedChunkReuse(const ShiftedChunkReuse&) = delete;
  ShiftedChunkReuse& operator=(const ShiftedChunkReuse&) = delete;

  int32_t num_leading_tokens_to_compute() const override { return options_.first_k; }
  std::optional<AcquiredChunk> Acquire(std::span<const TokenId> tokens, std::string_view cache_salt,
                                       uint64_t adapter_id) override;
  void Release(int64_t handle) override;
  bool blend_reused_tokens() const override { return options_.recompute_fraction > 0.0; }

  // Runs `moves` through the mover (nothing without one or when `moves` is empty), then releases
  // every chunk still acquired. The mover's errors are passed through (the chunks are released in
  // any case).
  absl::Status RunMoves(std::span<const KvSlotMove> moves);

  // Registers chunk `tokens`, computed at positions position.. with its KV in `slots`
  // ([tokens.size()]; may be empty without a mover), as a copy in blocks of its own (see the
  // banner). True when a copy was made, false when the chunk is already registered or the pool
  // has no block to give. InvalidArgument (nothing changes) for an empty chunk, a negative
  // position or a slot count that does not match; the mover's errors are passed through.
  absl::StatusOr<bool> Register(std::span<const TokenId> tokens, std::string_view cache_salt,
                                uint64_t adapter_id, int32_t position,
                                std::span<const int64_t> slots);

  // Hash level (see the banner). Looks chunk `key` of `num_tokens` tokens up; when it is cached,
  // pins its blocks, calls `before_unpin` and unpins them (tail first). Returns the position its
  // cached copy was computed at, or nullopt when it is not cached. InvalidArgument (nothing
  // changes) for num_tokens < 1 or over kMaxKeyedChunkTokens.
  absl::StatusOr<std::optional<int32_t>> TouchKey(const BlockHash& key, int32_t num_tokens,
                                                  const BeforeUnpin& before_unpin = {});

  // Hash level (see the banner). Registers a copy of chunk `key` of `num_tokens` tokens computed
  // at `position` in blocks of its own, as Register does (no KV is written); `before_unpin` sees
  // the new blocks before they become evictable. kInserted, kAlreadyRegistered or kNoRoom (the
  // pool had no block to give; nothing changed). InvalidArgument (nothing changes) for
  // num_tokens < 1 or over kMaxKeyedChunkTokens, or a negative position (or one whose chunk
  // ends past 2^31 - 1).
  absl::StatusOr<ChunkCopyResult> RegisterKey(const BlockHash& key, int32_t num_tokens,
                                              int32_t position,
                                              const BeforeUnpin& before_unpin = {});

  // Chunks pinned by Acquire and not yet released.
  int32_t num_acquired() const { return pins_.size(); }
  const ShiftedChunkReuseStats& stats() const { return stats_; }
  const ChunkIndex& index() const { return *index_; }
  const ShiftedChunkReuseOptions& options() const { return options_; }
  bool has_mover() const { return mover_ != nullptr; }

 private:
  ShiftedChunkReuse(std::unique_ptr<ChunkIndex> index, std::unique_ptr<ChunkKvMover> mover,
                    const ShiftedChunkReuseOptions& options);
  BlockHash KeyOf(std::span<const TokenId> tokens, std::string_view cache_salt,
                  uint64_t adapter_id) const;
  // The InsertCopy callback: the mover copies `slots` into `blocks` (nothing without a mover).
  absl::Status CopyInto(std::span<const BlockId> blocks, std::span<const int64_t> slots,
                        int32_t position) const;
  void Count(ChunkCopyResult result, int64_t num_tokens);
  // num_tokens placeholder tokens (zeros) for the hash-level calls; grows placeholder_.
  std::span<const TokenId> Placeholder(int32_t num_tokens);

  ShiftedChunkReuseOptions options_;
  std::unique_ptr<ChunkKvMover> mover_;  // null: nothing moves
  std::string rope_fingerprint_;
  std::unique_ptr<ChunkIndex> index_;
  ChunkPins pins_;  // after index_: released before the index goes
  ShiftedChunkReuseStats stats_;
  std::vector<TokenId> placeholder_;  // zeros; the hash-level calls' tokens
};

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_RUNTIME_SHIFT_SHIFTED_CHUNK_REUSE_H_
