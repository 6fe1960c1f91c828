// Copyright 2026 The pagedkv Authors.
//
// KvCacheManager::WritePrometheus: the manager's counters, gauges and block histograms in the
// Prometheus text format (see include/pagedkv/cache/kv_cache_manager.h for the metric names).
#include <string>

#include "pagedkv/cache/cache_metrics.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {

absl::Status KvCacheManager::WritePrometheus(std::string* out,
                                             const PrometheusOptions& options) const {
  PAGEDKV_RETURN_IF_ERROR(PrometheusWriter::CheckLabels(options));
  PrometheusWriter w(out, options);
  const CacheStats s = stats();
  WritePrefixCacheLookups(w, s);
  w.Counter("pagedkv_prefix_cache_stored_blocks_total", "Blocks inserted into the prefix index.",
            s.stored_blocks);
  w.Counter("pagedkv_prefix_cache_evicted_blocks_total",
            "Cached blocks that left the index (evicted to make room, dropped as unreachable, or "
            "uncached), every one announced by a BlockRemoved event.",
            s.evictions);
  w.Gauge("pagedkv_kv_cache_usage_ratio",
          "Fraction of KV blocks referenced by requests, in [0, 1].", Usage());
  w.Gauge("pagedkv_kv_cache_blocks", "KV blocks in the pool.", num_blocks());
  w.Gauge("pagedkv_kv_cache_cached_blocks", "KV blocks in the prefix index.",
          pool_->NumCachedBlocks());
  if (num_groups() > 1) {
    w.Gauge("pagedkv_kv_cache_groups", "KV cache groups (kinds of attention layers).",
            num_groups());
  }
  if (block_metrics_ != nullptr) {
    w.Histogram("pagedkv_kv_block_lifetime_seconds",
                "Seconds from a block's store into the prefix index to its eviction.",
                block_metrics_->lifetime());
    w.Histogram("pagedkv_kv_block_idle_before_evict_seconds",
                "Seconds from a block's last release to its eviction.",
                block_metrics_->idle_before_evict());
    w.Histogram("pagedkv_kv_block_reuse_gap_seconds",
                "Seconds between consecutive accesses of a cached block (store, then hits).",
                block_metrics_->reuse_gap());
  }
  return absl::OkStatus();
}

}  // namespace pagedkv
