// Copyright 2026 The pagedkv Authors.
//
// GhostList: a bounded FIFO of block hashes that were evicted recently (ARC's B1/B2, S3-FIFO's
// ghost queue). It remembers content, not blocks: a later insert of the same hash can be told it
// was seen before. Add, Erase and Contains are O(1) amortised; erased entries are dropped lazily
// from the queue (and compacted when stale entries outnumber live ones).
//
// Example:
//   internal::GhostList ghosts;
//   ghosts.Add(hash);
//   ghosts.TrimTo(capacity);     // forget the oldest beyond capacity
//   if (ghosts.Erase(hash)) { ... it was a ghost ... }
#ifndef PAGEDKV_CACHE_POLICIES_GHOST_LIST_H_
#define PAGEDKV_CACHE_POLICIES_GHOST_LIST_H_

#include <cstdint>
#include <deque>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "pagedkv/cache/block_hash.h"

namespace pagedkv::internal {

class GhostList {
 public:
  void Clear() {
    seq_of_.clear();
    queue_.clear();
  }
  int64_t Size() const { return static_cast<int64_t>(seq_of_.size()); }
  bool Contains(const BlockHash& hash) const { return seq_of_.contains(hash); }

  // Remembers `hash` as the newest ghost (moving it there if it is one already).
  void Add(const BlockHash& hash) {
    seq_of_[hash] = ++seq_;
    queue_.emplace_back(seq_, hash);
    if (queue_.size() > 2 * seq_of_.size() + 64) Compact();
  }

  // Forgets `hash`; true when it was a ghost.
  bool Erase(const BlockHash& hash) { return seq_of_.erase(hash) > 0; }

  // Forgets the oldest ghost; no-op when there is none.
  void DropOldest() {
    while (!queue_.empty()) {
      const auto [seq, hash] = queue_.front();
      queue_.pop_front();
      auto it = seq_of_.find(hash);
      if (it != seq_of_.end() && it->second == seq) {
        seq_of_.erase(it);
        return;
      }
    }
  }

  // Forgets the oldest ghosts until at most `capacity` remain.
  void TrimTo(int64_t capacity) {
    while (Size() > capacity) DropOldest();
  }

 private:
  void Compact() {
    std::deque<std::pair<uint64_t, BlockHash>> live;
    for (const auto& entry : queue_) {
      auto it = seq_of_.find(entry.second);
      if (it != seq_of_.end() && it->second == entry.first) live.push_back(entry);
    }
    queue_.swap(live);
  }

  uint64_t seq_ = 0;
  absl::flat_hash_map<BlockHash, uint64_t> seq_of_;   // live ghosts -> their queue entry
  std::deque<std::pair<uint64_t, BlockHash>> queue_;  // oldest first; may hold stale entries
};

}  // namespace pagedkv::internal

#endif  // PAGEDKV_CACHE_POLICIES_GHOST_LIST_H_
