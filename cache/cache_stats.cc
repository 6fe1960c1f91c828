// Copyright 2026 The pagedkv Authors.
#include "pagedkv/cache/cache_stats.h"

#include "absl/strings/str_format.h"

namespace pagedkv {

double CacheStats::HitRate() const {
  return queried_tokens == 0 ? 0.0 : static_cast<double>(hit_tokens) / queried_tokens;
}

double CacheStats::BlockHitRate() const {
  return queried_blocks == 0 ? 0.0 : static_cast<double>(hit_blocks) / queried_blocks;
}

std::string CacheStats::Summary() const {
  return absl::StrFormat(
      "lookups=%d hit_rate=%.2f%% (hit_tokens=%d / queried_tokens=%d) block_hit_rate=%.2f%% "
      "(hit_blocks=%d / queried_blocks=%d) stored=%d evictions=%d (unreachable=%d) "
      "verification_failures=%d "
      "replaced=%d resets=%d promoted_duplicates=%d",
      lookups, 100.0 * HitRate(), hit_tokens, queried_tokens, 100.0 * BlockHitRate(), hit_blocks,
      queried_blocks, stored_blocks, evictions, unreachable_evictions, verification_failures,
      replaced_blocks, resets, promoted_duplicates);
}

}  // namespace pagedkv
