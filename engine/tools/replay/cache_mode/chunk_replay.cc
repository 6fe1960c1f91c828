// Copyright 2026 The pagedkv Authors.
#include "engine/tools/replay/cache_mode/chunk_replay.h"

#include <algorithm>
#include <climits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "pagedkv/cache/chunk_index.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/types.h"

namespace pagedkv::replay {

absl::StatusOr<std::unique_ptr<ChunkReplay>> ChunkReplay::Create(BlockPool* pool,
                                                                 BeladyPolicy* belady) {
  if (pool == nullptr) return absl::InvalidArgumentError("ChunkReplay: pool is null");
  // Hash-level replay has no tokens to compare: keys alone identify chunks.
  PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<ChunkIndex> index,
                           ChunkIndex::Create(pool, {.verify_tokens = false}));
  return Create(std::move(index), belady, {});
}

absl::StatusOr<std::unique_ptr<ChunkReplay>> ChunkReplay::Create(
    std::unique_ptr<ChunkIndex> index, BeladyPolicy* belady,
    const std::vector<KvCacheGroupSpec>& groups) {
  PAGEDKV_ASSIGN_OR_RETURN(
      std::unique_ptr<ShiftedChunkReuse> reuse,
      ShiftedChunkReuse::Create(std::move(index), /*mover=*/nullptr, {.groups = groups}));
  return std::unique_ptr<ChunkReplay>(new ChunkReplay(std::move(reuse), belady));
}

BeforeUnpin ChunkReplay::NextUse(int64_t next_use) const {
  if (belady_ == nullptr) return {};
  return [belady = belady_, next_use](std::span<const BlockId> blocks) {
    for (BlockId b : blocks) belady->SetNextUse(b, next_use);
  };
}

absl::Status ChunkReplay::CountRequest(std::span<const TrackedChunk> chunks, int64_t prefix_tokens,
                                       int32_t block_size, CacheReplayResult& result) {
  if (prefix_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ChunkReplay: prefix_tokens must be >= 0, got %d", prefix_tokens));
  }
  for (const TrackedChunk& c : chunks) {
    if (c.position < 0 || c.length < 1 || c.length > kMaxKeyedChunkTokens ||
        c.position > INT32_MAX - c.length) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "ChunkReplay: chunk at %d of %d tokens is out of range (a chunk has 1 to 2^30 tokens "
          "and ends below position 2^31)",
          c.position, c.length));
    }
  }
  for (const TrackedChunk& c : chunks) {
    PAGEDKV_RETURN_IF_ERROR(CountChunk(c, prefix_tokens, block_size, result));
  }
  return absl::OkStatus();
}

absl::Status ChunkReplay::CountChunk(const TrackedChunk& chunk, int64_t prefix_tokens,
                                     int32_t block_size, CacheReplayResult& result) {
  ++result.chunks;
  const auto length = static_cast<int32_t>(chunk.length);
  const auto position = static_cast<int32_t>(chunk.position);
  const int64_t covered = std::clamp<int64_t>(prefix_tokens - chunk.position, 0, chunk.length);
  const int64_t remaining = chunk.length - covered;
  if (remaining == 0) {
    ++result.chunks_in_prefix;
    // Not needed now, but asked for: belady moves its copy's next use on.
    if (belady_ != nullptr) {
      PAGEDKV_RETURN_IF_ERROR(
          reuse_->TouchKey(chunk.key, length, NextUse(chunk.next_use)).status());
    }
    return absl::OkStatus();
  }
  PAGEDKV_ASSIGN_OR_RETURN(const std::optional<int32_t> cached_at,
                           reuse_->TouchKey(chunk.key, length, NextUse(chunk.next_use)));
  if (!cached_at.has_value()) {
    PAGEDKV_ASSIGN_OR_RETURN(
        const ChunkCopyResult copied,
        reuse_->RegisterKey(chunk.key, length, position, NextUse(chunk.next_use)));
    result.chunks_registered += copied == ChunkCopyResult::kInserted;
    result.chunk_register_failures += copied == ChunkCopyResult::kNoRoom;
    return absl::OkStatus();
  }
  ++result.chunk_hits;
  result.shifted_hit_tokens += remaining;
  if (*cached_at != position) {
    ++result.chunk_hits_moved;
    result.shifted_hit_tokens_moved += remaining;
  }
  // Served tokens [start, end): full blocks of the request's grid wholly inside them.
  const int64_t start = std::max(prefix_tokens, chunk.position);
  const int64_t end = chunk.position + chunk.length;
  result.shifted_hit_blocks +=
      std::max<int64_t>(0, end / block_size - NumBlocksFor(start, block_size));
  return absl::OkStatus();
}

}  // namespace pagedkv::replay
