// Copyright 2026 The pagedkv Authors.
//
// TierPolicy: which block a KV tier (host memory, a simulated shared tier) drops when it is full.
// A tier keys its entries by chain hash and tells its policy about every entry:
//   Hit(h)    - a resident entry was read (a lookup hit);
//   Insert(h) - a new entry was stored; returns the older entries to drop so that at most
//               capacity() stay resident (the new entry is always kept);
//   Erase(h)  - a resident entry left the tier for another reason (e.g. a corrupt value).
// Built in:
//   "lru" - least recently stored or hit first;
//   "arc" - Adaptive Replacement Cache (Megiddo and Modha, FAST 2003): a recency list T1 and a
//           frequency list T2 with ghost lists B1 and B2 of recently dropped hashes; a store of a
//           hash found in a ghost list adapts the target size of T1 and puts it in T2.
// Both are O(1) per call (hash maps and linked lists). Not thread-safe.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<pagedkv::TierPolicy> policy,
//                            pagedkv::MakeTierPolicy("arc", /*capacity=*/1024));
//   for (const pagedkv::BlockHash& victim : policy->Insert(hash)) store.erase(victim);
#ifndef PAGEDKV_TIERS_TIER_POLICY_H_
#define PAGEDKV_TIERS_TIER_POLICY_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/export.h"

namespace pagedkv {

class PAGEDKV_EXPORT TierPolicy {
 public:
  virtual ~TierPolicy() = default;
  // "lru" or "arc".
  virtual std::string_view name() const = 0;
  // Entries the tier may hold (> 0).
  virtual int64_t capacity() const = 0;
  // Resident entries (<= capacity()).
  virtual int64_t size() const = 0;
  virtual bool Contains(const BlockHash& hash) const = 0;
  // REQUIRES: Contains(hash). Records a read.
  virtual void Hit(const BlockHash& hash) = 0;
  // REQUIRES: !Contains(hash). Makes `hash` resident; returns the entries dropped to make room
  // (never `hash` itself), in the order they were dropped.
  virtual std::vector<BlockHash> Insert(const BlockHash& hash) = 0;
  // Drops `hash` if resident (not remembered as a ghost); false when it was not resident.
  virtual bool Erase(const BlockHash& hash) = 0;
  // Resident entries, in no particular order (for tests and debugging).
  virtual std::vector<BlockHash> Resident() const = 0;
};

// InvalidArgument for an unknown name (the message lists "lru" and "arc") or capacity < 1.
PAGEDKV_EXPORT absl::StatusOr<std::unique_ptr<TierPolicy>> MakeTierPolicy(std::string_view name,
                                                                          int64_t capacity);

}  // namespace pagedkv

#endif  // PAGEDKV_TIERS_TIER_POLICY_H_
