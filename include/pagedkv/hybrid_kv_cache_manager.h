// Copyright 2026 The pagedkv Authors.
//
// HybridKvCacheManager: prefix caching for a model whose layers mix full attention and sliding
// window attention (gpt-oss, Gemma 3), in the shape of vLLM's hybrid KV cache manager
// (docs/design/hybrid_kv_cache_manager.md, kv_cache_coordinator.py). Layers with the same kind
// and window form a KV cache group (KvCacheGroupSpec); every group draws blocks of one page size
// from ONE BlockPool (one eviction order), and each request holds one block table per group.
//
// Hashes: group 0 uses the request's chain hashes unchanged (equal to a plain KvCacheManager's);
// group g > 0 folds g into each of them (FoldGroupHash), so groups never share a block.
// Prefix hit (GetComputedBlocks), as vLLM's coordinator: start from the longest prefix every
// full-attention group holds; each sliding-window group must hold the last
// cdiv(window - 1, block_size) blocks ending at the hit point (searched right to left, earlier
// blocks may be gone); a group that cannot cuts the hit back and the groups are asked again until
// all agree. A hit never covers the whole prompt (the last token is recomputed).
// Release: when AllocateSlots finds that a sliding-window group's block lies wholly before
// (num_computed_tokens - window + 1), the block is unpinned (cached blocks become evictable and
// stay reusable) and its table entry becomes kNullBlock (vLLM's null block).
//
// Differences from KvCacheManager: no lookahead slots, truncation, priorities or tiers; hits are
// verified by tokens, extra keys and parent hash but not by chain links (a sliding-window
// group's chain has holes by design). Differences from vLLM: kNullBlock instead of a reserved
// null block; failed calls change nothing (ResourceExhausted instead of None).
//
// Not thread-safe. Holds no device memory; returned spans stay valid until the next mutating
// call.
//
// Example (gpt-oss-20b: 12 full layers, 12 layers with a 128-token window):
//   auto m = pagedkv::HybridKvCacheManager::Create(
//       {.num_blocks = 4096, .block_size = 16,
//        .groups = {{.kind = pagedkv::KvCacheGroupKind::kFullAttention, .num_layers = 12},
//                   {.kind = pagedkv::KvCacheGroupKind::kSlidingWindow, .sliding_window = 128,
//                    .num_layers = 12}}}).value();
//   PAGEDKV_ASSIGN_OR_RETURN(pagedkv::CacheRequest req, m->NewRequest(1, prompt));
//   PAGEDKV_ASSIGN_OR_RETURN(pagedkv::HybridComputedBlocks hit, m->GetComputedBlocks(req));
//   PAGEDKV_RETURN_IF_ERROR(m->AllocateSlots(req, req.num_tokens() - hit.num_computed_tokens,
//                                            hit));
//   PAGEDKV_ASSIGN_OR_RETURN(std::span<const pagedkv::BlockId> t1, m->GetBlockTable(1, 1));
//   PAGEDKV_RETURN_IF_ERROR(req.AppendToken(sampled));   // decode: releases out-of-window blocks
//   PAGEDKV_RETURN_IF_ERROR(m->AllocateSlots(req, 1));
//   PAGEDKV_RETURN_IF_ERROR(m->Free(1));
#ifndef PAGEDKV_HYBRID_KV_CACHE_MANAGER_H_
#define PAGEDKV_HYBRID_KV_CACHE_MANAGER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pagedkv/block_hash.h"
#include "pagedkv/block_pool.h"
#include "pagedkv/cache_request.h"
#include "pagedkv/cache_stats.h"
#include "pagedkv/eviction_policy.h"
#include "pagedkv/export.h"
#include "pagedkv/kv_cache_manager.h"
#include "pagedkv/kv_event_batch.h"
#include "pagedkv/kv_events.h"
#include "pagedkv/types.h"

