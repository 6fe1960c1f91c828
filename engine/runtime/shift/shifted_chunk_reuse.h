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
// KV cache groups (options.groups, the KvCacheManager's; more than one for a model with
// sliding-window layers): a chunk is cached as one copy per group, in blocks of its own and under
// its own key (group g's: FoldGroupHash(chunk key, g)), in the one pool and one eviction order.
// A full-attention group's copy holds every token of the chunk; a sliding-window group's only the
// chunk's last min(length, window) tokens (the scheduler reuses a chunk up to its end, or the
// token before it, and no later token's window reaches further back; the tokens before the tail
// are never read, and the blocks they would land in are never prefix-cached, see
// AllocateOptions::no_cache_from_token). Acquire pins every group's copy or none; the scheduler
// moves each group's tokens in its own slots (ScheduledBatch::group_slot_moves), RunMoves runs
// them through the mover group by group, and Register copies each group's span. A group whose
// copy was evicted makes the chunk a miss; the next Register of the chunk copies that group again
// (the others stay as they are: each group's copy has its own position).
//
// Hash level (TouchKey, RegisterKey): for a caller that names chunks by key and holds neither
// their tokens nor their KV (cache-mode replay, whose workload marks chunks by content id). The
// same index, pool and eviction rules as Acquire / Register; a chunk stands as `num_tokens`
// placeholder tokens, so the index should not verify tokens (ChunkIndexOptions::verify_tokens =
// false). A BeforeUnpin callback sees a chunk's blocks while they are still pinned, right before
// they are unpinned: a clairvoyant eviction policy learns their next use there.
//
// Float keys (options.float_keys_bytes > 0, only with a mover): Register also takes the chunk's
// float keys and keeps each group copy's in a ChunkFloatKeys store of that many bytes
// (chunk_float_keys.h); a move of a token whose copy still has its float keys re-rotates the float
// key (ChunkKvMover::MoveSlotsFromKeys), so a quantized key is rounded once, not twice. A copy
// registered without float keys drops its old entry; the others move from their rounded keys.
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

#include <algorithm>
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
#include "engine/runtime/shift/chunk_float_keys.h"
#include "engine/runtime/shift/chunk_kv_mover.h"
#include "engine/runtime/shift/chunk_pins.h"
#include "engine/runtime/shift/float_key_sources.h"
#include "pagedkv/cache/chunk_index.h"
#include "pagedkv/cache/kv_cache_groups.h"
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
  // The KvCacheManager's KV cache groups (KvCacheManagerOptions::groups; see the banner); empty:
  // one full-attention group. Group 0 must be full attention; CacheBlend needs one group.
  std::vector<KvCacheGroupSpec> groups;
  // Host memory for registered chunks' float keys (see the banner), in bytes; >= 0; 0: off.
  // Needs a mover.
  int64_t float_keys_bytes = 0;
};

// A chunk's float keys for Register: the keys as the KV write rotated them, before the storage
// rounding (ModelOutput::rotated_keys of the passes that computed the chunk). groups[g] is
// [layers of group g (ascending), chunk tokens, width]. Empty groups: none.
struct PAGEDKV_EXPORT ChunkFloatKeysInput {
  int64_t width = 0;  // n_kv_heads * head_dim
  std::span<const std::vector<float>> groups = {};
};

// Counters since construction.
struct PAGEDKV_EXPORT ShiftedChunkReuseStats {
  int64_t acquired = 0;            // Acquire and TouchKey calls that found a chunk
  int64_t released_unused = 0;     // of those, released by the scheduler without using them
  int64_t registered = 0;          // Register(Key) calls that made a copy (of some group)
  int64_t registered_tokens = 0;   // the chunk tokens of those calls
  int64_t register_failures = 0;   // Register(Key) calls that made none, a group finding no block
  int64_t already_registered = 0;  // Register(Key) calls for a chunk every group had cached
  int64_t float_key_moves = 0;     // token moves (per group) re-rotated from kept float keys
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
  // above 0 without a mover or over several groups, a negative deviation_layer, or groups that
  // CheckKvCacheGroups refuses or whose group 0 is not full attention.
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

  // Runs `moves` (group 0's) and `group_moves` (groups 1..G-1's: ScheduledBatch::slot_moves and
  // group_slot_moves) through the mover (nothing without one; empty lists are skipped), then
  // releases every chunk still acquired. The mover's errors are passed through (the chunks are
  // released in any case). InvalidArgument (nothing moved, chunks released) for more group lists
  // than groups past the first.
  absl::Status RunMoves(std::span<const KvSlotMove> moves,
                        std::span<const std::vector<KvSlotMove>> group_moves = {});

  // Registers chunk `tokens`, computed at positions position.. with its KV in `slots`
  // ([tokens.size()] slots of group 0; may be empty without a mover) and, over G > 1 groups,
  // `group_slots` (G - 1 lists of [tokens.size()] slots of groups 1..G-1, of which a
  // sliding-window group's copy reads only the last min(length, window); empty without a mover),
  // as a copy per group in blocks of its own (see the banner). True when a copy of some group was
  // made, false when every group's is already registered or the pool has no block to give.
  // InvalidArgument (nothing changes) for an empty chunk, a negative position, slot counts that
  // do not match or a negative slot that a group's copy reads; the mover's errors are passed
  // through (the copies of other groups this call made are forgotten again; their blocks stay
  // cached and evictable until the pool evicts them, as after ChunkIndex::Erase).
  // With float keys on, `float_keys` (if not empty) are the chunk's; a group copy made keeps its
  // tokens' (ignored with float keys off). InvalidArgument also for float keys of the wrong shape.
  absl::StatusOr<bool> Register(std::span<const TokenId> tokens, std::string_view cache_salt,
                                uint64_t adapter_id, int32_t position,
                                std::span<const int64_t> slots,
                                std::span<const std::vector<int64_t>> group_slots = {},
                                const ChunkFloatKeysInput& float_keys = {});

