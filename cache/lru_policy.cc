// Copyright 2026 The pagedkv Authors.
//
// LRU eviction: an intrusive doubly linked list over flat arrays; candidates are appended on
// release and the victim is the list head. Every call is O(1) and allocation-free.
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "pagedkv/eviction_policy.h"

namespace pagedkv {
namespace {

class LruPolicy final : public EvictionPolicy {
 public:
  std::string_view Name() const override { return "lru"; }

  void Init(int32_t num_blocks) override {
    sentinel_ = num_blocks;
    walk_ahead_ = num_blocks >= kVictimPrefetchMinBlocks;
    links_.assign(num_blocks + 1, Links{kNotListed, kNotListed});
    links_[sentinel_] = Links{sentinel_, sentinel_};
  }

  void OnInsert(BlockId, const BlockHash&) override {}
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
    if (!walk_ahead_) return victim;
    // Walk the next candidates (their links were prefetched by earlier picks) and start loading
    // the links kPeekDepth ahead, so PeekVictim and later picks rarely wait on memory.
    int32_t block = links_[sentinel_].next;
    for (int d = 0; d < kPeekDepth && block != sentinel_; ++d) block = links_[block].next;
    __builtin_prefetch(&links_[block]);
    return victim;
  }

  BlockId PeekVictim(int32_t ahead) const override {
    if (ahead < 0 || ahead > kPeekDepth) return kNullBlock;
    int32_t block = links_[sentinel_].next;
    for (int32_t d = 0; d < ahead && block != sentinel_; ++d) block = links_[block].next;
    return block == sentinel_ ? kNullBlock : block;
  }

  void Clear() override { Init(sentinel_); }

 private:
  static constexpr int32_t kNotListed = -1;
  static constexpr int32_t kPeekDepth = 4;  // candidates PeekVictim can see past the head
  struct Links {
    int32_t prev;  // kNotListed when not a candidate
    int32_t next;
  };

  void Unlink(BlockId block) {
    const Links l = links_[block];
    if (l.prev == kNotListed) return;
    links_[l.prev].next = l.next;
    links_[l.next].prev = l.prev;
    links_[block] = Links{kNotListed, kNotListed};
  }

  bool walk_ahead_ = false;   // prefetch links ahead (large pools only, see eviction_policy.h)
  int32_t sentinel_ = 0;      // index num_blocks: the list head/tail anchor
  std::vector<Links> links_;  // [num_blocks + 1]; prev and next side by side (one cache line)
};

}  // namespace

std::unique_ptr<EvictionPolicy> MakeLruPolicy() { return std::make_unique<LruPolicy>(); }

}  // namespace pagedkv
