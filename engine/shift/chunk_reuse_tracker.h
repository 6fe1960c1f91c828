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
//
// Example:
//   auto tracker = pagedkv::ChunkReuseTracker::Create(pool.get()).value();
//   std::vector<pagedkv::TrackedChunk> docs = {{.key = doc_key, .position = 700, .length = 512}};
//   PAGEDKV_RETURN_IF_ERROR(tracker->OnRequest(docs, /*prefix_hit_tokens=*/256));
//   int64_t shifted = tracker->stats().shifted_hit_tokens;
#ifndef PAGEDKV_ENGINE_SHIFT_CHUNK_REUSE_TRACKER_H_
#define PAGEDKV_ENGINE_SHIFT_CHUNK_REUSE_TRACKER_H_

#include <cstdint>
#include <memory>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pagedkv/block_hash.h"
#include "pagedkv/block_pool.h"
#include "pagedkv/chunk_index.h"

namespace pagedkv {

// A marked chunk of one request.
struct TrackedChunk {
  BlockHash key;         // position-free identity of the chunk's content (e.g. ChunkKey)
  int64_t position = 0;  // first prompt position the chunk covers (>= 0)
  int64_t length = 0;    // tokens (> 0)
};

struct ChunkReuseStats {
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

class ChunkReuseTracker {
 public:
  // `pool` is not owned and must outlive the tracker. InvalidArgument when null.
  static absl::StatusOr<std::unique_ptr<ChunkReuseTracker>> Create(BlockPool* pool);

  // Accounts one request (see the banner). InvalidArgument (nothing counted, nothing changed) for
  // a negative prefix_hit_tokens, or a chunk with a negative position, a length < 1, or a length
  // over 2^30 tokens.
  absl::Status OnRequest(std::span<const TrackedChunk> chunks, int64_t prefix_hit_tokens);

  const ChunkReuseStats& stats() const { return stats_; }
  const ChunkIndex& index() const { return *index_; }

 private:
  ChunkReuseTracker(BlockPool* pool, std::unique_ptr<ChunkIndex> index)
      : pool_(pool), index_(std::move(index)) {}

  BlockPool* pool_;
  std::unique_ptr<ChunkIndex> index_;
  ChunkReuseStats stats_;
};

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_SHIFT_CHUNK_REUSE_TRACKER_H_