namespace pagedkv {

enum class KvCacheGroupKind : uint8_t {
  kFullAttention,  // every token attends to all earlier ones: all blocks are kept
  kSlidingWindow,  // a token attends to the previous `sliding_window` tokens (itself included)
};

// vLLM's KVCacheSpecKind value: "full_attention" or "sliding_window".
PAGEDKV_EXPORT std::string_view KvCacheGroupKindName(KvCacheGroupKind kind);

// One KV cache group: layers with the same attention kind and window.
struct PAGEDKV_EXPORT KvCacheGroupSpec {
  KvCacheGroupKind kind = KvCacheGroupKind::kFullAttention;
  int32_t sliding_window = 0;  // kSlidingWindow: window in tokens (> 0); ignored otherwise
  int32_t num_layers = 1;      // layers in the group (> 0); weights the KV memory reports
};

struct PAGEDKV_EXPORT HybridKvCacheManagerOptions {
  int32_t num_blocks = 0;                // blocks in the shared pool; must be > 0
  int32_t block_size = 16;               // tokens per block (one page size); must be > 0
  std::vector<KvCacheGroupSpec> groups;  // at least one, at least one full-attention group
  bool enable_prefix_caching = true;     // false: no lookups, no indexing
  std::string eviction_policy = "lru";   // "lru", "lfu", "fifo"; ignored when Create gets a policy
  int32_t vocab_size = 0;                // > 0: tokens outside [0, vocab_size) are rejected
  std::string model_fingerprint;         // hashed into every root
  std::shared_ptr<const BlockHasher> hasher;  // block hasher; null = XXH3-128
  // Collect the pool's events into per-step batches for TakeEventBatch (with group fields).
  bool collect_event_batches = false;
  std::optional<int32_t> data_parallel_rank;  // stamped on every event batch
};

// The longest prefix every group holds, as found by GetComputedBlocks.
struct PAGEDKV_EXPORT HybridComputedBlocks {
  // [num_groups][num_computed_tokens / block_size]: group g's cached blocks; kNullBlock where a
  // sliding-window group needs no block (wholly outside the window).
  std::vector<std::vector<BlockId>> blocks;
  int64_t num_computed_tokens = 0;  // a multiple of block_size
};

// What AllocateSlots would do, from NumBlocksToAllocate.
struct PAGEDKV_EXPORT HybridAllocationPlan {
  std::vector<int32_t> per_group;  // blocks each group takes from the pool (new + evictable hits)
  int32_t total = 0;               // sum of per_group (saturated at num_blocks + 1, as are they)
  std::vector<int32_t> released;   // blocks each group unpins (out of the window)
  int32_t total_released = 0;      // sum of released
};

class PAGEDKV_EXPORT HybridKvCacheManager {
 public:
  // InvalidArgument for a bad config (no groups, no full-attention group, window <= 0, layers
  // <= 0, zero blocks or block size, unknown policy name).
  static absl::StatusOr<std::unique_ptr<HybridKvCacheManager>> Create(
      HybridKvCacheManagerOptions options, std::unique_ptr<EvictionPolicy> policy = nullptr);

  HybridKvCacheManager(const HybridKvCacheManager&) = delete;
  HybridKvCacheManager& operator=(const HybridKvCacheManager&) = delete;

  // A CacheRequest with this manager's block size, fingerprint, vocabulary and hasher (the
  // group-0 hashes). InvalidArgument for tokens outside the vocabulary.
  absl::StatusOr<CacheRequest> NewRequest(RequestId id, std::span<const TokenId> prompt,
                                          const RequestCacheKeys& keys = {}) const;

  // The longest prefix all groups hold (see the banner), at most (num_tokens - 1) / block_size
  // blocks. Pins nothing: pass it to AllocateSlots in the same step. Counts a lookup.
  // InvalidArgument when the request's block size differs from the manager's.
  absl::StatusOr<HybridComputedBlocks> GetComputedBlocks(const CacheRequest& request);

