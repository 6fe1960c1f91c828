// Copyright 2026 The pagedkv Authors.
//
// SchedulerKvCache adapters (engine/scheduler/scheduler_kv_cache.h). PlainKvCache forwards every
// call to KvCacheManager unchanged, so the Scheduler over it behaves as before the interface.
// HybridKvCache forwards to HybridKvCacheManager and refuses what it lacks.
#include "engine/scheduler/scheduler_kv_cache.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace scheduler_internal {

namespace {

// At least one token is left to compute, and only full blocks hit.
int64_t MaxHitBlocks(const CacheRequest& request, int32_t block_size) {
  if (request.num_tokens() == 0) return 0;
  return std::min<int64_t>((request.num_tokens() - 1) / block_size, request.num_full_blocks());
}

class PlainKvCache final : public SchedulerKvCache {
 public:
  explicit PlainKvCache(KvCacheManager& cache) : cache_(cache) {}

  absl::StatusOr<CacheRequest> NewRequest(RequestId id, std::span<const TokenId> prompt,
                                          const RequestCacheKeys& keys) const override {
    return cache_.NewRequest(id, prompt, keys);
  }
  absl::StatusOr<CacheHit> GetComputedBlocks(const CacheRequest& request) override {
    CacheHit hit;
    PAGEDKV_ASSIGN_OR_RETURN(hit.plain, cache_.GetComputedBlocks(request));
    hit.num_computed_tokens = hit.plain.num_computed_tokens;
    return hit;
  }
  absl::Status AllocateSlots(const CacheRequest& request, int64_t num_new_tokens,
                             const CacheHit* hit, const AllocateOptions& options) override {
    if (hit == nullptr) return cache_.AllocateSlots(request, num_new_tokens, {}, options);
    return cache_.AllocateSlots(request, num_new_tokens, hit->plain, options);
  }
  absl::Status Free(RequestId id) override { return cache_.Free(id); }
  bool HasRequest(RequestId id) const override { return cache_.HasRequest(id); }
  absl::StatusOr<std::span<const BlockId>> GetBlockTable(RequestId id) const override {
    return cache_.GetBlockTable(id);
  }
  int32_t num_groups() const override { return 1; }
  absl::StatusOr<std::span<const BlockId>> GetGroupBlockTable(RequestId id,
                                                              int32_t group) const override {
    if (group != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("KV cache group ", group, " of a plain KvCacheManager (only group 0)"));
    }
    return cache_.GetBlockTable(id);
  }
  int64_t ProbeCachedBlocks(const CacheRequest& request) const override {
    const int64_t max_blocks = MaxHitBlocks(request, cache_.block_size());
    const auto hashes = request.block_hashes();
    int64_t n = 0;
    while (n < max_blocks && cache_.pool().FindCached(hashes[n]) != kNullBlock) ++n;
    return n;
  }
  int64_t MaxBlocksFor(int64_t num_tokens, int64_t /*max_chunk*/) const override {
    return NumBlocksFor(num_tokens, cache_.block_size());
  }
  int32_t num_blocks() const override { return cache_.num_blocks(); }
  int32_t NumAvailableBlocks() const override { return cache_.NumAvailableBlocks(); }
  int32_t block_size() const override { return cache_.block_size(); }
  bool prefix_caching_enabled() const override { return cache_.options().enable_prefix_caching; }
  bool supports_lookahead_and_reuse() const override { return true; }

 private:
  KvCacheManager& cache_;
};

class HybridKvCache final : public SchedulerKvCache {
 public:
  explicit HybridKvCache(HybridKvCacheManager& cache) : cache_(cache) {}

