// Copyright 2026 The pagedkv Authors.
//
// LFU eviction: candidates ordered by (accesses since insertion, release sequence) in a B-tree,
// so the victim is the least frequently used block, ties broken least recently released first.
// O(log n) per call.
#include <cstdint>
#include <memory>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/container/btree_set.h"
#include "pagedkv/eviction_policy.h"

namespace pagedkv {
namespace {

class LfuPolicy final : public EvictionPolicy {
 public:
  std::string_view Name() const override { return "lfu"; }

  void Init(int32_t num_blocks) override {
    blocks_.assign(num_blocks, BlockInfo{});
    candidates_.clear();
  }

  void OnInsert(BlockId block, const BlockHash&) override {
    blocks_[block] = BlockInfo{.frequency = 1, .release_seq = 0, .listed = false};
  }
  void OnAccess(BlockId block, const BlockHash&) override {
    Unlist(block);
    ++blocks_[block].frequency;
  }
  void OnRelease(BlockId block, const BlockHash&) override {
    BlockInfo& info = blocks_[block];
    info.release_seq = ++seq_;
    info.listed = true;
    candidates_.insert(Key{info.frequency, info.release_seq, block});
  }
  void OnRemove(BlockId block, const BlockHash&) override { Unlist(block); }

  BlockId PickVictim() override {
    const BlockId victim = std::get<2>(*candidates_.begin());
    Unlist(victim);
    return victim;
  }

  void Clear() override { Init(static_cast<int32_t>(blocks_.size())); }

 private:
  using Key = std::tuple<uint64_t, uint64_t, BlockId>;  // frequency, release seq, block
  struct BlockInfo {
    uint64_t frequency = 0;
    uint64_t release_seq = 0;
    bool listed = false;
  };

  void Unlist(BlockId block) {
    BlockInfo& info = blocks_[block];
    if (!info.listed) return;
    candidates_.erase(Key{info.frequency, info.release_seq, block});
    info.listed = false;
  }

  std::vector<BlockInfo> blocks_;  // [num_blocks]
  absl::btree_set<Key> candidates_;
  uint64_t seq_ = 0;
};

}  // namespace

std::unique_ptr<EvictionPolicy> MakeLfuPolicy() { return std::make_unique<LfuPolicy>(); }

}  // namespace pagedkv