  // What AllocateSlots(request, num_new_tokens, computed) would take and release. Changes
  // nothing. Errors as AllocateSlots' InvalidArgument / FailedPrecondition.
  absl::StatusOr<HybridAllocationPlan> NumBlocksToAllocate(
      const CacheRequest& request, int64_t num_new_tokens,
      const HybridComputedBlocks& computed = {}) const;

  // Reserves slots for `num_new_tokens` (>= 0) more tokens of `request` in every group. Tokens
  // that had slots before this call count as computed: sliding-window blocks wholly before
  // (computed - window + 1) are released first (see the banner). On the request's first call
  // `computed` (from GetComputedBlocks in the same step) is pinned as the head of every table;
  // later calls must pass none. Blocks that become full are cached. Errors, nothing changed:
  //   ResourceExhausted  - fewer free + evictable blocks (counting those this call releases)
  //                        than the plan's total; wait or preempt;
  //   InvalidArgument    - negative count, more tokens than the request has, wrong block size,
  //                        computed blocks on a later call or of the wrong shape;
  //   FailedPrecondition - computed blocks no longer cached (call GetComputedBlocks again);
  //   Internal           - the eviction policy picked a bad victim (fix the policy); the
  //                        releases of this call stay made, nothing else changed.
  absl::Status AllocateSlots(const CacheRequest& request, int64_t num_new_tokens,
                             const HybridComputedBlocks& computed = {});

  // Releases every group's blocks (tail first) and forgets the request. NotFound when it holds
  // none (never allocated or already freed).
  absl::Status Free(RequestId id);

  // Group `group`'s block table of the request (kNullBlock entries for released blocks): entry i
  // holds tokens [i*bs, (i+1)*bs). NotFound for an unknown request, InvalidArgument for a bad
  // group.
  absl::StatusOr<std::span<const BlockId>> GetBlockTable(RequestId id, int32_t group) const;
  // Non-null entries of the request's tables, and the same weighted by each group's num_layers
  // (proportional to the KV memory it holds). NotFound for an unknown request.
  absl::StatusOr<int64_t> NumHeldBlocks(RequestId id) const;
  absl::StatusOr<int64_t> NumHeldLayerBlocks(RequestId id) const;
  // Tokens of the request with slots. NotFound for an unknown request.
  absl::StatusOr<int64_t> NumAllocatedTokens(RequestId id) const;

  bool HasRequest(RequestId id) const { return requests_.contains(id); }
  int32_t NumRequests() const { return static_cast<int32_t>(requests_.size()); }
  int32_t num_groups() const { return static_cast<int32_t>(options_.groups.size()); }
  const KvCacheGroupSpec& group(int32_t g) const { return options_.groups[g]; }
  int32_t block_size() const { return options_.block_size; }
  int32_t NumAvailableBlocks() const { return pool_->NumAvailableBlocks(); }
  // The group whose hash `block` was last cached under; -1 when never cached or out of range.
  int32_t BlockGroup(BlockId block) const;
  // Group g's hash of a group-0 hash: `hash` for g == 0, else XXH3-128(hash.low ‖ hash.high ‖
  // "pagedkv-group-v1" ‖ u32 g), little-endian.
  static BlockHash FoldGroupHash(const BlockHash& hash, int32_t g);

  // Lookup counters (lookups, queried_tokens = vLLM's prefix_cache_queries, hit_tokens = its
  // prefix_cache_hits) merged with the pool's.
  CacheStats stats() const;

  // The events since the last call as one batch (empty unless options.collect_event_batches);
  // every stored / removed event carries group_idx,
  // kv_cache_spec_kind and (sliding-window stored events) kv_cache_spec_sliding_window.
  // Consecutive events of one group and chain merge, as KvEventBatcher does.
  KvEventBatch TakeEventBatch(double timestamp);

