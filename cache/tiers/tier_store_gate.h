// Copyright 2026 The pagedkv Authors.
//
// TierStoreGate: the store rule and threshold of a KV tier (TierStoreOptions,
// pagedkv/tiers/kv_tier.h) as one decision, made by the engine's TierChain
// (cache/tiers/tier_chain.h), which both replay modes drive too, so a simulation stores exactly
// the blocks the engine would. The gate counts device prefix hits per chain hash (a reuse); a tier
// then takes a block
//   - write-through, threshold 0: when the device pool caches it (StoresWhenCached);
//   - write-through, threshold k > 0: at its k-th device prefix hit (StoresAtHit);
//   - write-back: when the device pool evicts it, once it was hit at least `threshold` times
//     (StoresWhenEvicted; threshold 0: every evicted block).
// At most `max_tracked` hashes are counted; when full, every count is cleared (so a count can
// restart and a block then waits for `threshold` more hits): the engine's memory stays bounded.
//
// Cost: one hash-map update per NoteHit. Not thread-safe.
//
// Example:
//   TierStoreGate gate;
//   const int32_t hits = gate.NoteHit(hash);  // a device prefix hit
//   if (TierStoreGate::StoresAtHit(tier.store_options(), hits)) Store(tier, hash);
#ifndef PAGEDKV_CACHE_TIERS_TIER_STORE_GATE_H_
#define PAGEDKV_CACHE_TIERS_TIER_STORE_GATE_H_

#include <cstddef>
#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/export.h"
#include "pagedkv/tiers/kv_tier.h"

namespace pagedkv {

class PAGEDKV_EXPORT TierStoreGate {
 public:
  static constexpr size_t kDefaultMaxTracked = size_t{1} << 20;

  TierStoreGate() = default;
  // REQUIRES: max_tracked >= 1.
  explicit TierStoreGate(size_t max_tracked) : max_tracked_(max_tracked) {}

  // Counts one device prefix hit of `hash`; returns its hits so far (>= 1).
  int32_t NoteHit(const BlockHash& hash);
  // Device prefix hits of `hash` counted so far (0 when none or forgotten).
  int32_t Hits(const BlockHash& hash) const;
  size_t tracked() const { return hits_.size(); }

  // Write-through with no threshold: the block goes to the tier when the device pool caches it.
  static bool StoresWhenCached(const TierStoreOptions& o) {
    return o.rule == TierStoreRule::kWriteThrough && o.threshold <= 0;
  }
  // Write-through with a threshold: the block goes to the tier at exactly its threshold-th hit.
  static bool StoresAtHit(const TierStoreOptions& o, int32_t hits) {
    return o.rule == TierStoreRule::kWriteThrough && o.threshold > 0 && hits == o.threshold;
  }
  // Write-back: an evicted block goes to the tier once it was hit at least threshold times.
  static bool StoresWhenEvicted(const TierStoreOptions& o, int32_t hits) {
    return o.rule == TierStoreRule::kWriteBack && hits >= o.threshold;
  }

 private:
  size_t max_tracked_ = kDefaultMaxTracked;
  absl::flat_hash_map<BlockHash, int32_t> hits_;
};

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_TIERS_TIER_STORE_GATE_H_