  absl::StatusOr<CacheRequest> NewRequest(RequestId id, std::span<const TokenId> prompt,
                                          const RequestCacheKeys& keys) const override {
    if (!(keys.priority == CachePriority{}) || !keys.priority_spans.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("request ", id,
                       ": cache priorities are not supported over a HybridKvCacheManager; leave "
                       "cache_priority and cache_priority_spans at their defaults"));
    }
    return cache_.NewRequest(id, prompt, keys);
  }
  absl::StatusOr<CacheHit> GetComputedBlocks(const CacheRequest& request) override {
    CacheHit hit;
    PAGEDKV_ASSIGN_OR_RETURN(hit.hybrid, cache_.GetComputedBlocks(request));
    hit.num_computed_tokens = hit.hybrid.num_computed_tokens;
    return hit;
  }
  absl::Status AllocateSlots(const CacheRequest& request, int64_t num_new_tokens,
                             const CacheHit* hit, const AllocateOptions& options) override {
    if (options.num_lookahead_tokens != 0 || options.no_cache_from_token >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "request ", request.id(),
          ": lookahead slots (draft tokens) and no_cache_from_token (chunk reuse) are not "
          "supported over a HybridKvCacheManager"));
    }
    if (hit == nullptr) return cache_.AllocateSlots(request, num_new_tokens);
    return cache_.AllocateSlots(request, num_new_tokens, hit->hybrid);
  }
  absl::Status Free(RequestId id) override { return cache_.Free(id); }
  bool HasRequest(RequestId id) const override { return cache_.HasRequest(id); }
  absl::StatusOr<std::span<const BlockId>> GetBlockTable(RequestId id) const override {
    return cache_.GetBlockTable(id, 0);
  }
  int32_t num_groups() const override { return cache_.num_groups(); }
  absl::StatusOr<std::span<const BlockId>> GetGroupBlockTable(RequestId id,
                                                              int32_t group) const override {
    return cache_.GetBlockTable(id, group);
  }
  int64_t ProbeCachedBlocks(const CacheRequest& request) const override;
  int64_t MaxBlocksFor(int64_t num_tokens, int64_t max_chunk) const override;
  int32_t num_blocks() const override { return cache_.options().num_blocks; }
  int32_t NumAvailableBlocks() const override { return cache_.NumAvailableBlocks(); }
  int32_t block_size() const override { return cache_.block_size(); }
  bool prefix_caching_enabled() const override { return cache_.options().enable_prefix_caching; }
  bool supports_lookahead_and_reuse() const override { return false; }

 private:
  bool Cached(const CacheRequest& request, int32_t g, int64_t i) const {
    return cache_.pool().FindCached(
               HybridKvCacheManager::FoldGroupHash(request.block_hashes()[i], g)) != kNullBlock;
  }
  // Group g's (sliding window) hit of at most `max_blocks` blocks, by hash only: the end of the
  // rightmost run of cdiv(window - 1, block_size) cached blocks, or a shorter run from block 0.
  int64_t SlidingWindowProbe(const CacheRequest& request, int32_t g, int64_t max_blocks) const;

  HybridKvCacheManager& cache_;
};

int64_t HybridKvCache::SlidingWindowProbe(const CacheRequest& request, int32_t g,
                                          int64_t max_blocks) const {
  const int64_t bs = cache_.block_size();
  const int64_t need = (cache_.group(g).sliding_window - 1 + bs - 1) / bs;
  if (need == 0) return max_blocks;
  int64_t run = 0;
  for (int64_t i = max_blocks - 1; i >= 0; --i) {
    if (!Cached(request, g, i)) {
      run = 0;
      continue;
    }
    if (++run >= need) return i + run;
  }
  return run;
}

int64_t HybridKvCache::MaxBlocksFor(int64_t num_tokens, int64_t max_chunk) const {
  const int64_t bs = cache_.block_size();
  const int64_t all = NumBlocksFor(num_tokens, static_cast<int32_t>(bs));
  int64_t total = 0;
  for (int32_t g = 0; g < cache_.num_groups(); ++g) {
    const KvCacheGroupSpec& s = cache_.group(g);
    if (s.kind != KvCacheGroupKind::kSlidingWindow) {
      total += all;
      continue;
    }
    // Blocks from the first one the window needs (partial at both ends) through the chunk's end.
    const int64_t window = (s.sliding_window - 1 + bs - 1) / bs + 1;
    total += std::min(all, window + (max_chunk + bs - 1) / bs + 1);
  }
  return total;
}

// HybridKvCacheManager::GetComputedBlocks' rule (full-attention prefix, then sliding-window
// groups cut it back until all agree) on the hash index only: no verification, no statistics.
int64_t HybridKvCache::ProbeCachedBlocks(const CacheRequest& request) const {
  int64_t hit = MaxHitBlocks(request, cache_.block_size());
  for (int32_t g = 0; g < cache_.num_groups(); ++g) {
    if (cache_.group(g).kind != KvCacheGroupKind::kFullAttention) continue;
    int64_t n = 0;
    while (n < hit && Cached(request, g, n)) ++n;
    hit = n;
  }
  for (bool cut = true; cut;) {
    cut = false;
    for (int32_t g = 0; g < cache_.num_groups(); ++g) {
      if (cache_.group(g).kind != KvCacheGroupKind::kSlidingWindow) continue;
      const int64_t n = SlidingWindowProbe(request, g, hit);
      if (n < hit) {
        hit = n;
        cut = true;
      }
    }
  }
  return hit;
}

}  // namespace

std::unique_ptr<SchedulerKvCache> MakeSchedulerKvCache(KvCacheManager& cache) {
  return std::make_unique<PlainKvCache>(cache);
}

std::unique_ptr<SchedulerKvCache> MakeSchedulerKvCache(HybridKvCacheManager& cache) {
  return std::make_unique<HybridKvCache>(cache);
}

}  // namespace scheduler_internal
}  // namespace pagedkv
