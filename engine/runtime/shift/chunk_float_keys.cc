// Copyright 2026 The pagedkv Authors.
#include "engine/runtime/shift/chunk_float_keys.h"

#include <cstdint>
#include <memory>
#include <utility>

namespace pagedkv {

void ChunkFloatKeys::Put(const BlockHash& key, std::shared_ptr<const ChunkKeys> keys) {
  Erase(key);
  const int64_t bytes = keys->bytes();
  if (bytes > capacity_bytes_) {
    ++stats_.too_large;
    return;
  }
  while (bytes_ + bytes > capacity_bytes_) {
    Erase(order_.front());
    ++stats_.evicted;
  }
  order_.push_back(key);
  entries_.emplace(key, Entry{.keys = std::move(keys), .order = std::prev(order_.end())});
  bytes_ += bytes;
  ++stats_.stored;
}

void ChunkFloatKeys::Erase(const BlockHash& key) {
  const auto it = entries_.find(key);
  if (it == entries_.end()) return;
  bytes_ -= it->second.keys->bytes();
  order_.erase(it->second.order);
  entries_.erase(it);
}

std::shared_ptr<const ChunkKeys> ChunkFloatKeys::Find(const BlockHash& key, int32_t position,
                                                      int32_t num_tokens) {
  const auto it = entries_.find(key);
  if (it == entries_.end()) return nullptr;
  const ChunkKeys& keys = *it->second.keys;
  if (keys.position != position || keys.num_tokens != num_tokens) return nullptr;
  order_.splice(order_.end(), order_, it->second.order);  // most recently used
  return it->second.keys;
}

}  // namespace pagedkv
