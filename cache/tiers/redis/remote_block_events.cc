// Copyright 2026 The pagedkv Authors.
//
// Invariant: every tracked hash has exactly one current entry in order_ (the one whose seq
// tracked_ holds); order_ may also hold stale entries (of hashes removed or rewritten since),
// skipped when they reach the front and dropped by CompactIfSparse. order_ is sorted by seq and,
// with one TTL for every key, by deadline.
#include "cache/tiers/redis/remote_block_events.h"

#include <cstdint>
#include <limits>
#include <utility>

namespace pagedkv {

RemoteBlockEvents::RemoteBlockEvents(RemoteBlockEventsOptions options,
                                     std::function<void(const KvEvent&)> emit)
    : options_(std::move(options)), emit_(std::move(emit)) {}

bool RemoteBlockEvents::IsCurrent(const Entry& e) const {
  auto it = tracked_.find(e.hash);
  return it != tracked_.end() && it->second == e.seq;
}

void RemoteBlockEvents::Remove(const BlockHash& hash) {
  tracked_.erase(hash);
  emit_(KvEvent{.type = KvEventType::kBlockRemoved, .hash = hash, .medium = options_.medium});
}

void RemoteBlockEvents::DropStaleFront() {
  while (!order_.empty() && !IsCurrent(order_.front())) order_.pop_front();
}

void RemoteBlockEvents::CompactIfSparse() {
  if (order_.size() <= 2 * tracked_.size() + 64) return;
  std::deque<Entry> kept;
  for (const Entry& e : order_) {
    if (IsCurrent(e)) kept.push_back(e);
  }
  order_ = std::move(kept);
}

void RemoteBlockEvents::Written(const BlockHash& hash, std::span<const TokenId> tokens,
                                int64_t now_ms) {
  const int64_t deadline =
      options_.ttl_ms > 0 ? now_ms + options_.ttl_ms : std::numeric_limits<int64_t>::max();
  const uint64_t seq = next_seq_++;
  auto it = tracked_.find(hash);
  if (it != tracked_.end()) {  // rewritten after it vanished unseen: still announced
    it->second = seq;
    order_.push_back({.seq = seq, .deadline = deadline, .hash = hash});
    CompactIfSparse();
    return;
  }
  if (options_.max_tracked_blocks > 0 && tracked_.size() >= options_.max_tracked_blocks) {
    DropStaleFront();
    if (!order_.empty()) {
      const BlockHash oldest = order_.front().hash;
      order_.pop_front();
      Remove(oldest);
    }
  }
  tracked_.emplace(hash, seq);
  order_.push_back({.seq = seq, .deadline = deadline, .hash = hash});
  emit_(KvEvent{.type = KvEventType::kBlockStored,
                .hash = hash,
                .token_count = static_cast<int32_t>(tokens.size()),
                .token_ids = tokens,
                .medium = options_.medium});
  CompactIfSparse();
}

void RemoteBlockEvents::Gone(const BlockHash& hash) {
  if (!tracked_.contains(hash)) return;
  Remove(hash);
  CompactIfSparse();
}

void RemoteBlockEvents::Expire(int64_t now_ms) {
  if (options_.ttl_ms <= 0) return;
  for (DropStaleFront(); !order_.empty() && order_.front().deadline <= now_ms; DropStaleFront()) {
    const BlockHash hash = order_.front().hash;
    order_.pop_front();
    Remove(hash);
  }
}

}  // namespace pagedkv
