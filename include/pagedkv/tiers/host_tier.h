// Copyright 2026 The pagedkv Authors.
//
// HostTier: KV blocks in host memory below the device pool (KvTier, kv_tier.h). Capacity in
// blocks or bytes, its own eviction policy ("lru" or "arc", tier_policy.h), and the store rule
// and threshold the engine applies. Every value has the same size (value_bytes, the engine's
// serialised block); a tier with value_bytes 0 holds no bytes at all (a simulated tier for
// replay, which counts hits only). A full tier evicts: storing never fails for lack of room.
// Memory is allocated per block when stored; a failed allocation drops the store (a fault).
//
// Cost: LoadPrefix and Store are O(1) hash-map and list operations per block plus one copy of
// the value. Not thread-safe.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<pagedkv::HostTier> host,
//                            pagedkv::HostTier::Create({.capacity_blocks = 4096,
//                                                       .value_bytes = block_bytes,
//                                                       .policy = "arc"}));
//   std::vector<pagedkv::TierStoreItem> items = {{.block = {.hash = h, .tokens = tokens}, .value =
//   v}}; PAGEDKV_RETURN_IF_ERROR(host->Store(items));
#ifndef PAGEDKV_TIERS_HOST_TIER_H_
#define PAGEDKV_TIERS_HOST_TIER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/export.h"
#include "pagedkv/tiers/kv_tier.h"
#include "pagedkv/tiers/tier_policy.h"
#include "pagedkv/types.h"

namespace pagedkv {

struct PAGEDKV_EXPORT HostTierOptions {
  int64_t capacity_blocks = 0;  // > 0: hold at most this many blocks
  int64_t capacity_bytes = 0;   // > 0: hold at most this many value bytes (needs value_bytes > 0)
  // (At least one capacity must be set; with both, the smaller number of blocks wins.)
  int64_t value_bytes = 0;      // bytes of every value; 0: values are empty (simulated tier)
  int32_t block_size = 0;       // > 0: tokens per block, checked on Store; 0: not checked
  std::string policy = "lru";   // "lru" or "arc"
  TierStoreOptions store = {};  // read by the engine (see kv_tier.h)
  std::string name = "host";    // KvTier::name() (replay names its simulated remote "remote")
  std::string medium = "CPU";   // KvTier::medium(), the events' medium
};

class PAGEDKV_EXPORT HostTier final : public KvTier {
 public:
  // InvalidArgument for no capacity, negative sizes, capacity_bytes without value_bytes, a
  // capacity below one block, or an unknown policy.
  static absl::StatusOr<std::unique_ptr<HostTier>> Create(HostTierOptions options);

  std::string_view name() const override { return options_.name; }
  std::string_view medium() const override { return options_.medium; }
  const TierStoreOptions& store_options() const override { return options_.store; }
  absl::StatusOr<int64_t> LoadPrefix(std::span<const TierBlock> blocks,
                                     TierValueSink sink) override;
  absl::Status Store(std::span<const TierStoreItem> items) override;
  TierStats stats() const override;

  // Whether `hash` is held (no policy update).
  bool Contains(const BlockHash& hash) const { return entries_.contains(hash); }
  // Blocks the tier can hold.
  int64_t capacity_blocks() const { return policy_->capacity(); }
  const TierPolicy& policy() const { return *policy_; }
  const HostTierOptions& options() const { return options_; }

 private:
  struct Entry {
    std::vector<TokenId> tokens;
    std::unique_ptr<std::byte[]> value;  // value_bytes bytes (null when value_bytes is 0)
  };
  HostTier(HostTierOptions options, std::unique_ptr<TierPolicy> policy);
  absl::Status CheckItem(const TierStoreItem& item) const;
  // Writes one checked item (evicting as the policy says).
  void StoreOne(const TierStoreItem& item);
  // Drops `hash` from the entries (emits kBlockRemoved); the policy must already have.
  void DropEntry(const BlockHash& hash);

  HostTierOptions options_;
  std::unique_ptr<TierPolicy> policy_;
  absl::flat_hash_map<BlockHash, Entry> entries_;
  std::unique_ptr<std::byte[]> spare_;  // the last dropped entry's buffer, reused by a store
  TierStats stats_;
};

}  // namespace pagedkv

#endif  // PAGEDKV_TIERS_HOST_TIER_H_
