// Copyright 2026 The pagedkv Authors.
//
// Internal: the eviction policy of a BlockPool with priorities. One instance of the configured
// policy per priority level in use (made lazily); the victim comes from the lowest level that has
// an evictable block, chosen there by that level's policy (LRU among equals by default). Blocks
// whose retention ran out move to the default level when the next victim is picked. Blocks above
// the default level may hold at most a fixed number of index entries (the cap); past it a block
// is cached at the default level.
#ifndef PAGEDKV_CACHE_POLICIES_PRIORITY_POLICY_H_
#define PAGEDKV_CACHE_POLICIES_PRIORITY_POLICY_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <queue>
#include <string_view>
#include <vector>

#include "pagedkv/cache/block_hash.h"
#include "pagedkv/cache/cache_priority.h"
#include "pagedkv/cache/eviction_policy.h"

namespace pagedkv {

class PriorityPolicy final : public EvictionPolicy {
 public:
  using PolicyFactory = std::function<std::unique_ptr<EvictionPolicy>()>;
  using Clock = std::function<double()>;

  // `make_level` makes a fresh policy of one kind per call; `max_high_fraction` in (0, 1];
  // `clock` gives seconds (never decreasing).
  PriorityPolicy(PolicyFactory make_level, double max_high_fraction, Clock clock);

  std::string_view Name() const override { return name_; }
  void Init(int32_t num_blocks) override;
  void OnInsert(BlockId block, const BlockHash& hash) override;
  void OnInsertInChain(BlockId block, const BlockHash& hash, const BlockHash& parent_hash,
                       BlockId parent_block) override;
  void OnAccess(BlockId block, const BlockHash& hash) override;
  void OnRelease(BlockId block, const BlockHash& hash) override;
  void OnRemove(BlockId block, const BlockHash& hash) override;
  BlockId PickVictim() override;
  void Clear() override;

  // The priority the next OnInsert of `block` caches it with (default when never set).
  void SetNext(BlockId block, const CachePriority& priority);
  // The next OnInsert of `to` takes cached `from`'s level and retention (a promoted duplicate).
  void InheritNext(BlockId to, BlockId from);
  // Cached `block` moves up to `priority` when higher than its level (same level: the retention
  // is renewed). Subject to the cap.
  void Raise(BlockId block, const CachePriority& priority);
  // The level of cached `block` now (retention expiring is applied at the next pick).
  int32_t LevelOf(BlockId block) const { return level_[block]; }
  // Index entries above the default level now.
  int32_t NumHighPriority() const { return num_high_; }

 private:
  struct Expiry {
    double at;
    BlockId block;
    uint32_t epoch;
    bool operator>(const Expiry& o) const { return at > o.at; }
  };

  EvictionPolicy& Level(int32_t level);
  // Caps a requested level: above the default only while fewer than the cap are there.
  int32_t Admit(int32_t level) const;
  void Enter(BlockId block, int32_t level, double expires_at);
  void Leave(BlockId block);
  void MoveTo(BlockId block, int32_t level, double expires_at);
  void DemoteExpired();

  PolicyFactory make_level_;
  double max_high_fraction_;
  Clock clock_;
  std::string name_;
  int32_t num_blocks_ = 0;
  int32_t max_high_ = 0;
  int32_t num_high_ = 0;
  std::array<std::unique_ptr<EvictionPolicy>, kMaxCachePriority + 1> levels_;
  std::array<int32_t, kMaxCachePriority + 1> candidates_{};
  // Per block: level, candidate, cached, the hash (for moves), expiry and its epoch; the next
  // insert's level and expiry.
  std::vector<int8_t> level_;
  std::vector<uint8_t> candidate_;
  std::vector<uint8_t> cached_;
  std::vector<BlockHash> hash_;
  std::vector<double> expires_;
  std::vector<uint32_t> epoch_;
  std::vector<CachePriority> next_;
  std::vector<double> next_expires_;  // NaN: from next_'s retention
  std::priority_queue<Expiry, std::vector<Expiry>, std::greater<Expiry>> expiries_;
};

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_POLICIES_PRIORITY_POLICY_H_
