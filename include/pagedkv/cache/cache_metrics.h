// Copyright 2026 The pagedkv Authors.
//
// Prefix-cache metrics for Prometheus: per-block lifecycle histograms (vLLM's KV cache residency
// metrics) and the text exposition format (version 0.0.4) that KvCacheManager::WritePrometheus
// emits.
//
//   block lifetime         - seconds from a block's store into the index to its eviction;
//   idle before eviction   - seconds from its last release (reference count 0) to its eviction;
//   reuse gap              - seconds between consecutive accesses (its store, then each hit).
//
// BlockLifecycleMetrics observes a BlockPool (pagedkv/cache/block_lifecycle_observer.h); its clock
// is injectable so tests need no sleeps. Blocks uncached without eviction (Uncache, reset) are not
// observed as evictions; their next store starts them afresh.
//
// Example:
//   auto manager = pagedkv::KvCacheManager::Create({.num_blocks = 4096,
//                                                   .collect_block_metrics = true}).value();
//   ...                                              // serve requests
//   std::string text;
//   PAGEDKV_RETURN_IF_ERROR(manager->WritePrometheus(&text, {.labels = {{"model", "llama"}}}));
//
// Not thread-safe (one thread drives the pool).
#ifndef PAGEDKV_CACHE_CACHE_METRICS_H_
#define PAGEDKV_CACHE_CACHE_METRICS_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "pagedkv/cache/block_lifecycle_observer.h"
#include "pagedkv/cache/cache_stats.h"
#include "pagedkv/export.h"
#include "pagedkv/types.h"

namespace pagedkv {

// A Prometheus histogram: counts[i] observations <= upper_bounds[i] (and > the bound before);
// counts.back() counts those above the last bound (the +Inf bucket).
class PAGEDKV_EXPORT Histogram {
 public:
  // REQUIRES: upper_bounds strictly increasing and finite.
  explicit Histogram(std::vector<double> upper_bounds);
  // 1 ms .. 1800 s in 1-2-5 steps (seconds): block residency times.
  static std::vector<double> DefaultSecondsBounds();

  void Observe(double value);
  void Clear();

  std::span<const double> upper_bounds() const { return upper_bounds_; }
  std::span<const int64_t> counts() const { return counts_; }  // [upper_bounds().size() + 1]
  int64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> upper_bounds_;
  std::vector<int64_t> counts_;
  int64_t count_ = 0;
  double sum_ = 0.0;
};

// The three residency histograms, fed by a pool's lifecycle hooks.
class PAGEDKV_EXPORT BlockLifecycleMetrics : public BlockLifecycleObserver {
 public:
  // `now_seconds`: a monotonic clock in seconds; null = std::chrono::steady_clock.
  explicit BlockLifecycleMetrics(int32_t num_blocks, std::function<double()> now_seconds = {});

  void OnStored(BlockId block) override;
  void OnHit(BlockId block) override;
  void OnReleased(BlockId block) override;
  void OnEvicted(BlockId block) override;

  const Histogram& lifetime() const { return lifetime_; }
  const Histogram& idle_before_evict() const { return idle_before_evict_; }
  const Histogram& reuse_gap() const { return reuse_gap_; }
  // Clears the histograms (per-block times are kept, so later observations stay right).
  void Clear();

 private:
  struct Times {
    double stored = 0.0;
    double last_access = 0.0;
    double released = 0.0;
  };
  double Now() const;

  std::function<double()> now_seconds_;
  std::vector<Times> times_;  // [num_blocks]
  Histogram lifetime_;
  Histogram idle_before_evict_;
  Histogram reuse_gap_;
};

// Settings of WritePrometheus.
struct PAGEDKV_EXPORT PrometheusOptions {
  // Labels added to every sample, e.g. {{"model", "llama2-7b"}}. Names match
  // [a-zA-Z_][a-zA-Z0-9_]* and do not start with "__"; values are escaped.
  std::vector<std::pair<std::string, std::string>> labels;
};

// Appends Prometheus text-format (0.0.4) families to a string: "# HELP", "# TYPE", then samples
// with the options' labels. CheckLabels says whether the options' labels are valid.
class PAGEDKV_EXPORT PrometheusWriter {
 public:
  // InvalidArgument naming the first bad label name.
  static absl::Status CheckLabels(const PrometheusOptions& options);
  // REQUIRES: CheckLabels(options).ok().
  PrometheusWriter(std::string* out, const PrometheusOptions& options);

  // `name` is the full sample name (a counter's ends in "_total").
  void Counter(const std::string& name, const std::string& help, int64_t value);
  void Gauge(const std::string& name, const std::string& help, double value);
  void Histogram(const std::string& name, const std::string& help, const pagedkv::Histogram& h);

 private:
  void Header(const std::string& name, const std::string& help, const std::string& type);
  // "{a="x",le="0.5"}" with the options' labels and an optional `le`.
  std::string Labels(const std::string& le) const;

  std::string* out_;
  std::string labels_;  // the options' labels, rendered and escaped, without braces
};

// The lookup counters every cache manager writes, under the names vLLM users know:
// pagedkv_prefix_cache_lookups_total, _queries_total (vLLM's prefix_cache_queries) and
// _hits_total (prefix_cache_hits), from `stats`.
PAGEDKV_EXPORT void WritePrefixCacheLookups(PrometheusWriter& w, const CacheStats& stats);

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_CACHE_METRICS_H_
