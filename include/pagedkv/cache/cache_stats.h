// Copyright 2026 The pagedkv Authors.
//
// Prefix-cache statistics: counters kept by BlockPool (evictions, stores) and KvCacheManager
// (lookups, hits), and a one-line hit-rate summary.
//
// Example:
//   pagedkv::CacheStats s = manager->stats();
//   std::printf("%s\n", s.Summary().c_str());  // "lookups=10 hit_rate=43.75% (…)"
#ifndef PAGEDKV_CACHE_CACHE_STATS_H_
#define PAGEDKV_CACHE_CACHE_STATS_H_

#include <cstdint>
#include <string>

#include "pagedkv/export.h"

namespace pagedkv {

struct PAGEDKV_EXPORT CacheStats {
  int64_t lookups = 0;         // prefix lookups (KvCacheManager::GetComputedBlocks calls)
  int64_t queried_tokens = 0;  // prompt tokens presented to those lookups
  int64_t queried_blocks = 0;  // full blocks presented to those lookups
  int64_t hit_tokens = 0;      // tokens served from the cache (num_computed_tokens)
  int64_t hit_blocks = 0;      // blocks served from the cache
  int64_t stored_blocks = 0;   // blocks that entered the hash index (promotions included)
  // Cached blocks that left the index other than by a reset: evicted to make room, dropped as
  // unreachable, or uncached (replaced, truncated). stored_blocks - evictions = cached blocks
  // (until a reset), and every BlockRemoved event is counted here.
  int64_t evictions = 0;
  int64_t unreachable_evictions = 0;  // of evictions: dropped because their parent left first
  int64_t verification_failures = 0;  // hash hits rejected because tokens/parent did not match
  int64_t replaced_blocks = 0;        // indexed blocks replaced after failing verification
  int64_t resets = 0;                 // ResetPrefixCache calls
  int64_t promoted_duplicates = 0;    // duplicates indexed in place of their evicted holder

  // hit_tokens / queried_tokens, or 0 when nothing was queried.
  double HitRate() const;
  // hit_blocks / queried_blocks, or 0 when nothing was queried.
  double BlockHitRate() const;
  // One line with every counter and the hit rates.
  std::string Summary() const;
};

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_CACHE_STATS_H_
