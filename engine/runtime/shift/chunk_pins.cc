// Copyright 2026 The pagedkv Authors.
#include "engine/runtime/shift/chunk_pins.h"

#include <utility>
#include <vector>

#include "cache/debug_check.h"

namespace pagedkv {

ChunkPins::~ChunkPins() {
  DebugCheckOk(ReleaseAll(), "every pinned chunk was acquired through this object");
}

std::optional<AcquiredChunk> ChunkPins::Acquire(const BlockHash& key,
                                                std::span<const TokenId> tokens) {
  const ChunkPart part{.key = key, .tokens = tokens};
  return Acquire(std::span<const ChunkPart>(&part, 1), static_cast<int32_t>(tokens.size()));
}

std::optional<AcquiredChunk> ChunkPins::Acquire(std::span<const ChunkPart> parts,
                                                int32_t num_tokens) {
  std::vector<ChunkLocation> locations;
  locations.reserve(parts.size());
  for (const ChunkPart& part : parts) {
    std::optional<ChunkLocation> location = index_->Find(part.key, part.tokens);
    if (!location.has_value() || !index_->Acquire(*location).ok()) {
      DebugCheckOk(Unpin(locations), "pinned just before");
      return std::nullopt;
    }
    locations.push_back(*std::move(location));
  }
  const int32_t block_size = index_->pool().block_size();
  AcquiredChunk chunk;
  chunk.handle = next_handle_++;
  for (size_t g = 0; g < parts.size(); ++g) {
    const ChunkLocation& location = locations[g];
    const int32_t first = parts[g].first_token;
    std::vector<int64_t>& slots = g == 0 ? chunk.slots : chunk.group_slots.emplace_back();
    slots.reserve(static_cast<size_t>(num_tokens));
    slots.assign(static_cast<size_t>(first), kNoChunkSlot);
    for (int32_t i = 0; i < location.num_tokens; ++i) {
      slots.push_back(location.SlotOf(i, block_size));
    }
    const int32_t position = location.position - first;  // of chunk token 0
    if (g == 0) {
      chunk.position = position;
    } else {
      chunk.group_positions.push_back(position);
    }
  }
  pinned_.emplace(chunk.handle, std::move(locations));
  return chunk;
}

absl::Status ChunkPins::Unpin(std::span<const ChunkLocation> locations) {
  absl::Status status;
  for (size_t g = locations.size(); g-- > 0;) status.Update(index_->Release(locations[g]));
  return status;
}

bool ChunkPins::Release(int64_t handle) {
  const auto it = pinned_.find(handle);
  if (it == pinned_.end()) return false;
  DebugCheckOk(Unpin(it->second), "pinned by Acquire");
  pinned_.erase(it);
  return true;
}

absl::Status ChunkPins::ReleaseAll() {
  absl::Status status;
  for (const auto& [handle, locations] : pinned_) status.Update(Unpin(locations));
  pinned_.clear();
  return status;
}

}  // namespace pagedkv
