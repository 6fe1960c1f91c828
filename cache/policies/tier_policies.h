// Copyright 2026 The pagedkv Authors.
//
// The built-in TierPolicy constructors behind MakeTierPolicy (pagedkv/tiers/tier_policy.h).
// REQUIRES: capacity >= 1 (MakeTierPolicy checks it).
// EvictingTierPolicy adds EvictOne for a tier that must make room below its capacity (the disk
// tier, when the folder it shares with other processes is over the shared byte budget).
#ifndef PAGEDKV_CACHE_POLICIES_TIER_POLICIES_H_
#define PAGEDKV_CACHE_POLICIES_TIER_POLICIES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>

#include "absl/status/statusor.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/tiers/tier_policy.h"

namespace pagedkv {

class EvictingTierPolicy : public TierPolicy {
 public:
  using Evictable = std::function<bool(const BlockHash&)>;
  // Drops the resident entry Insert would drop first to make room (LRU: the least recently used;
  // ARC: the paper's REPLACE, as if T1 + T2 were full) among those `evictable` accepts (null:
  // all), and returns it; nullopt when there is none. Entries passed over stay where they are.
  // O(1) when the first candidate is accepted, O(passed over) otherwise.
  virtual std::optional<BlockHash> EvictOne(const Evictable& evictable = nullptr) = 0;
  // The entry EvictOne(evictable) would drop, without dropping it.
  virtual std::optional<BlockHash> Victim(const Evictable& evictable = nullptr) const = 0;
};

std::unique_ptr<EvictingTierPolicy> NewTierLruPolicy(int64_t capacity);
std::unique_ptr<EvictingTierPolicy> NewTierArcPolicy(int64_t capacity);
// MakeTierPolicy's checks and names, for a tier that needs EvictOne.
absl::StatusOr<std::unique_ptr<EvictingTierPolicy>> MakeEvictingTierPolicy(std::string_view name,
                                                                           int64_t capacity);

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_POLICIES_TIER_POLICIES_H_
