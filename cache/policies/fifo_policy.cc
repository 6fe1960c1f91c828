// Copyright 2026 The pagedkv Authors.
//
// FIFO eviction: the victim is the candidate that entered the index earliest, whatever its
// accesses. Candidates live in a lazy min-heap keyed by insertion sequence; O(log n) amortised.
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "cache/policies/lazy_heap.h"
#include "pagedkv/cache/eviction_policy.h"

namespace pagedkv {
namespace {

class FifoPolicy final : public EvictionPolicy {
 public:
  std::string_view Name() const override { return "fifo"; }

  void Init(int32_t num_blocks) override {
    insert_seq_.assign(num_blocks, 0);
    candidates_.Init(num_blocks);
  }

  void OnInsert(BlockId block, const BlockHash&) override { insert_seq_[block] = ++seq_; }
  void OnAccess(BlockId block, const BlockHash&) override { candidates_.Remove(block); }
  void OnRelease(BlockId block, const BlockHash&) override {
    candidates_.Add(block, insert_seq_[block]);
  }
  void OnRemove(BlockId block, const BlockHash&) override { candidates_.Remove(block); }
  BlockId PickVictim() override { return candidates_.PopMin(); }
  void Clear() override { Init(static_cast<int32_t>(insert_seq_.size())); }

 private:
  std::vector<uint64_t> insert_seq_;  // [num_blocks]
  internal::LazyCandidateHeap candidates_;
  uint64_t seq_ = 0;
};

}  // namespace

std::unique_ptr<EvictionPolicy> MakeFifoPolicy() { return std::make_unique<FifoPolicy>(); }

}  // namespace pagedkv
