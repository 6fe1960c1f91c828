// Copyright 2026 The pagedkv Authors.
//
// ChunkReplay: cache-mode replay's shifted-position reuse. A request's marked chunks go, at the
// hash level, through the engine's own chunk-reuse implementation (ShiftedChunkReuse::TouchKey /
// RegisterKey, engine/runtime/shift), over a ChunkIndex on the replay's BlockPool, so chunk
// copies and prefix blocks share one capacity and one eviction order.
//
// Per request, once its prefix hit covers `prefix_tokens` tokens (and while its blocks are still
// pinned), each marked chunk in prompt order:
//   * entirely inside the prefix hit: needs nothing (chunks_in_prefix); with the belady policy
//     its cached copy, if any, is touched so that its next use moves on to the chunk's next one;
//   * otherwise looked up by key: a hit serves the chunk's tokens past the prefix hit
//     (shifted_hit_tokens; "moved" when the copy was computed at another position);
//   * a miss is registered as a copy in blocks of its own (chunks_registered), evicting through
//     the pool's policy, or counted as a failure when the pool has no block to give.
// With belady, the copy's blocks are given the chunk's next use (TrackedChunk::next_use) while
// they are pinned, after a hit and after a registration.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(auto chunks, ChunkReplay::Create(pool.get(), belady));
//   // request r's chunks: w.chunks[w.chunk_begin[r] .. w.chunk_begin[r + 1])
//   PAGEDKV_RETURN_IF_ERROR(chunks->CountRequest(request_chunks, prefix_tokens, 16, result));
#ifndef PAGEDKV_ENGINE_TOOLS_REPLAY_CACHE_MODE_CHUNK_REPLAY_H_
#define PAGEDKV_ENGINE_TOOLS_REPLAY_CACHE_MODE_CHUNK_REPLAY_H_

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/runtime/shift/shifted_chunk_reuse.h"
#include "engine/tools/replay/cache_mode/belady_policy.h"
#include "engine/tools/replay/cache_mode/cache_replay.h"
#include "engine/tools/replay/workload/block_expansion.h"
#include "pagedkv/cache/block_pool.h"
#include "pagedkv/cache/chunk_index.h"
#include "pagedkv/cache/kv_cache_groups.h"
#include "pagedkv/export.h"

namespace pagedkv::replay {

class PAGEDKV_EXPORT ChunkReplay {
 public:
  // Chunk reuse over `pool` (not owned; must outlive this). `belady`: the pool's policy when it
  // is the clairvoyant one (not owned), else null. InvalidArgument for a null pool.
  static absl::StatusOr<std::unique_ptr<ChunkReplay>> Create(BlockPool* pool, BeladyPolicy* belady);

  // Chunk reuse over `index` (a KvCacheManager's, from AttachChunkIndex with verify_tokens =
  // false) whose manager has KV cache `groups` (empty: one full-attention group): a chunk is
  // cached as one copy per group (ShiftedChunkReuse's banner). InvalidArgument for a null index
  // or groups ShiftedChunkReuse refuses.
  static absl::StatusOr<std::unique_ptr<ChunkReplay>> Create(
      std::unique_ptr<ChunkIndex> index, BeladyPolicy* belady,
      const std::vector<KvCacheGroupSpec>& groups);

  // Counts one request's `chunks` (see the banner) into `result`'s chunk fields. InvalidArgument
  // (nothing counted, nothing changed) for a negative prefix_tokens, or a chunk with a negative
  // position, a length < 1 or over 2^30 tokens, or one that ends past 2^31 - 1.
  absl::Status CountRequest(std::span<const TrackedChunk> chunks, int64_t prefix_tokens,
                            int32_t block_size, CacheReplayResult& result);

  const ShiftedChunkReuse& reuse() const { return *reuse_; }

 private:
  ChunkReplay(std::unique_ptr<ShiftedChunkReuse> reuse, BeladyPolicy* belady)
      : reuse_(std::move(reuse)), belady_(belady) {}
  // Gives `next_use` to the blocks it is called with (nothing without belady).
  BeforeUnpin NextUse(int64_t next_use) const;
  // CountRequest's step for one valid chunk.
  absl::Status CountChunk(const TrackedChunk& chunk, int64_t prefix_tokens, int32_t block_size,
                          CacheReplayResult& result);

  std::unique_ptr<ShiftedChunkReuse> reuse_;
  BeladyPolicy* const belady_;
};

}  // namespace pagedkv::replay

#endif  // PAGEDKV_ENGINE_TOOLS_REPLAY_CACHE_MODE_CHUNK_REPLAY_H_
