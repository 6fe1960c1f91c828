// Copyright 2026 The pagedkv Authors.
//
// ChunkReuseTracker: shifted-position hit accounting at the hash level - no KV, no model - for
// tools that drive a BlockPool directly (e.g. a replay of a workload whose requests mark
// documents). It keeps a ChunkIndex on the same pool as the prefix cache, so chunk copies compete
// for the same blocks and follow the same eviction order as prefix blocks.
//
// Per request, after the prefix lookup served its first `prefix_hit_tokens` tokens:
//   * a marked chunk entirely inside the prefix hit needs nothing;
//   * otherwise its key is looked up; a hit serves the chunk's tokens past the prefix hit (pinned
//     while counted, as an engine pins it while re-rotating) and is "shifted" when the cached copy
//     sits at another position;
//   * a miss is computed by the request and registered: a copy in blocks of its own (allocated
//     from the pool, evicting through its policy; counted as a failure when the pool is full),
//     then released, evictable like any cached block.
// A clairvoyant eviction policy (replay's belady) learns when a chunk's blocks are next needed
// through ChunkReuseTrackerOptions::before_unpin, called with the chunk's next_use right before
// the tracker unpins its blocks (after a hit and after a registration; with
// refresh_covered_chunks also after pinning the cached copy of a chunk that the prefix hit
// covers, so that the next use it learnt earlier, now past, does not keep the copy forever; and
// with retire_orphaned_blocks, once per OnRequest call, with kChunkNeverUsed for the blocks of a
// copy that lost another of its blocks to eviction: they can never be read again).
//
// Example:
//   auto tracker = pagedkv::ChunkReuseTracker::Create(pool.get()).value();
//   std::vector<pagedkv::TrackedChunk> docs = {{.key = doc_key, .position = 700, .length = 512}};
//   PAGEDKV_RETURN_IF_ERROR(tracker->OnRequest(docs, /*prefix_hit_tokens=*/256));
//   int64_t shifted = tracker->stats().shifted_hit_tokens;
#ifndef PAGEDKV_ENGINE_RUNTIME_SHIFT_CHUNK_REUSE_TRACKER_H_
#define PAGEDKV_ENGINE_RUNTIME_SHIFT_CHUNK_REUSE_TRACKER_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/cache/block_pool.h"
#include "pagedkv/cache/chunk_index.h"
#include "pagedkv/events/kv_events.h"
#include "pagedkv/export.h"

namespace pagedkv {

// "Never needed again" in TrackedChunk::next_use.
inline constexpr int64_t kChunkNeverUsed = std::numeric_limits<int64_t>::max();

// A marked chunk of one request.
struct PAGEDKV_EXPORT TrackedChunk {
  BlockHash key;         // position-free identity of the chunk's content (e.g. ChunkKey)
  int64_t position = 0;  // first prompt position the chunk covers (>= 0)
  int64_t length = 0;    // tokens (> 0)
  // When the same key is next looked up (e.g. the next request index marking it), for
  // clairvoyant policies; only passed to ChunkReuseTrackerOptions::before_unpin.
  int64_t next_use = kChunkNeverUsed;
};

struct PAGEDKV_EXPORT ChunkReuseTrackerOptions {
  // Called with a chunk's blocks (in order) and its TrackedChunk::next_use right before the
  // tracker unpins them; may be empty. It must not touch the pool.
  std::function<void(std::span<const BlockId> blocks, int64_t next_use)> before_unpin;
  // With before_unpin: a chunk covered by the prefix hit whose copy is cached is pinned and
  // unpinned (through before_unpin; counted as neither lookup nor hit), so the pool's policy sees
  // it as asked for. A clairvoyant policy needs this; for lru/lfu it would count as a use.
  bool refresh_covered_chunks = false;
  // With before_unpin: when the pool evicts one block of a chunk copy the tracker registered, the
  // copy is dropped from the index but its other blocks stay cached, useless. At the start and
  // end of each OnRequest they are pinned and unpinned through before_unpin with
  // kChunkNeverUsed, so a clairvoyant policy evicts them first instead of keeping them for a use
  // that will not come. A no-op for the pool's content otherwise.
  bool retire_orphaned_blocks = false;
};

struct PAGEDKV_EXPORT ChunkReuseStats {
  int64_t requests = 0;            // OnRequest calls
  int64_t chunks = 0;              // chunks seen
  int64_t prefix_covered = 0;      // chunks entirely inside the request's prefix hit
  int64_t lookups = 0;             // chunks looked up in the index
  int64_t hits = 0;                // found (at any position)
  int64_t shifted_hits = 0;        // found at another position
  int64_t hit_tokens = 0;          // tokens past the prefix hit served by chunk hits
  int64_t shifted_hit_tokens = 0;  // of those, served by shifted hits
  int64_t registered = 0;          // misses copied into blocks of their own
  int64_t register_failures = 0;   // misses not registered: the pool had no block to give
};

class PAGEDKV_EXPORT ChunkReuseTracker {
 public:
  // `pool` is not owned and must outlive the tracker. InvalidArgument when null.
  static absl::StatusOr<std::unique_ptr<ChunkReuseTracker>> Create(
      BlockPool* pool, ChunkReuseTrackerOptions options = {});

  // Accounts one request (see the banner). InvalidArgument (nothing counted, nothing changed) for
  // a negative prefix_hit_tokens, or a chunk with a negative position, a length < 1, or a length
  // over 2^30 tokens.
  absl::Status OnRequest(std::span<const TrackedChunk> chunks, int64_t prefix_hit_tokens);

  const ChunkReuseStats& stats() const { return stats_; }
  const ChunkIndex& index() const { return *index_; }

  ~ChunkReuseTracker();
  ChunkReuseTracker(const ChunkReuseTracker&) = delete;
  ChunkReuseTracker& operator=(const ChunkReuseTracker&) = delete;

 private:
  ChunkReuseTracker(BlockPool* pool, ChunkReuseTrackerOptions options,
                    std::unique_ptr<ChunkIndex> index);
  // Pool listener (retire_orphaned_blocks): a removed copy block orphans its siblings.
  void OnPoolEvent(const KvEvent& event);
  // Reports every orphaned block still cached and unpinned as never used again.
  absl::Status RetireOrphans();
  // OnRequest's steps for one chunk: one wholly inside the prefix hit (its copy's next use moves
  // on); a lookup that hits; a miss registered as a copy in new blocks (when there is room).
  // `placeholder` holds one entry per chunk token.
  absl::Status RefreshCoveredChunk(const TrackedChunk& chunk,
                                   const std::vector<TokenId>& placeholder);
  absl::StatusOr<bool> TryHit(const TrackedChunk& chunk, int64_t remaining,
                              const std::vector<TokenId>& placeholder);
  absl::Status RegisterCopy(const TrackedChunk& chunk, const std::vector<TokenId>& placeholder);

  BlockPool* pool_;
  ChunkReuseTrackerOptions options_;
  int listener_id_ = -1;
  // With retire_orphaned_blocks: the blocks of each registered copy, each block's copy, and the
  // orphans (block, generation when orphaned) waiting for RetireOrphans.
  absl::flat_hash_map<BlockHash, std::vector<BlockId>, BlockHashMix> copies_;
  absl::flat_hash_map<BlockId, BlockHash> copy_of_block_;
  std::vector<std::pair<BlockId, uint32_t>> orphans_;
  std::unique_ptr<ChunkIndex> index_;
  ChunkReuseStats stats_;
};

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_RUNTIME_SHIFT_CHUNK_REUSE_TRACKER_H_
