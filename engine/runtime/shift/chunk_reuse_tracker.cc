// Copyright 2026 The pagedkv Authors.
#include "engine/runtime/shift/chunk_reuse_tracker.h"

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
#include "pagedkv/events/kv_events.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/types.h"

namespace pagedkv {

absl::StatusOr<std::unique_ptr<ChunkReuseTracker>> ChunkReuseTracker::Create(
    BlockPool* pool, ChunkReuseTrackerOptions options) {
  if (pool == nullptr) return absl::InvalidArgumentError("ChunkReuseTracker: pool is null");
  // Hash-level replay has no tokens to compare: keys alone identify chunks.
  PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<ChunkIndex> index,
                           ChunkIndex::Create(pool, {.verify_tokens = false}));
  return std::unique_ptr<ChunkReuseTracker>(
      new ChunkReuseTracker(pool, std::move(options), std::move(index)));
}

ChunkReuseTracker::ChunkReuseTracker(BlockPool* pool, ChunkReuseTrackerOptions options,
                                     std::unique_ptr<ChunkIndex> index)
    : pool_(pool), options_(std::move(options)), index_(std::move(index)) {
  if (options_.retire_orphaned_blocks && options_.before_unpin) {
    listener_id_ = pool_->AddEventListener([this](const KvEvent& event) { OnPoolEvent(event); });
  }
}

ChunkReuseTracker::~ChunkReuseTracker() {
  if (listener_id_ >= 0) pool_->RemoveEventListener(listener_id_);
}

void ChunkReuseTracker::OnPoolEvent(const KvEvent& event) {
  if (event.type == KvEventType::kAllBlocksCleared) {
    copies_.clear();
    copy_of_block_.clear();
    orphans_.clear();
    return;
  }
  if (event.type != KvEventType::kBlockRemoved) return;
  const auto it = copy_of_block_.find(event.block);
  if (it == copy_of_block_.end()) return;
  const auto copy = copies_.find(it->second);
  copy_of_block_.erase(it);
  if (copy == copies_.end()) return;
  for (BlockId b : copy->second) {
    if (b == event.block) continue;
    copy_of_block_.erase(b);
    if (pool_->IsCached(b)) orphans_.emplace_back(b, pool_->Generation(b));
  }
  copies_.erase(copy);
}

absl::Status ChunkReuseTracker::RetireOrphans() {
  // Pinning and unpinning evicts nothing, so no event changes orphans_ during the loop.
  for (const auto& [block, generation] : orphans_) {
    if (!pool_->IsCached(block) || pool_->Generation(block) != generation ||
        pool_->RefCount(block) != 0) {
      continue;
    }
    PAGEDKV_RETURN_IF_ERROR(pool_->Pin(block));
    options_.before_unpin({&block, 1}, kChunkNeverUsed);
    PAGEDKV_RETURN_IF_ERROR(pool_->Unpin(block));
  }
  orphans_.clear();
  return absl::OkStatus();
}

absl::Status ChunkReuseTracker::RefreshCoveredChunk(const TrackedChunk& chunk,
                                                    const std::vector<TokenId>& placeholder) {
  if (!options_.refresh_covered_chunks || !options_.before_unpin) return absl::OkStatus();
  // Not needed now, but the chunk was asked for: its copy's next use moves on.
  std::optional<ChunkLocation> cached = index_->Find(chunk.key, placeholder);
  if (!cached || !index_->Acquire(*cached).ok()) return absl::OkStatus();
  options_.before_unpin(cached->blocks, chunk.next_use);
  return index_->Release(*cached);
}

absl::StatusOr<bool> ChunkReuseTracker::TryHit(const TrackedChunk& chunk, int64_t remaining,
                                               const std::vector<TokenId>& placeholder) {
  ++stats_.lookups;
  std::optional<ChunkLocation> hit = index_->Find(chunk.key, placeholder);
  if (!hit || !index_->Acquire(*hit).ok()) return false;
  ++stats_.hits;
  stats_.hit_tokens += remaining;
  if (hit->position != chunk.position) {
    ++stats_.shifted_hits;
    stats_.shifted_hit_tokens += remaining;
  }
  if (options_.before_unpin) options_.before_unpin(hit->blocks, chunk.next_use);
  PAGEDKV_RETURN_IF_ERROR(index_->Release(*hit));
  return true;
}

absl::Status ChunkReuseTracker::RegisterCopy(const TrackedChunk& chunk,
                                             const std::vector<TokenId>& placeholder) {
  const auto num_blocks = static_cast<int32_t>(NumBlocksFor(chunk.length, pool_->block_size()));
  std::vector<BlockId> blocks;
  if (!pool_->Allocate(num_blocks, &blocks).ok()) {
    ++stats_.register_failures;
    return absl::OkStatus();
  }
  absl::StatusOr<bool> inserted = index_->Insert({.key = chunk.key,
                                                  .tokens = placeholder,
                                                  .position = static_cast<int32_t>(chunk.position),
                                                  .blocks = blocks,
                                                  .start_offset = 0});
  if (options_.before_unpin) options_.before_unpin(blocks, chunk.next_use);
  std::vector<BlockId> tail_first(blocks.rbegin(), blocks.rend());
  PAGEDKV_RETURN_IF_ERROR(pool_->Unpin(tail_first));
  PAGEDKV_RETURN_IF_ERROR(inserted.status());
  if (!*inserted) return absl::OkStatus();
  ++stats_.registered;
  if (listener_id_ >= 0) {
    for (BlockId b : blocks) copy_of_block_[b] = chunk.key;
    copies_[chunk.key] = std::move(blocks);
  }
  return absl::OkStatus();
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
  if (listener_id_ >= 0) PAGEDKV_RETURN_IF_ERROR(RetireOrphans());
  ++stats_.requests;
  std::vector<TokenId> placeholder;  // Insert needs one entry per token; verification is off
  for (const TrackedChunk& c : chunks) {
    ++stats_.chunks;
    const int64_t covered = std::clamp<int64_t>(prefix_hit_tokens - c.position, 0, c.length);
    const int64_t remaining = c.length - covered;
    placeholder.assign(static_cast<size_t>(c.length), 0);
    if (remaining == 0) {
      ++stats_.prefix_covered;
      PAGEDKV_RETURN_IF_ERROR(RefreshCoveredChunk(c, placeholder));
      continue;
    }
    PAGEDKV_ASSIGN_OR_RETURN(const bool hit, TryHit(c, remaining, placeholder));
    if (!hit) PAGEDKV_RETURN_IF_ERROR(RegisterCopy(c, placeholder));
  }
  if (listener_id_ >= 0) PAGEDKV_RETURN_IF_ERROR(RetireOrphans());
  return absl::OkStatus();
}

}  // namespace pagedkv
