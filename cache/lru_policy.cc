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
    prev_.assign(num_blocks + 1, kNotListed);
    next_.assign(num_blocks + 1, kNotListed);
    prev_[sentinel_] = next_[sentinel_] = sentinel_;
  }

  void OnInsert(BlockId, const BlockHash&) override {}
  void OnAccess(BlockId block, const BlockHash&) override { Unlink(block); }
  void OnRelease(BlockId block, const BlockHash&) override {
    const int32_t last = prev_[sentinel_];
    prev_[block] = last;
    next_[block] = sentinel_;
    next_[last] = block;
    prev_[sentinel_] = block;
  }
  void OnRemove(BlockId block, const BlockHash&) override { Unlink(block); }

  BlockId PickVictim() override {
    const BlockId victim = next_[sentinel_];
    Unlink(victim);
    return victim;
  }

  void Clear() override { Init(sentinel_); }

 private:
  static constexpr int32_t kNotListed = -1;

  void Unlink(BlockId block) {
    if (prev_[block] == kNotListed) return;
    next_[prev_[block]] = next_[block];
    prev_[next_[block]] = prev_[block];
    prev_[block] = next_[block] = kNotListed;
  }

  int32_t sentinel_ = 0;       // index num_blocks: the list head/tail anchor
  std::vector<int32_t> prev_;  // [num_blocks + 1]; kNotListed when not a candidate
  std::vector<int32_t> next_;  // [num_blocks + 1]
};

}  // namespace

std::unique_ptr<EvictionPolicy> MakeLruPolicy() { return std::make_unique<LruPolicy>(); }

}  // namespace pagedkv
