// Copyright 2026 The pagedkv Authors.
//
// "lru" TierPolicy: one recency list, most recent at the front; a hash map from hash to its list
// node. Invariant: the map and the list hold the same hashes, list.size() <= capacity.
#include <cstdint>
#include <list>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "cache/policies/tier_policies.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/tiers/tier_policy.h"

namespace pagedkv {
namespace {

class TierLruPolicy final : public EvictingTierPolicy {
 public:
  explicit TierLruPolicy(int64_t capacity) : capacity_(capacity) {}
  std::string_view name() const override { return "lru"; }
  int64_t capacity() const override { return capacity_; }
  int64_t size() const override { return static_cast<int64_t>(order_.size()); }
  bool Contains(const BlockHash& hash) const override { return where_.contains(hash); }

  void Hit(const BlockHash& hash) override {
    auto it = where_.find(hash);
    if (it == where_.end()) return;
    order_.splice(order_.begin(), order_, it->second);
  }

  std::vector<BlockHash> Insert(const BlockHash& hash) override {
    std::vector<BlockHash> dropped;
    if (where_.contains(hash)) {
      Hit(hash);
      return dropped;
    }
    while (static_cast<int64_t>(order_.size()) >= capacity_) {
      dropped.push_back(order_.back());
      where_.erase(order_.back());
      order_.pop_back();
    }
    order_.push_front(hash);
    where_[hash] = order_.begin();
    return dropped;
  }

  bool Erase(const BlockHash& hash) override {
    auto it = where_.find(hash);
    if (it == where_.end()) return false;
    order_.erase(it->second);
    where_.erase(it);
    return true;
  }

  std::optional<BlockHash> Victim(const Evictable& evictable) const override {
    for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
      if (evictable == nullptr || evictable(*it)) return *it;
    }
    return std::nullopt;
  }

  std::optional<BlockHash> EvictOne(const Evictable& evictable) override {
    const std::optional<BlockHash> victim = Victim(evictable);
    if (victim.has_value()) Erase(*victim);
    return victim;
  }

  std::vector<BlockHash> Resident() const override { return {order_.begin(), order_.end()}; }

 private:
  int64_t capacity_;
  std::list<BlockHash> order_;  // most recent first
  absl::flat_hash_map<BlockHash, std::list<BlockHash>::iterator> where_;
};

}  // namespace

std::unique_ptr<EvictingTierPolicy> NewTierLruPolicy(int64_t capacity) {
  return std::make_unique<TierLruPolicy>(capacity);
}

}  // namespace pagedkv
