// Copyright 2026 The pagedkv Authors.
//
// KV cache events: what an embedding engine subscribes to in order to mirror the prefix cache
// (e.g. a cache-aware router), in the spirit of vLLM's KV events.
//
// A BlockPool (and the KvCacheManager above it) calls every listener synchronously, in
// registration order, at the moment the index changes:
//   kBlockStored      - a block entered the hash index (hash, parent hash, tokens, block id);
//   kBlockRemoved     - a block left the index (evicted to make room, or replaced after a failed
//                       verification);
//   kAllBlocksCleared - ResetPrefixCache dropped the whole index (no per-block events follow).
// KV tiers below the pool (kv_tier.h) emit the same events with `medium` set.
//
// Example:
//   manager->AddEventListener([&](const pagedkv::KvEvent& e) {
//     if (e.type == pagedkv::KvEventType::kBlockStored) router.Add(e.hash, e.parent_hash);
//   });
#ifndef PAGEDKV_EVENTS_KV_EVENTS_H_
#define PAGEDKV_EVENTS_KV_EVENTS_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "pagedkv/cache/block_hash.h"
#include "pagedkv/export.h"
#include "pagedkv/types.h"

namespace pagedkv {

enum class KvEventType : uint8_t {
  kBlockStored,
  kBlockRemoved,
  kAllBlocksCleared,
};

// Which kind of hash chain a block's hash belongs to.
enum class BlockDomain : uint8_t {
  kPrefix,  // a prefix chain anchored at a root: what a prefix router indexes
  kChunk,   // the chunk index's chunk-domain blocks (shifted reuse, chunk_index.h): hashed from
            // the chunk's key, not a prefix of any request. KvEventBatcher does not announce them.
};

// "stored", "removed" or "cleared".
PAGEDKV_EXPORT std::string_view KvEventTypeName(KvEventType type);

struct PAGEDKV_EXPORT KvEvent {
  KvEventType type = KvEventType::kBlockStored;
  BlockHash hash;              // the block's hash (zero for kAllBlocksCleared)
  BlockHash parent_hash;       // the previous block's hash; the chain root for a first block
  int32_t token_count = 0;     // tokens in the block (the block size); 0 for cleared
  BlockId block = kNullBlock;  // physical block id; kNullBlock for cleared
  std::span<const TokenId> token_ids;  // stored: the block's tokens when known, else empty.
                                       // Valid only during the callback.
  // Where the block is: empty for the device pool (a KvEventBatcher uses its own medium), a
  // tier's medium (kv_tier.h, e.g. "CPU") for a tier's events. Valid only during the callback.
  std::string_view medium = {};
  BlockDomain domain = BlockDomain::kPrefix;  // stored / removed: the block's kind of chain
  // The block's KV cache group when the emitter knows it (a KvCacheManager of several groups
  // stamps it); -1: unknown, a KvEventBatcher then uses its own group_idx option. The kind is
  // vLLM's KVCacheSpecKind name ("full_attention", "sliding_window"; empty: unknown), the window
  // 0 for none. The kind's characters are static.
  int32_t group_idx = -1;
  std::string_view kv_cache_spec_kind = {};
  int32_t kv_cache_spec_sliding_window = 0;

  // One line, e.g. "stored hash=… parent=… tokens=16 block=3".
  std::string ToString() const;
};

// Called synchronously; must not call back into the pool or manager that emitted the event.
using KvEventListener = std::function<void(const KvEvent&)>;

}  // namespace pagedkv

#endif  // PAGEDKV_EVENTS_KV_EVENTS_H_
