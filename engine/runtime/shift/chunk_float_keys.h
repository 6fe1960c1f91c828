// Copyright 2026 The pagedkv Authors.
//
// ChunkFloatKeys: the float keys of registered chunk copies, kept in host memory until the chunk
// moves (ShiftedChunkReuseOptions::float_keys_bytes). A quantized (or 16-bit) KV cache rounds a
// key when the KV write stores it and again each time a move re-rotates it from that rounded
// copy; a move that starts from the key as the KV write rotated it, before the rounding, rounds
// it once, as a fresh key is (docs/kernels.md). ShiftedChunkReuse puts an entry when Register
// makes a KV cache group's copy of a chunk with the chunk's float keys, erases it when a copy is
// made without them, erases it when the chunk index forgets the copy (the pool evicted its KV:
// ChunkIndex::SetDropListener), and finds it when the scheduler acquires the chunk. Entries are
// evicted least recently used first to stay within the byte budget (Find also checks the copy's
// position and length).
//
// Example:
//   ChunkFloatKeys store(64 << 20);
//   store.Put(key, std::make_shared<const ChunkKeys>(ChunkKeys{.position = 8, ...}));
//   std::shared_ptr<const ChunkKeys> keys = store.Find(key, /*position=*/8, /*num_tokens=*/10);
//
// Not thread-safe.
#ifndef PAGEDKV_ENGINE_RUNTIME_SHIFT_CHUNK_FLOAT_KEYS_H_
#define PAGEDKV_ENGINE_RUNTIME_SHIFT_CHUNK_FLOAT_KEYS_H_

#include <cstdint>
#include <list>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/export.h"

namespace pagedkv {

// The float keys of one KV cache group's copy of a chunk.
struct PAGEDKV_EXPORT ChunkKeys {
  int32_t position = 0;     // position the copy's first token was computed at
  int32_t num_tokens = 0;   // tokens of the copy
  int32_t num_layers = 0;   // layers of the group
  int64_t width = 0;        // floats per token and layer: n_kv_heads * head_dim
  std::vector<float> keys;  // [num_layers, num_tokens, width]

  // Token `token`'s key in the group's layer `layer`. REQUIRES: both in range.
  const float* Key(int32_t layer, int32_t token) const {
    return keys.data() + (int64_t{layer} * num_tokens + token) * width;
  }
  int64_t bytes() const { return static_cast<int64_t>(keys.size() * sizeof(float)); }
};

// Counters since construction.
struct PAGEDKV_EXPORT ChunkFloatKeysStats {
  int64_t stored = 0;     // entries put
  int64_t evicted = 0;    // entries evicted to make room
  int64_t too_large = 0;  // entries larger than the whole budget, not stored
};

class PAGEDKV_EXPORT ChunkFloatKeys {
 public:
  // capacity_bytes: the budget of the keys' floats; > 0.
  explicit ChunkFloatKeys(int64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

  // Stores `keys` under `key`, replacing its entry; evicts least recently used entries to fit.
  // Keys larger than the whole budget are not stored (the old entry is erased all the same).
  void Put(const BlockHash& key, std::shared_ptr<const ChunkKeys> keys);
  void Erase(const BlockHash& key);
  // The entry of `key` if its copy was computed at `position` with `num_tokens` tokens (it is
  // then the most recently used); null otherwise.
  std::shared_ptr<const ChunkKeys> Find(const BlockHash& key, int32_t position, int32_t num_tokens);

  int64_t bytes() const { return bytes_; }
  int64_t capacity_bytes() const { return capacity_bytes_; }
  int64_t size() const { return static_cast<int64_t>(entries_.size()); }
  const ChunkFloatKeysStats& stats() const { return stats_; }

 private:
  struct Entry {
    std::shared_ptr<const ChunkKeys> keys;
    std::list<BlockHash>::iterator order;  // in order_
  };

  int64_t capacity_bytes_;
  int64_t bytes_ = 0;
  std::list<BlockHash> order_;  // least recently used first
  absl::flat_hash_map<BlockHash, Entry> entries_;
  ChunkFloatKeysStats stats_;
};

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_RUNTIME_SHIFT_CHUNK_FLOAT_KEYS_H_
