// Copyright 2026 The pagedkv Authors.
//
// RemoteBlockEvents: the KV events a Redis tier (pagedkv/tiers/redis_tier.h) can honestly emit
// about a store it shares with other engines. It tracks the blocks THIS engine wrote and announces:
//   kBlockStored  - when this engine's SET ... NX wrote the block (it was absent before);
//   kBlockRemoved - when this engine learns that a block it announced is gone: a read found no
//                   value for its key (an MGET nil: evicted by Redis, expired, deleted, the server
//                   restarted without persistence), or a value that failed its checks (deleted by
//                   the tier); when its TTL has passed (SET ... EX: Redis has dropped it by then,
//                   checked at the tier's next call, not at the instant); or when the tracking
//                   table is full and the oldest announced block is forgotten (a router then
//                   drops a block that may still be there: the safe direction).
// What it cannot know, and never reports: blocks other engines wrote (a SET NX that found the key
// is not announced), Redis evictions (maxmemory) and deletions of announced blocks before this
// engine next reads their keys, and anything while the server is unreachable (faults change
// nothing here). Events are emitted synchronously from the tier's calls, with the tier's medium.
//
// Not thread-safe (owned by the tier).
//
// Example (in RedisTier::Store, for a key whose SET NX replied OK):
//   events.Expire(now_ms);
//   events.Written(item.block.hash, item.block.tokens, now_ms);
#ifndef PAGEDKV_CACHE_TIERS_REDIS_REMOTE_BLOCK_EVENTS_H_
#define PAGEDKV_CACHE_TIERS_REDIS_REMOTE_BLOCK_EVENTS_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/events/kv_events.h"
#include "pagedkv/types.h"

namespace pagedkv {

struct RemoteBlockEventsOptions {
  std::string medium;             // KvEvent::medium of every event
  int64_t ttl_ms = 0;             // > 0: keys expire this long after they were written
  size_t max_tracked_blocks = 0;  // > 0: the most announced blocks remembered
};

class RemoteBlockEvents {
 public:
  // `emit` gets every event (it must not call back into this object).
  RemoteBlockEvents(RemoteBlockEventsOptions options, std::function<void(const KvEvent&)> emit);

  // This engine wrote `hash` (with `tokens`) at `now_ms`: stored, unless it is still tracked (then
  // its TTL restarts; a router already holds it). May first forget the oldest tracked block.
  void Written(const BlockHash& hash, std::span<const TokenId> tokens, int64_t now_ms);
  // A read found `hash`'s key empty (or its value rejected): removed, if it is tracked.
  void Gone(const BlockHash& hash);
  // Removed for every tracked block whose TTL has passed at `now_ms` (oldest first).
  void Expire(int64_t now_ms);

  bool Tracks(const BlockHash& hash) const { return tracked_.contains(hash); }
  size_t num_tracked() const { return tracked_.size(); }

 private:
  struct Entry {
    uint64_t seq;      // the write it came from; stale in order_ once tracked_ says otherwise
    int64_t deadline;  // TTL end (ms), or INT64_MAX without a TTL
    BlockHash hash;
  };
  bool IsCurrent(const Entry& e) const;
  void Remove(const BlockHash& hash);  // untracks and emits removed
  void DropStaleFront();
  void CompactIfSparse();

  RemoteBlockEventsOptions options_;
  std::function<void(const KvEvent&)> emit_;
  absl::flat_hash_map<BlockHash, uint64_t> tracked_;  // hash -> seq of its current entry
  std::deque<Entry> order_;                           // by write time (so by deadline too)
  uint64_t next_seq_ = 0;
};

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_TIERS_REDIS_REMOTE_BLOCK_EVENTS_H_
