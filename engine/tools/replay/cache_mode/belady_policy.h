// Copyright 2026 The pagedkv Authors.
//
// BeladyPolicy: the clairvoyant eviction policy (Belady's MIN) on the cache library's
// EvictionPolicy interface. It evicts the candidate block whose next use lies farthest in the
// future (never-used-again blocks first); ties go to the block released earliest, so a request's
// tail (released first) leaves before its parents. It needs the future, so only cache-mode replay
// (which knows the whole trace) can drive it: before releasing a block the replay tells the
// policy when that block is next used (SetNextUse). It is an upper reference for real policies.
//
// Example:
//   auto policy = std::make_unique<BeladyPolicy>();
//   BeladyPolicy* belady = policy.get();
//   auto pool = BlockPool::Create({.num_blocks = 1024}, std::move(policy));
//   belady->SetNextUse(block, /*next request index=*/42);
//   ... pool unpins block -> OnRelease queues it with next use 42 ...
#ifndef PAGEDKV_ENGINE_TOOLS_REPLAY_CACHE_MODE_BELADY_POLICY_H_
#define PAGEDKV_ENGINE_TOOLS_REPLAY_CACHE_MODE_BELADY_POLICY_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "pagedkv/cache/eviction_policy.h"
#include "pagedkv/export.h"

namespace pagedkv::replay {

class PAGEDKV_EXPORT BeladyPolicy final : public EvictionPolicy {
 public:
  std::string_view Name() const override { return "belady"; }
  void Init(int32_t num_blocks) override;
  void OnInsert(BlockId block, const BlockHash& hash) override;
  void OnAccess(BlockId block, const BlockHash& hash) override;
  void OnRelease(BlockId block, const BlockHash& hash) override;
  void OnRemove(BlockId block, const BlockHash& hash) override;
  BlockId PickVictim() override;
  void Clear() override;

  // The time (e.g. request index) at which `block` is next used; read when the block is next
  // released. Blocks never given one count as never used again. REQUIRES: 0 <= block < num_blocks.
  void SetNextUse(BlockId block, int64_t next_use) { next_use_[block] = next_use; }

  // Number of current candidates.
  int64_t num_candidates() const { return num_candidates_; }

 private:
  struct Entry {
    int64_t next_use;  // larger = evicted first
    uint64_t order;    // release order; smaller (earlier) = evicted first among equal next_use
    BlockId block;
    uint32_t version;  // matches version_[block] while the entry is live
  };
  // Max-heap order: larger next_use first, then smaller order.
  static bool Less(const Entry& a, const Entry& b) {
    return a.next_use != b.next_use ? a.next_use < b.next_use : a.order > b.order;
  }
  void Invalidate(BlockId block);
  void Compact();

  std::vector<int64_t> next_use_;
  std::vector<uint32_t> version_;
  std::vector<uint8_t> candidate_;
  std::vector<Entry> heap_;  // lazy deletion: stale entries are skipped when popped
  uint64_t next_order_ = 0;
  int64_t num_candidates_ = 0;
};

}  // namespace pagedkv::replay

#endif  // PAGEDKV_ENGINE_TOOLS_REPLAY_CACHE_MODE_BELADY_POLICY_H_
