// Copyright 2026 The pagedkv Authors.
//
// "s3fifo" eviction: S3-FIFO (Yang et al., "FIFO queues are all you need for cache eviction",
// SOSP 2023): a small FIFO S (10% of the blocks), a main FIFO M and a ghost FIFO G of hashes
// evicted from S (as many as M's share). Each cached block has a 2-bit hit counter.
//   - A block joins a queue when it first becomes a candidate (first release): M when its hash
//     was in G when it entered the index, S otherwise. It keeps its place while pinned again.
//   - Evicting from S (when S holds at least its share, or M has no candidate): S's oldest block
//     moves to M if it was hit since it entered the index (or is pinned now); otherwise it is
//     evicted and its hash goes to G. So blocks used once leave after a short stay in S.
//   - Evicting from M: the oldest block goes back to M's newest end with its counter decremented
//     if the counter is above zero (or it is pinned), and is evicted otherwise.
// Departures from the paper: queue entry at first release instead of at insertion (a block in use
// by the request that computed it is not yet a candidate); pinned blocks met at a queue's end are
// handled as hit ones (moved to M, or given another round in M). Amortised O(1) per call (each
// counter decrement pays for one step).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "cache/policies/block_lists.h"
#include "cache/policies/ghost_list.h"
#include "pagedkv/cache/eviction_policy.h"

namespace pagedkv {
namespace {

enum Queue : int32_t { kSmall = 0, kMain = 1 };

class S3FifoPolicy final : public EvictionPolicy {
 public:
  std::string_view Name() const override { return "s3fifo"; }

  void Init(int32_t num_blocks) override {
    queues_.Init(num_blocks, /*num_lists=*/2);
    meta_.assign(num_blocks, Meta{});
    candidates_[kSmall] = candidates_[kMain] = 0;
    small_share_ = std::max(1, num_blocks / 10);
    ghost_capacity_ = std::max(1, num_blocks - small_share_);
    ghosts_.Clear();
  }

  void OnInsert(BlockId block, const BlockHash& hash) override {
    meta_[block] = Meta{.hash = hash, .hits = 0, .pinned = true, .ghost = ghosts_.Erase(hash)};
  }

  void OnAccess(BlockId block, const BlockHash&) override {
    Meta& m = meta_[block];
    m.hits = static_cast<uint8_t>(std::min(kMaxHits, m.hits + 1));
    if (!m.pinned && queues_.ListOf(block) != internal::BlockLists::kNoList) {
      --candidates_[queues_.ListOf(block)];
    }
    m.pinned = true;
  }

  void OnRelease(BlockId block, const BlockHash&) override {
    Meta& m = meta_[block];
    m.pinned = false;
    if (queues_.ListOf(block) == internal::BlockLists::kNoList) {
      queues_.PushBack(m.ghost ? kMain : kSmall, block);
    }
    ++candidates_[queues_.ListOf(block)];
  }

  void OnRemove(BlockId block, const BlockHash&) override {
    const int32_t queue = queues_.ListOf(block);
    if (queue != internal::BlockLists::kNoList && !meta_[block].pinned) --candidates_[queue];
    queues_.Remove(block);
  }

  BlockId PickVictim() override {
    while (true) {
      const bool from_small = candidates_[kSmall] > 0 &&
                              (queues_.Size(kSmall) >= small_share_ || candidates_[kMain] == 0);
      const BlockId victim = from_small ? StepSmall() : StepMain();
      if (victim != kNullBlock) return victim;
    }
  }

  void Clear() override { Init(static_cast<int32_t>(meta_.size())); }

 private:
  static constexpr int kMaxHits = 3;
  struct Meta {
    BlockHash hash;
    uint8_t hits = 0;     // hits since entering the index, at most kMaxHits
    bool pinned = false;  // referenced (not a candidate)
    bool ghost = false;   // its hash was in G when it entered the index
  };

  // One step at S's oldest end: a victim, or kNullBlock after moving the block to M.
  BlockId StepSmall() {
    const BlockId block = queues_.Front(kSmall);
    Meta& m = meta_[block];
    if (m.pinned || m.hits > 0) {
      if (!m.pinned) {
        --candidates_[kSmall];
        ++candidates_[kMain];
      }
      m.hits = 0;
      queues_.PushBack(kMain, block);
      return kNullBlock;
    }
    --candidates_[kSmall];
    queues_.Remove(block);
    ghosts_.Add(m.hash);
    ghosts_.TrimTo(ghost_capacity_);
    return block;
  }

  // One step at M's oldest end: a victim, or kNullBlock after giving the block another round.
  BlockId StepMain() {
    const BlockId block = queues_.Front(kMain);
    Meta& m = meta_[block];
    if (m.pinned || m.hits > 0) {
      if (!m.pinned) --m.hits;
      queues_.PushBack(kMain, block);
      return kNullBlock;
    }
    --candidates_[kMain];
    queues_.Remove(block);
    return block;
  }

  internal::BlockLists queues_;     // kSmall, kMain: queued blocks, oldest first (pinned ones too)
  std::vector<Meta> meta_;          // [num_blocks]
  int32_t candidates_[2] = {0, 0};  // unpinned blocks on each queue
  int32_t small_share_ = 1;         // S's share of the pool (10%)
  int64_t ghost_capacity_ = 1;      // hashes G remembers (M's share)
  internal::GhostList ghosts_;
};

}  // namespace

std::unique_ptr<EvictionPolicy> MakeS3FifoPolicy() { return std::make_unique<S3FifoPolicy>(); }

}  // namespace pagedkv
