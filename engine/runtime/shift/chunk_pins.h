// Copyright 2026 The pagedkv Authors.
//
// ChunkPins: the chunks a ChunkReuseProvider has acquired for the scheduler (pinned through a
// ChunkIndex, so they cannot be evicted while their KV is read) and not yet released, keyed by the
// handle the scheduler holds. ShiftedChunkReuse (shifted_chunk_reuse.h) keeps its pins here.
//
// Example:
//   ChunkPins pins(index.get());
//   std::optional<AcquiredChunk> chunk = pins.Acquire(key, tokens);  // pinned, slots filled
//   ...                                 // re-rotate chunk->slots into the request's own slots
//   PAGEDKV_RETURN_IF_ERROR(pins.ReleaseAll());
//
// Not thread-safe. The index must outlive the pins; destroying them releases every pin.
#ifndef PAGEDKV_ENGINE_RUNTIME_SHIFT_CHUNK_PINS_H_
#define PAGEDKV_ENGINE_RUNTIME_SHIFT_CHUNK_PINS_H_

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/cache/chunk_index.h"
#include "pagedkv/export.h"
#include "pagedkv/runtime/scheduler.h"
#include "pagedkv/types.h"

namespace pagedkv {

// One KV cache group's copy of a chunk, for ChunkPins::Acquire over several groups: its key, the
// chunk tokens the copy holds (the chunk's last ones) and the index of the first of them.
struct PAGEDKV_EXPORT ChunkPart {
  BlockHash key;
  std::span<const TokenId> tokens = {};
  int32_t first_token = 0;  // chunk token tokens[0] is; tokens end at the chunk's end
};

class PAGEDKV_EXPORT ChunkPins {
 public:
  explicit ChunkPins(ChunkIndex* index) : index_(index) {}
  ~ChunkPins();
  ChunkPins(const ChunkPins&) = delete;
  ChunkPins& operator=(const ChunkPins&) = delete;

  // Finds chunk `key` (with `tokens`, for the index's verification) and pins its blocks; the
  // returned chunk lists each token's slot and the position it was computed at, under a new
  // handle. nullopt when the chunk is not cached (or no longer is).
  std::optional<AcquiredChunk> Acquire(const BlockHash& key, std::span<const TokenId> tokens);

  // Over G KV cache groups: parts[g] is group g's copy of a chunk of `num_tokens` tokens
  // (parts[0] the whole chunk). Finds and pins every part, or none (nullopt when one is not
  // cached); the chunk lists group 0's slots and position in `slots` / `position` and the
  // others' in group_slots / group_positions (kNoChunkSlot before a part's first token), under
  // one handle. REQUIRES: parts is not empty, parts[0] covers the chunk.
  std::optional<AcquiredChunk> Acquire(std::span<const ChunkPart> parts, int32_t num_tokens);

  // Unpins the chunk of `handle`; false when no chunk is pinned under it.
  bool Release(int64_t handle);

  // Unpins every pinned chunk; the first error of the index, if any (all are released anyway).
  absl::Status ReleaseAll();

  int32_t size() const { return static_cast<int32_t>(pinned_.size()); }

 private:
  // Unpins `locations` in reverse order (group 0 last); the first error.
  absl::Status Unpin(std::span<const ChunkLocation> locations);

  ChunkIndex* index_;
  int64_t next_handle_ = 1;
  absl::flat_hash_map<int64_t, std::vector<ChunkLocation>> pinned_;  // one location per group
};

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_RUNTIME_SHIFT_CHUNK_PINS_H_
