// Copyright 2026 The pagedkv Authors.
//
// EngineChunkReuse: shifted-position reuse inside the Engine. It is the scheduler's
// ChunkReuseProvider over a ChunkIndex that lives on the KvCacheManager's BlockPool (one set of
// reference counts, one eviction order with the prefix cache), and it runs the scheduler's slot
// moves on the ModelRunner's pages (ReRotateSlots: K re-rotated from the old to the new position,
// V copied, whatever the block alignment).
//
// Per engine step:
//   1. Scheduler::Schedule acquires (pins) cached chunks through Acquire and lists KvSlotMoves;
//   2. RunMoves(batch.slot_moves) re-rotates them into the requests' slots and releases every
//      acquired chunk (the moved KV is now the requests' own);
//   3. after the forward pass, Register(...) copies each chunk span the step finished computing
//      into blocks of its own and registers it at its position, so a later request can reuse it.
//
// CacheBlend (options.recompute_fraction > 0): the scheduler also puts the reused tokens in the
// batch (blend_reused_tokens()), and MakeBlendHook turns them into a CacheBlendHook
// (engine/runtime/shift/cache_blend_hook.h) for the step's forward pass: every reused token runs
// through layers 0..deviation_layer in context, and the recompute_fraction of each chunk's reused
// tokens (of the part reused in one step, when the token budget splits a chunk over steps) whose
// K/V deviate most from the re-rotated K/V at deviation_layer go on through every layer; the others
// keep their re-rotated K/V above deviation_layer. Why in the forward pass and not in a probe model
// as ShiftedPrefill does: the first layers are computed once, in the same batch as the rest of the
// step, and layers 0..deviation_layer end with fresh K/V for every chunk token, as in CacheBlend.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<pagedkv::ChunkIndex> index, cache.AttachChunkIndex());
//   PAGEDKV_ASSIGN_OR_RETURN(auto reuse, pagedkv::EngineChunkReuse::Create(
//       &runner, std::move(index), {.model_fingerprint = fingerprint}));
//   scheduler.SetChunkReuseProvider(reuse.get());
//   PAGEDKV_RETURN_IF_ERROR(scheduler.Schedule(&batch));
//   PAGEDKV_RETURN_IF_ERROR(reuse->RunMoves(batch.slot_moves));
//   ...  // forward pass, then Register the spans it completed
//
// Not thread-safe; the runner and the index's pool (its KvCacheManager) must outlive it.
#ifndef PAGEDKV_ENGINE_RUNTIME_SHIFT_ENGINE_CHUNK_REUSE_H_
#define PAGEDKV_ENGINE_RUNTIME_SHIFT_ENGINE_CHUNK_REUSE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/runner/model_runner.h"
#include "engine/runtime/shift/cache_blend_hook.h"
#include "engine/runtime/shift/chunk_pins.h"
#include "pagedkv/cache/chunk_index.h"
#include "pagedkv/export.h"
#include "pagedkv/runtime/scheduler.h"
#include "pagedkv/types.h"

namespace pagedkv {

struct PAGEDKV_EXPORT EngineChunkReuseOptions {
  int32_t first_k = 0;  // leading tokens of each chunk always recomputed (EPIC); >= 0
  // CacheBlend: fraction of each reused chunk's tokens recomputed through every layer (those whose
  // K/V deviate most at deviation_layer); in [0, 1]; 0: off (plain re-rotated reuse).
  double recompute_fraction = 0.0;
  // Layer whose K/V deviation ranks the tokens; in [0, n_layers) when recompute_fraction > 0.
  int32_t deviation_layer = 1;
  std::string model_fingerprint;  // model id / shape / KV dtype, hashed into every chunk key
};

class PAGEDKV_EXPORT EngineChunkReuse final : public ChunkReuseProvider {
 public:
  // `index`: the KvCacheManager's (KvCacheManager::AttachChunkIndex), so chunks share the prefix
  // cache's pool; it owns it. InvalidArgument for null arguments, a negative first_k, a
  // recompute_fraction outside [0, 1], a deviation_layer outside [0, n_layers) with blending on
  // (< 0 in any case), or an index whose pool's shape differs from the runner's KV pages.
  static absl::StatusOr<std::unique_ptr<EngineChunkReuse>> Create(
      ModelRunner* runner, std::unique_ptr<ChunkIndex> index,
      const EngineChunkReuseOptions& options);

  ~EngineChunkReuse() override;
  EngineChunkReuse(const EngineChunkReuse&) = delete;
  EngineChunkReuse& operator=(const EngineChunkReuse&) = delete;

  int32_t num_leading_tokens_to_compute() const override { return options_.first_k; }
  std::optional<AcquiredChunk> Acquire(std::span<const TokenId> tokens, std::string_view cache_salt,
                                       uint64_t adapter_id) override;
  void Release(int64_t handle) override;
  bool blend_reused_tokens() const override { return options_.recompute_fraction > 0.0; }

  // The selective-recompute hook of `batch`'s forward pass: one BlendGroup per sequence with blend
  // tokens (its first num_blend_tokens rows; NumToRecompute(recompute_fraction, rows) kept),
  // ranked at options().deviation_layer. nullopt when the batch has no blend tokens.
  std::optional<CacheBlendHook> MakeBlendHook(const ScheduledBatch& batch) const;

  // Runs `moves` on every layer, then releases every chunk still acquired. Backend errors are
  // passed through (the chunks are released in any case).
  absl::Status RunMoves(std::span<const KvSlotMove> moves);

  // Registers the chunk `tokens` whose KV lies in `slots` ([tokens.size()]) at positions
  // position.. : copies it into newly allocated pool blocks (cached under chunk-domain hashes,
  // evictable once registered). Does nothing when the chunk is already registered or the pool has
  // no block to spare. Backend errors are passed through.
  absl::Status Register(std::span<const TokenId> tokens, std::string_view cache_salt,
                        uint64_t adapter_id, int32_t position, std::span<const int64_t> slots);

  const ChunkIndex& index() const { return *index_; }
  const EngineChunkReuseOptions& options() const { return options_; }

 private:
  EngineChunkReuse(ModelRunner* runner, const EngineChunkReuseOptions& options,
                   std::unique_ptr<ChunkIndex> index);
  BlockHash KeyOf(std::span<const TokenId> tokens, std::string_view cache_salt,
                  uint64_t adapter_id) const;

  ModelRunner* runner_;
  EngineChunkReuseOptions options_;
  std::string rope_fingerprint_;
  std::unique_ptr<ChunkIndex> index_;
  ChunkPins pins_{index_.get()};  // after index_: released before the index goes
};

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_RUNTIME_SHIFT_ENGINE_CHUNK_REUSE_H_
