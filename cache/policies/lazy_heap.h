// Copyright 2026 The pagedkv Authors.
//
// LazyCandidateHeap: the candidate set of an eviction policy whose victim is the candidate with the
// smallest key, where a key is fixed while a block stays a candidate. Removal is lazy: a block
// leaving the set is only marked, and stale heap entries are skipped (and periodically compacted)
// when picking. O(log n) amortised per operation, no per-operation allocation in steady state.
#ifndef PAGEDKV_CACHE_POLICIES_LAZY_HEAP_H_
#define PAGEDKV_CACHE_POLICIES_LAZY_HEAP_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "pagedkv/export.h"
#include "pagedkv/types.h"

namespace pagedkv::internal {

class PAGEDKV_EXPORT LazyCandidateHeap {
 public:
  // Empties the set; blocks are in [0, num_blocks).
  void Init(int32_t num_blocks) {
    heap_.clear();
    stamp_.assign(num_blocks, 0);
    listed_.assign(num_blocks, false);
    num_listed_ = 0;
  }

  // Makes `block` a candidate with `key` (smaller keys are evicted first).
  void Add(BlockId block, uint64_t key) {
    if (listed_[block]) Remove(block);
    listed_[block] = true;
    ++num_listed_;
    stamp_[block] = ++next_stamp_;
    heap_.push_back(Entry{key, stamp_[block], block});
    std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
    if (heap_.size() > 2 * static_cast<size_t>(num_listed_) + 64) Compact();
  }

  // `block` stops being a candidate (no-op when it is not one).
  void Remove(BlockId block) {
    if (!listed_[block]) return;
    listed_[block] = false;
    --num_listed_;
  }

  // Removes and returns the candidate with the smallest key (ties: added first).
  // REQUIRES: at least one candidate.
  BlockId PopMin() {
    while (true) {
      std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
      const Entry e = heap_.back();
      heap_.pop_back();
      if (IsLive(e)) {
        listed_[e.block] = false;
        --num_listed_;
        return e.block;
      }
    }
  }

 private:
  struct Entry {
    uint64_t key;
    uint64_t stamp;  // which Add created it; stale when the block was removed or re-added since
    BlockId block;
    friend bool operator>(const Entry& a, const Entry& b) {
      return a.key != b.key ? a.key > b.key : a.stamp > b.stamp;
    }
  };

  bool IsLive(const Entry& e) const { return listed_[e.block] && stamp_[e.block] == e.stamp; }

  void Compact() {
    heap_.erase(
        std::remove_if(heap_.begin(), heap_.end(), [this](const Entry& e) { return !IsLive(e); }),
        heap_.end());
    std::make_heap(heap_.begin(), heap_.end(), std::greater<>());
  }

  std::vector<Entry> heap_;
  std::vector<uint64_t> stamp_;  // [num_blocks] stamp of the live entry
  std::vector<bool> listed_;     // [num_blocks]
  int32_t num_listed_ = 0;
  uint64_t next_stamp_ = 0;
};

}  // namespace pagedkv::internal

#endif  // PAGEDKV_CACHE_POLICIES_LAZY_HEAP_H_
