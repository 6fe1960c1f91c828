// Copyright 2026 The pagedkv Authors.
//
// LRU eviction: an intrusive doubly linked list over flat arrays; candidates are appended on
// release and the victim is the list head. Every call is O(1) and allocation-free.
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "pagedkv/cache/eviction_policy.h"

namespace pagedkv {
namespace {

class LruPolicy final : public EvictionPolicy {
 public:
  std::string_view Name() const override { return "lru"; }

  void Init(int32_t num_blocks) override {
    sentinel_ = num_blocks;
    walk_ahead_ = num_blocks >= kVictimPrefetchMinBlocks;
    cursor_ = sentinel_;
    links_.assign(num_blocks + 1, Links{kNotListed, kNotListed});
    links_[sentinel_] = Links{sentinel_, sentinel_};
  }

  void OnInsert(BlockId, const BlockHash&) override {}
  // Overridden so that the pool's insert costs one empty virtual call, as before the hook.
  void OnInsertInChain(BlockId, const BlockHash&, const BlockHash&, BlockId) override {}
  void OnAccess(BlockId block, const BlockHash&) override { Unlink(block); }
  void OnRelease(BlockId block, const BlockHash&) override {
    const int32_t last = links_[sentinel_].prev;
    links_[block] = Links{last, sentinel_};
    links_[last].next = block;
    links_[sentinel_].prev = block;
  }
  void OnRemove(BlockId block, const BlockHash&) override { Unlink(block); }

  BlockId PickVictim() override {
    const BlockId victim = links_[sentinel_].next;
    Unlink(victim);
    if (walk_ahead_) AdvanceCursor(victim);
    return victim;
  }

  // 0: the head; 1: the one after it; kLookahead: the cursor (large pools only; it may sit a little
  // further back than kLookahead when candidates before it were pinned meanwhile - a hint).
  BlockId PeekVictim(int32_t ahead) const override {
    int32_t block = links_[sentinel_].next;
    if (ahead == 1 && block != sentinel_) {
      block = links_[block].next;
    } else if (ahead == kLookahead && walk_ahead_) {
      block = cursor_;
    } else if (ahead != 0) {
      return kNullBlock;
    }
    return block == sentinel_ ? kNullBlock : block;
  }

  void Clear() override { Init(sentinel_); }

 private:
  static constexpr int32_t kNotListed = -1;
  static constexpr int32_t kLookahead = 3;  // how far ahead of the head the cursor runs
  struct Links {
    int32_t prev;  // kNotListed when not a candidate
    int32_t next;
  };

  // Moves the cursor one candidate on after `victim` was picked: one load of links the previous
  // call prefetched. When the cursor was picked, unlinked or ran off the tail, it is placed again
  // by walking kLookahead links from the head.
  void AdvanceCursor(BlockId victim) {
    if (cursor_ == sentinel_ || cursor_ == victim || links_[cursor_].prev == kNotListed) {
      cursor_ = links_[sentinel_].next;
      for (int32_t d = 0; d < kLookahead && cursor_ != sentinel_; ++d) {
        cursor_ = links_[cursor_].next;
      }
    } else {
      cursor_ = links_[cursor_].next;
    }
    __builtin_prefetch(&links_[cursor_]);
  }

  void Unlink(BlockId block) {
    const Links l = links_[block];
    if (l.prev == kNotListed) return;
    links_[l.prev].next = l.next;
    links_[l.next].prev = l.prev;
    links_[block] = Links{kNotListed, kNotListed};
  }

  bool walk_ahead_ = false;   // keep the cursor (large pools only, see eviction_policy.h)
  int32_t cursor_ = 0;        // a candidate about kLookahead picks ahead; sentinel_ when unknown
  int32_t sentinel_ = 0;      // index num_blocks: the list head/tail anchor
  std::vector<Links> links_;  // [num_blocks + 1]; prev and next side by side (one cache line)
};

}  // namespace

std::unique_ptr<EvictionPolicy> MakeLruPolicy() { return std::make_unique<LruPolicy>(); }

}  // namespace pagedkv
