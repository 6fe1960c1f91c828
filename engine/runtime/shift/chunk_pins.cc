// Copyright 2026 The pagedkv Authors.
#include "engine/runtime/shift/chunk_pins.h"

#include <utility>

#include "cache/debug_check.h"

namespace pagedkv {

ChunkPins::~ChunkPins() {
  DebugCheckOk(ReleaseAll(), "every pinned chunk was acquired through this object");
}

std::optional<AcquiredChunk> ChunkPins::Acquire(const BlockHash& key,
                                                std::span<const TokenId> tokens) {
  std::optional<ChunkLocation> location = index_->Find(key, tokens);
  if (!location.has_value() || !index_->Acquire(*location).ok()) return std::nullopt;
  const int32_t block_size = index_->pool().block_size();
  AcquiredChunk chunk;
  chunk.handle = next_handle_++;
  chunk.position = location->position;
  chunk.slots.reserve(static_cast<size_t>(location->num_tokens));
  for (int32_t i = 0; i < location->num_tokens; ++i) {
    chunk.slots.push_back(location->SlotOf(i, block_size));
  }
  pinned_.emplace(chunk.handle, *std::move(location));
  return chunk;
}

bool ChunkPins::Release(int64_t handle) {
  const auto it = pinned_.find(handle);
  if (it == pinned_.end()) return false;
  DebugCheckOk(index_->Release(it->second), "pinned by Acquire");
  pinned_.erase(it);
  return true;
}

absl::Status ChunkPins::ReleaseAll() {
  absl::Status status;
  for (const auto& [handle, location] : pinned_) status.Update(index_->Release(location));
  pinned_.clear();
  return status;
}

}  // namespace pagedkv
