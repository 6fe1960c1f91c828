// Copyright 2026 The pagedkv Authors.
//
// FIFO eviction: the victim is the candidate that entered the index earliest, whatever its
// accesses. Candidates live in a B-tree keyed by insertion sequence; O(log n) per call.
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "pagedkv/eviction_policy.h"

namespace pagedkv {
namespace {

class FifoPolicy final : public EvictionPolicy {
 public:
  std::string_view Name() const override { return "fifo"; }

  void Init(int32_t num_blocks) override {
    insert_seq_.assign(num_blocks, 0);
    listed_.assign(num_blocks, false);
    candidates_.clear();
  }

  void OnInsert(BlockId block, const BlockHash&) override { insert_seq_[block] = ++seq_; }
  void OnAccess(BlockId block, const BlockHash&) override { Unlist(block); }
  void OnRelease(BlockId block, const BlockHash&) override {
    listed_[block] = true;
    candidates_.insert({insert_seq_[block], block});
  }
  void OnRemove(BlockId block, const BlockHash&) override { Unlist(block); }

  BlockId PickVictim() override {
    const BlockId victim = candidates_.begin()->second;
    Unlist(victim);
    return victim;
  }

  void Clear() override { Init(static_cast<int32_t>(insert_seq_.size())); }

 private:
  void Unlist(BlockId block) {
    if (!listed_[block]) return;
    candidates_.erase({insert_seq_[block], block});
    listed_[block] = false;
  }

  std::vector<uint64_t> insert_seq_;  // [num_blocks]
  std::vector<bool> listed_;          // [num_blocks]
  absl::btree_set<std::pair<uint64_t, BlockId>> candidates_;
  uint64_t seq_ = 0;
};

}  // namespace

std::unique_ptr<EvictionPolicy> MakeFifoPolicy() { return std::make_unique<FifoPolicy>(); }

}  // namespace pagedkv
