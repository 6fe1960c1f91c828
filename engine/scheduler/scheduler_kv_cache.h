// Copyright 2026 The pagedkv Authors.
//
// SchedulerKvCache: the few KV cache calls the Scheduler makes, behind one engine-internal
// interface, with an adapter over KvCacheManager (every call forwarded unchanged) and one over
// HybridKvCacheManager (issue #31: the batch gets group 0's block table; admission and
// preemption go by the hybrid AllocateSlots, which counts what every group needs).
//
// A prefix hit is held in CacheHit, whose `plain` or `hybrid` member is filled by the adapter
// that made it and read back only by that adapter.
//
// Thread safety: none (as the Scheduler). The adapters hold a reference to their manager, which
// must outlive them.
#ifndef PAGEDKV_ENGINE_SCHEDULER_SCHEDULER_KV_CACHE_H_
#define PAGEDKV_ENGINE_SCHEDULER_SCHEDULER_KV_CACHE_H_

#include <cstdint>
#include <memory>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pagedkv/cache_request.h"
#include "pagedkv/hybrid_kv_cache_manager.h"
#include "pagedkv/kv_cache_manager.h"
#include "pagedkv/types.h"

namespace pagedkv {
namespace scheduler_internal {

// A prefix hit from SchedulerKvCache::GetComputedBlocks.
struct CacheHit {
  int64_t num_computed_tokens = 0;
  ComputedBlocks plain;         // KvCacheManager adapter
  HybridComputedBlocks hybrid;  // HybridKvCacheManager adapter
};

class SchedulerKvCache {
 public:
  virtual ~SchedulerKvCache() = default;

  // As KvCacheManager::NewRequest. The hybrid adapter refuses cache priorities
  // (InvalidArgument): HybridKvCacheManager has none.
  virtual absl::StatusOr<CacheRequest> NewRequest(RequestId id, std::span<const TokenId> prompt,
                                                  const RequestCacheKeys& keys) const = 0;
  // As the manager's GetComputedBlocks (counts a lookup).
  virtual absl::StatusOr<CacheHit> GetComputedBlocks(const CacheRequest& request) = 0;
  // As the manager's AllocateSlots; `hit` may be null (none). The hybrid adapter refuses
  // lookahead slots and no_cache_from_token >= 0 (InvalidArgument, nothing changed).
  virtual absl::Status AllocateSlots(const CacheRequest& request, int64_t num_new_tokens,
                                     const CacheHit* hit, const AllocateOptions& options) = 0;
  virtual absl::Status Free(RequestId id) = 0;
  virtual bool HasRequest(RequestId id) const = 0;
  // The table the batch carries: the request's only table, or the hybrid manager's group 0.
  virtual absl::StatusOr<std::span<const BlockId>> GetBlockTable(RequestId id) const = 0;
  // KV cache groups: 1 for a plain manager. Group g's table (kNullBlock for released blocks) as
  // the hybrid manager's GetBlockTable(id, g); group 0 is GetBlockTable(id).
  virtual int32_t num_groups() const = 0;
  virtual absl::StatusOr<std::span<const BlockId>> GetGroupBlockTable(RequestId id,
                                                                      int32_t group) const = 0;
  // Leading full blocks of `request` whose hashes the index holds (no verification, no
  // statistics), at most (num_tokens - 1) / block_size: the cache-aware order's estimate. The
  // hybrid adapter applies vLLM's hybrid rule to the hash index (see scheduler_kv_cache.cc).
  virtual int64_t ProbeCachedBlocks(const CacheRequest& request) const = 0;
  // Blocks a request of `num_tokens` KV tokens needs at its peak when each AllocateSlots call
  // adds at most `max_chunk` tokens: NumBlocksFor(num_tokens) for a plain manager; for a hybrid
  // one, that per full-attention group plus, per sliding-window group, its window's blocks and
  // one chunk's (never more than NumBlocksFor(num_tokens)). AddRequest refuses a request whose
  // need exceeds num_blocks(): it could never be admitted.
  virtual int64_t MaxBlocksFor(int64_t num_tokens, int64_t max_chunk) const = 0;
  virtual int32_t num_blocks() const = 0;
  virtual int32_t NumAvailableBlocks() const = 0;
  virtual int32_t block_size() const = 0;
  virtual bool prefix_caching_enabled() const = 0;
  // False for the hybrid adapter: lookahead slots (drafts) and chunk reuse are refused.
  virtual bool supports_lookahead_and_reuse() const = 0;
};

std::unique_ptr<SchedulerKvCache> MakeSchedulerKvCache(KvCacheManager& cache);
std::unique_ptr<SchedulerKvCache> MakeSchedulerKvCache(HybridKvCacheManager& cache);

}  // namespace scheduler_internal
}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_SCHEDULER_SCHEDULER_KV_CACHE_H_
