// Copyright 2026 The pagedkv Authors.
#include "engine/shift/chunk_reuse_tracker.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {

absl::StatusOr<std::unique_ptr<ChunkReuseTracker>> ChunkReuseTracker::Create(BlockPool* pool) {
  if (pool == nullptr) return absl::InvalidArgumentError("ChunkReuseTracker: pool is null");
  // Hash-level replay has no tokens to compare: keys alone identify chunks.
  PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<ChunkIndex> index,
                           ChunkIndex::Create(pool, {.verify_tokens = false}));
  return std::unique_ptr<ChunkReuseTracker>(new ChunkReuseTracker(pool, std::move(index)));
}

absl::Status ChunkReuseTracker::OnRequest(std::span<const TrackedChunk> chunks,
                                          int64_t prefix_hit_tokens) {
  if (prefix_hit_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ChunkReuseTracker: prefix_hit_tokens must be >= 0, got ", prefix_hit_tokens));
  }
  for (const TrackedChunk& c : chunks) {
    if (c.position < 0 || c.length < 1 || c.length > (int64_t{1} << 30) ||
        c.position > INT32_MAX - c.length) {
      return absl::InvalidArgumentError(absl::StrCat("ChunkReuseTracker: chunk at ", c.position,
                                                     " of ", c.length, " tokens is out of range"));
    }
  }
  ++stats_.requests;
  const int32_t bs = pool_->block_size();
  std::vector<TokenId> placeholder;  // Insert needs one entry per token; verification is off
  for (const TrackedChunk& c : chunks) {
    ++stats_.chunks;
    const int64_t covered = std::clamp<int64_t>(prefix_hit_tokens - c.position, 0, c.length);
    const int64_t remaining = c.length - covered;
    if (remaining == 0) {
      ++stats_.prefix_covered;
      continue;
    }
    ++stats_.lookups;
    placeholder.assign(static_cast<size_t>(c.length), 0);
    std::optional<ChunkLocation> hit = index_->Find(c.key, placeholder);
    if (hit && index_->Acquire(*hit).ok()) {
      ++stats_.hits;
      stats_.hit_tokens += remaining;
      if (hit->position != c.position) {
        ++stats_.shifted_hits;
        stats_.shifted_hit_tokens += remaining;
      }
      PAGEDKV_RETURN_IF_ERROR(index_->Release(*hit));
      continue;
    }
    const auto num_blocks = static_cast<int32_t>((c.length + bs - 1) / bs);
    std::vector<BlockId> blocks;
    if (!pool_->Allocate(num_blocks, &blocks).ok()) {
      ++stats_.register_failures;
      continue;
    }
    absl::StatusOr<bool> inserted =
        index_->Insert(c.key, placeholder, static_cast<int32_t>(c.position), blocks, 0);
    std::vector<BlockId> tail_first(blocks.rbegin(), blocks.rend());
    PAGEDKV_RETURN_IF_ERROR(pool_->Unpin(tail_first));
    PAGEDKV_RETURN_IF_ERROR(inserted.status());
    if (*inserted) ++stats_.registered;
  }
  return absl::OkStatus();
}

}  // namespace pagedkv