  // Hash level (see the banner). Looks chunk `key` of `num_tokens` tokens up; when it is cached
  // (every group's copy), pins its blocks, calls `before_unpin` (once per group) and unpins them
  // (tail first). Returns the position group 0's cached copy was computed at, or nullopt when it
  // is not cached. InvalidArgument (nothing changes) for num_tokens < 1 or over
  // kMaxKeyedChunkTokens.
  absl::StatusOr<std::optional<int32_t>> TouchKey(const BlockHash& key, int32_t num_tokens,
                                                  const BeforeUnpin& before_unpin = {});

  // Hash level (see the banner). Registers a copy of chunk `key` of `num_tokens` tokens computed
  // at `position` in blocks of its own, one per group, as Register does (no KV is written);
  // `before_unpin` sees each copy's new blocks before they become evictable. kInserted (a copy of
  // some group was made), kAlreadyRegistered or kNoRoom (the pool had no block to give).
  // InvalidArgument (nothing changes) for num_tokens < 1 or over kMaxKeyedChunkTokens, or a
  // negative position (or one whose chunk ends past 2^31 - 1).
  absl::StatusOr<ChunkCopyResult> RegisterKey(const BlockHash& key, int32_t num_tokens,
                                              int32_t position,
                                              const BeforeUnpin& before_unpin = {});

  // Chunks pinned by Acquire and not yet released.
  int32_t num_acquired() const { return pins_.size(); }
  const ShiftedChunkReuseStats& stats() const { return stats_; }
  const ChunkIndex& index() const { return *index_; }
  const ShiftedChunkReuseOptions& options() const { return options_; }
  bool has_mover() const { return mover_ != nullptr; }
  // The float keys kept (null with float keys off).
  const ChunkFloatKeys* float_keys() const { return float_keys_.get(); }
  // KV cache groups (1 when options.groups is empty).
  int32_t num_groups() const { return std::max<int32_t>(1, options_.groups.size()); }

 private:
  ShiftedChunkReuse(std::unique_ptr<ChunkIndex> index, std::unique_ptr<ChunkKvMover> mover,
                    const ShiftedChunkReuseOptions& options);
  BlockHash KeyOf(std::span<const TokenId> tokens, std::string_view cache_salt,
                  uint64_t adapter_id) const;
  // Group g's copy of a chunk of `num_tokens` tokens under `key`: its key, and the index of the
  // first chunk token it holds (0 for a full-attention group).
  BlockHash GroupKey(const BlockHash& key, int32_t g) const;
  int32_t FirstKeptToken(int32_t g, int32_t num_tokens) const;
  // Register's argument checks (see Register).
  absl::Status ValidateRegister(std::span<const TokenId> tokens, int32_t position,
                                std::span<const int64_t> slots,
                                std::span<const std::vector<int64_t>> group_slots) const;
  absl::Status ValidateFloatKeys(int32_t num_tokens, const ChunkFloatKeysInput& float_keys) const;
  // With float keys on: keeps group g's copy's float keys (from `float_keys`, the chunk of
  // `num_tokens` tokens computed at `position`), or drops its old entry when there are none.
  void KeepFloatKeys(int32_t g, const BlockHash& key, int32_t position, int32_t num_tokens,
                     const ChunkFloatKeysInput& float_keys);
  // With float keys on: the float key sources of the chunk `acquired` under `key`.
  void AddFloatKeySources(const BlockHash& key, int32_t num_tokens, const AcquiredChunk& acquired);
  // Group g's moves through the mover: from float keys where they are kept.
  absl::Status MoveGroup(int32_t g, std::span<const KvSlotMove> moves);
  // Registers group g's copy of chunk `key` (`tokens`, computed at `position`), its KV copied
  // from `slots` ([tokens.size()]; empty without a mover) by the mover.
  absl::StatusOr<ChunkCopyResult> RegisterGroup(int32_t g, const BlockHash& key,
                                                std::span<const TokenId> tokens, int32_t position,
                                                std::span<const int64_t> slots);
  // Forgets the copies of chunk `key` of `groups` (a failed Register's); the first error.
  absl::Status ForgetGroups(const BlockHash& key, std::span<const int32_t> groups);
  // The InsertCopy callback: the mover copies `slots` into `blocks` on group g's layers (nothing
  // without a mover).
  absl::Status CopyInto(int32_t g, std::span<const BlockId> blocks, std::span<const int64_t> slots,
                        int32_t position) const;
  void Count(ChunkCopyResult result, int64_t num_tokens);
  // num_tokens placeholder tokens (zeros) for the hash-level calls; grows placeholder_.
  std::span<const TokenId> Placeholder(int32_t num_tokens);

  ShiftedChunkReuseOptions options_;
  std::unique_ptr<ChunkKvMover> mover_;  // null: nothing moves
  std::string rope_fingerprint_;
  std::unique_ptr<ChunkIndex> index_;
  ChunkPins pins_;                              // after index_: released before the index goes
  std::unique_ptr<ChunkFloatKeys> float_keys_;  // null: float keys off
  FloatKeySources float_key_sources_;           // this step's acquired chunks' float keys
  ShiftedChunkReuseStats stats_;
  std::vector<TokenId> placeholder_;  // zeros; the hash-level calls' tokens
};

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_RUNTIME_SHIFT_SHIFTED_CHUNK_REUSE_H_
