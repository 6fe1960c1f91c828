// Copyright 2026 The pagedkv Authors.
//
// LFU eviction: the victim is the candidate with the fewest accesses since it entered the index,
// ties broken least recently released first. Candidates live in a lazy min-heap keyed by
// frequency (release order breaks ties); O(log n) amortised per call.
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "cache/policies/lazy_heap.h"
#include "pagedkv/cache/eviction_policy.h"

namespace pagedkv {
namespace {

class LfuPolicy final : public EvictionPolicy {
 public:
  std::string_view Name() const override { return "lfu"; }

  void Init(int32_t num_blocks) override {
    frequency_.assign(num_blocks, 0);
    candidates_.Init(num_blocks);
  }

  void OnInsert(BlockId block, const BlockHash&) override { frequency_[block] = 1; }
  void OnAccess(BlockId block, const BlockHash&) override {
    candidates_.Remove(block);
    ++frequency_[block];
  }
  void OnRelease(BlockId block, const BlockHash&) override {
    candidates_.Add(block, frequency_[block]);
  }
  void OnRemove(BlockId block, const BlockHash&) override { candidates_.Remove(block); }
  BlockId PickVictim() override { return candidates_.PopMin(); }
  void Clear() override { Init(static_cast<int32_t>(frequency_.size())); }

 private:
  std::vector<uint64_t> frequency_;  // [num_blocks] accesses since insertion (1 at insertion)
  internal::LazyCandidateHeap candidates_;
};

}  // namespace

std::unique_ptr<EvictionPolicy> MakeLfuPolicy() { return std::make_unique<LfuPolicy>(); }

}  // namespace pagedkv