  // As KvCacheManager's: `listener` is called with every event of the shared pool as it happens,
  // inside the call that caused it, and must not call this manager. Unlike TakeEventBatch, the
  // events carry no group fields (BlockGroup(event.block) gives the group of a stored or
  // removed block). The id removes it again (false for an unknown id).
  int AddEventListener(KvEventListener listener) {
    return pool_->AddEventListener(std::move(listener));
  }
  bool RemoveEventListener(int id) { return pool_->RemoveEventListener(id); }

  const BlockPool& pool() const { return *pool_; }
  const HybridKvCacheManagerOptions& options() const { return options_; }

  // Pool invariants plus: reference counts equal the non-null table entries holding each block,
  // every table covers its tokens, sliding-window entries before the window are null, and no
  // block is cached for two groups. Internal with a description when broken.
  absl::Status ValidateInvariants() const;

 private:
  // cache/hybrid_kv_cache_manager_internal.h: the mutable pool, for tests.
  friend class HybridKvCacheManagerInternal;

  struct RequestState {
    std::vector<std::vector<BlockId>> tables;  // [num_groups][num_blocks for num_tokens]
    int64_t num_tokens = 0;                    // tokens with slots
    int64_t num_computed = 0;                  // tokens counted as computed at the last call
    std::vector<int64_t> num_cached;           // [num_groups]: leading blocks offered to index
  };
  struct Plan {
    bool is_new = false;
    int64_t computed_tokens = 0;  // tokens computed before this call
    int64_t total_tokens = 0;     // tokens with slots after it
    int64_t new_per_group = 0;    // fresh blocks each group's table grows by
    HybridAllocationPlan counts;
    int32_t releasable = 0;  // released blocks that become available (count 1)
  };

  HybridKvCacheManager(HybridKvCacheManagerOptions options, std::unique_ptr<BlockPool> pool);

  // cache/hybrid_kv_cache_hit.cc: one group's longest hit of at most `max_blocks` blocks.
  std::vector<BlockId> FullAttentionHit(const CacheRequest& request, int32_t g,
                                        int64_t max_blocks) const;
  std::vector<BlockId> SlidingWindowHit(const CacheRequest& request, int32_t g,
                                        int64_t max_blocks) const;
  // Whether cached `block` holds group g's block i of `request`.
  bool Verify(BlockId block, const CacheRequest& request, int32_t g, int64_t i) const;
  // Blocks a sliding-window group needs to keep before token index `computed`: the index of its
  // first needed block (0 for full attention).
  int64_t FirstNeededBlock(int32_t g, int64_t computed) const;
  absl::Status CheckRequest(const CacheRequest& request) const;
  absl::Status CheckComputed(const CacheRequest& request, const HybridComputedBlocks& computed,
                             Plan& plan) const;
  absl::StatusOr<Plan> MakePlan(const CacheRequest& request, int64_t num_new_tokens,
                                const HybridComputedBlocks& computed) const;
  // AllocateSlots' steps: pin the hit; release out-of-window blocks; cache newly full blocks.
  void PinComputed(const HybridComputedBlocks& computed, RequestState& state);
  void ReleaseSkipped(RequestState& state, int64_t computed);
  void CacheFullBlocks(const CacheRequest& request, RequestState& state, int32_t g);
  // Event batching (cache/hybrid_kv_cache_events.cc).
  void OnPoolEvent(const KvEvent& event);
  absl::Status CheckTables(RequestId id, const RequestState& state,
                           std::vector<int32_t>& refs) const;

  HybridKvCacheManagerOptions options_;
  std::unique_ptr<BlockPool> pool_;
  absl::flat_hash_map<RequestId, RequestState> requests_;
  std::vector<int32_t> block_group_;      // [num_blocks]: group of the block's latest index entry
  absl::flat_hash_set<BlockHash> roots_;  // group roots: stored events after them have no parent
  std::vector<KvBatchEvent> pending_events_;
  CacheStats stats_;  // lookup counters only
};

}  // namespace pagedkv

#endif  // PAGEDKV_HYBRID_KV_CACHE_MANAGER_H_
