// Copyright 2026 The pagedkv Authors.
//
// KvCacheManager: request-level prefix caching over a BlockPool (vLLM v1 style), for every KV
// cache layout: a coordinator over KV cache groups (kv_cache_groups.h). One full-attention group
// (options.groups empty) is the common case; a model with sliding-window layers (gpt-oss,
// Gemma 3) gets one block table per group, all drawn from one pool (one eviction order), as
// vLLM's KVCacheCoordinator does. Every feature below (lookahead, rollback, priorities, events,
// chunk index, tiers, metrics) works for every layout.
//
// Per step, for each request the scheduler
//   1. on admission: GetComputedBlocks(request) -> the longest cached prefix (never the whole
//      prompt: at least one token is left to compute, so the step produces logits);
//   2. AllocateSlots(request, num_new_tokens, computed) -> pins the hit blocks, grows the block
//      table to cover the computed tokens plus `num_new_tokens`, and caches every block that
//      becomes full (prompt and decode alike). ResourceExhausted, with nothing changed, when the
//      pool is short of blocks (the scheduler then waits or preempts);
//   3. reads GetBlockTable(id) to build slot mappings (slot = table[pos / bs] * bs + pos % bs);
//   4. on finish / preemption / abort: Free(id) unpins the table tail first, so cached blocks stay
//      evictable and a chain's tail is evicted before its parents.
// Decode: append the sampled token to the CacheRequest, then AllocateSlots(request, 1).
//
// Speculative decoding (vLLM's num_lookahead_tokens): with k draft tokens proposed for a request
// of n tokens (the last one sampled, its KV not computed yet),
//   AllocateSlots(request, 1, {}, {.num_lookahead_tokens = k})
// reserves slots for positions n .. n+k-1 beyond the request's tokens. Lookahead slots are never
// hashed or cached. After verification accepts a drafts plus the bonus token, append those a + 1
// tokens and call AllocateSlots(request, a + 1, ...) next step: the accepted drafts' KV already
// sits in their slots, the rejected ones' slots are reused or released. TruncateRequest rolls
// back tokens that were appended (and possibly cached) before they were rejected.
//
//   tokens:  | computed ............ | new (this call) | lookahead (k) |
//   slots:   | allocated, full blocks cached          | allocated, never cached |
//
// Groups (more than one): GetComputedBlocks starts from the longest prefix every full-attention
// group holds; each sliding-window group must hold the last cdiv(window - 1, block_size) blocks
// ending at the hit point (searched right to left, earlier blocks may be gone); a group that
// cannot cuts the hit back and the groups are asked again until all agree. AllocateSlots grows
// every table alike and releases a sliding-window group's blocks that lie wholly before
// (tokens with slots before the call - window + 1): they are unpinned (cached blocks stay
// reusable) and their entries become kNullBlock (vLLM's null block). With several groups, a hit
// block is verified by its hash, tokens, extra keys and parent hash but not by chain links (a
// sliding-window group's chain has holes by design).
//
// Verification (options.verify_tokens, on by default): a hash hit is accepted only when the
// cached block's tokens, extra keys (adapter, multimodal) and parent hash equal the request's and
// the block is linked to the very
// block accepted just before it (BlockPool::IsLinkedTo), so even colliding hashes never make a
// wrong reuse. A cached block that fails verification is replaced by the request's own block when
// the request computes it. With verification off, hits are accepted on the hash alone.
//
// Not thread-safe. Holds no device memory; block ids index the engine's paged KV storage.
//
// Example:
//   auto manager = pagedkv::KvCacheManager::Create({.num_blocks = 4096, .block_size = 16,
//                                                   .model_fingerprint = "llama2-7b"}).value();
//   PAGEDKV_ASSIGN_OR_RETURN(pagedkv::CacheRequest req, manager->NewRequest(1, prompt));
//   PAGEDKV_ASSIGN_OR_RETURN(pagedkv::ComputedBlocks hit, manager->GetComputedBlocks(req));
//   int64_t todo = req.num_tokens() - hit.num_computed_tokens;  // prefill the rest
//   PAGEDKV_RETURN_IF_ERROR(manager->AllocateSlots(req, todo, hit));
//   PAGEDKV_ASSIGN_OR_RETURN(std::span<const pagedkv::BlockId> table, manager->GetBlockTable(1));
//   ...                                                           // run the model
//   PAGEDKV_RETURN_IF_ERROR(req.AppendToken(sampled));            // decode step
//   PAGEDKV_RETURN_IF_ERROR(manager->AllocateSlots(req, 1));
//   PAGEDKV_RETURN_IF_ERROR(manager->Free(1));
#ifndef PAGEDKV_CACHE_KV_CACHE_MANAGER_H_
#define PAGEDKV_CACHE_KV_CACHE_MANAGER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/cache/block_pool.h"
#include "pagedkv/cache/cache_metrics.h"
#include "pagedkv/cache/cache_request.h"
#include "pagedkv/cache/cache_stats.h"
#include "pagedkv/cache/chunk_index.h"
#include "pagedkv/cache/eviction_policy.h"
#include "pagedkv/cache/kv_cache_groups.h"
#include "pagedkv/events/kv_event_batch.h"
#include "pagedkv/events/kv_events.h"
#include "pagedkv/export.h"
#include "pagedkv/types.h"

namespace pagedkv {

struct PAGEDKV_EXPORT KvCacheManagerOptions {
  int32_t num_blocks = 0;               // blocks in the pool; must be > 0
  int32_t block_size = 16;              // tokens per block; must be > 0
  bool enable_prefix_caching = true;    // false: no lookups, no indexing (plain paged allocation)
  bool verify_tokens = true;            // verify tokens and chain links on every hash hit
  std::string eviction_policy = "lru";  // "lru", "lfu", "fifo"; ignored when Create gets a policy
  int32_t vocab_size = 0;               // > 0: tokens outside [0, vocab_size) are rejected
  std::string model_fingerprint;        // model id + RoPE config, hashed into every root
  std::shared_ptr<const BlockHasher> hasher;  // block hasher; null = XXH3-128
  // Collect the pool's events into per-step batches for TakeEventBatch (kv_event_batch.h).
  bool collect_event_batches = false;
  std::optional<int32_t> data_parallel_rank;  // stamped on every event batch; nullopt = none
  // Eviction priorities and retention (cache_priority.h; see BlockPoolOptions for the rules).
  bool enable_priorities = false;
  double max_high_priority_fraction = 0.5;  // (0, 1] of the pool above the default priority
  std::function<double()> clock;            // seconds; null: steady clock
  // Record block lifetime, idle-before-eviction and reuse-gap histograms (WritePrometheus).
  // Costs a clock read per store, hit, release and eviction.
  bool collect_block_metrics = false;
  std::function<double()> metrics_clock;  // monotonic seconds for them; null = steady clock
  // KV cache groups (kv_cache_groups.h); empty = one full-attention group, today's only layout
  // before groups existed. Event batches of more than one group carry each block's group and
  // spec kind.
  std::vector<KvCacheGroupSpec> groups;
};

// Per-request cache keys beyond the tokens.
struct PAGEDKV_EXPORT RequestCacheKeys {
  std::string cache_salt;                    // requests with different salts never share blocks
  uint64_t adapter_id = 0;                   // LoRA adapter id; 0 = none
  std::vector<MultimodalInput> multimodal;   // sorted by offset
  CachePriority priority;                    // eviction priority of the request's blocks
  std::vector<PrioritySpan> priority_spans;  // prompt spans with their own (a system prompt)
};

// Per-call settings of AllocateSlots.
struct PAGEDKV_EXPORT AllocateOptions {
  // >= 0: blocks holding any token at or after this index are never offered to the prefix index
  // (e.g. blocks with re-rotated, approximate KV from shifted reuse). Sticky for the request: the
  // smallest value given so far wins. -1: no limit.
  int64_t no_cache_from_token = -1;
  // Slots to reserve past the request's tokens for draft tokens (speculative decoding), >= 0.
  // Never hashed or cached; each call replaces the previous reservation (blocks that only the
  // old reservation needed are released).
  int64_t num_lookahead_tokens = 0;
};

// The longest cached prefix of a request, as found by GetComputedBlocks.
struct PAGEDKV_EXPORT ComputedBlocks {
  std::vector<BlockId> blocks;      // group 0's cached blocks for the request's first tokens
  int64_t num_computed_tokens = 0;  // blocks.size() * block_size
  // Groups 1 .. G-1 (empty for one group): [g - 1][blocks.size()]. In every group, kNullBlock
  // where a sliding-window group needs no block (wholly outside the window).
  std::vector<std::vector<BlockId>> other_groups;

  // Group g's blocks. REQUIRES: 0 <= g < 1 + other_groups.size().
  std::span<const BlockId> group(int32_t g) const {
    return g == 0 ? std::span<const BlockId>(blocks)
                  : std::span<const BlockId>(other_groups[g - 1]);
  }
};

// What AllocateSlots would do, from PlanAllocation.
struct PAGEDKV_EXPORT AllocationPlan {
  std::vector<int32_t> per_group;  // blocks each group takes from the pool (new + evictable hits)
  int32_t total = 0;               // sum of per_group (saturated at num_blocks + 1, as are they)
  std::vector<int32_t> released;   // blocks each sliding-window group unpins (out of the window)
  int32_t total_released = 0;      // sum of released
};

class PAGEDKV_EXPORT KvCacheManager {
 public:
  // InvalidArgument for a bad config (zero blocks, zero block size, negative vocab size, unknown
  // policy name). `policy`, when given, replaces options.eviction_policy.
  static absl::StatusOr<std::unique_ptr<KvCacheManager>> Create(
      KvCacheManagerOptions options, std::unique_ptr<EvictionPolicy> policy = nullptr);

  KvCacheManager(const KvCacheManager&) = delete;
  KvCacheManager& operator=(const KvCacheManager&) = delete;

  // A CacheRequest with this manager's block size, fingerprint, vocabulary and hasher.
  // InvalidArgument for tokens outside the vocabulary or malformed multimodal inputs.
  absl::StatusOr<CacheRequest> NewRequest(RequestId id, std::span<const TokenId> prompt,
                                          const RequestCacheKeys& keys = {}) const;

  // The longest verified cached prefix of `request`, at most (num_tokens - 1) / block_size blocks
  // so at least one token is left to compute. Pins nothing (call AllocateSlots in the same step).
  // Counts a lookup in the statistics. Empty when prefix caching is off. InvalidArgument when the
  // request's block size differs from the manager's.
  absl::StatusOr<ComputedBlocks> GetComputedBlocks(const CacheRequest& request);

  // Reserves KV slots for `num_new_tokens` (>= 0) more tokens of `request`.
  // On the request's first call `new_computed_blocks` (from GetComputedBlocks in the same step)
  // are pinned and become the head of its block table; later calls must pass none. Blocks that
  // become full are cached (hashes from `request`). Errors, with nothing changed:
  //   ResourceExhausted  - not enough free + evictable blocks;
  //   InvalidArgument    - negative count or lookahead, more tokens than the request has, wrong
  //                        block size, computed blocks on a later call or not matching it;
  //   FailedPrecondition - computed blocks no longer cached (stale; call GetComputedBlocks again);
  //   Internal           - the eviction policy picked a block that is not evictable (fix the
  //                        policy; the pool and this manager are unchanged).
  // `options` applies only when the call succeeds.
  absl::Status AllocateSlots(const CacheRequest& request, int64_t num_new_tokens,
                             const ComputedBlocks& new_computed_blocks = {},
                             const AllocateOptions& options = {});

  // How many new blocks AllocateSlots(request, num_new_tokens, new_computed_blocks, options)
  // would take from the pool (including computed blocks that are now evictable), over all
  // groups. Changes nothing. Errors as AllocateSlots' InvalidArgument / FailedPrecondition.
  absl::StatusOr<int32_t> NumBlocksToAllocate(const CacheRequest& request, int64_t num_new_tokens,
                                              const ComputedBlocks& new_computed_blocks = {},
                                              const AllocateOptions& options = {}) const;
  // The same per group, with the sliding-window blocks the call would release.
  absl::StatusOr<AllocationPlan> PlanAllocation(const CacheRequest& request, int64_t num_new_tokens,
                                                const ComputedBlocks& new_computed_blocks = {},
                                                const AllocateOptions& options = {}) const;

  // Rolls `request` back to its first `num_tokens` tokens (rejected draft tokens): truncates the
  // CacheRequest, drops the lookahead reservation, releases (tail first) the blocks that hold no
  // kept token and drops from the prefix index every block that only this request holds and that
  // holds a token at or after `num_tokens` (blocks never indexed are not touched), so no block
  // with a rejected token stays indexed for it. Slots of kept tokens are unchanged. Errors, with
  // nothing changed:
  //   NotFound           - the request holds no blocks here;
  //   InvalidArgument    - num_tokens outside [0, request.num_tokens()], wrong block size;
  //   FailedPrecondition - the block holding token num_tokens - 1 also holds rejected tokens and
  //                        is shared with another request (its slots cannot be rewritten);
  //                        truncate at a block boundary or after the shared prefix; or a
  //                        sliding-window group already released a block the kept tokens'
  //                        window needs (roll back less than the window).
  absl::Status TruncateRequest(CacheRequest& request, int64_t num_tokens);

  // Releases the request's blocks (tail first) and forgets it. NotFound when the request has no
  // blocks here (never allocated, or already freed: a double free).
  absl::Status Free(RequestId id);

  // The request's block table of group `group` (0: the only group of a full-attention model):
  // entry i holds its tokens [i*bs, (i+1)*bs), kNullBlock for a released sliding-window block.
  // Valid until the next AllocateSlots / Free. NotFound for an unknown request, InvalidArgument
  // for a group outside [0, num_groups()).
  absl::StatusOr<std::span<const BlockId>> GetBlockTable(RequestId id, int32_t group = 0) const;
  // Non-null entries of the request's tables, and the same weighted by each group's num_layers
  // (proportional to the KV memory it holds). NotFound for an unknown request.
  absl::StatusOr<int64_t> NumHeldBlocks(RequestId id) const;
  absl::StatusOr<int64_t> NumHeldLayerBlocks(RequestId id) const;

  // Tokens of the request that have KV slots (computed prefix + every allocated new token).
  absl::StatusOr<int64_t> NumAllocatedTokens(RequestId id) const;
  // Lookahead slots reserved past those by the latest AllocateSlots. NotFound for an unknown id.
  absl::StatusOr<int64_t> NumLookaheadTokens(RequestId id) const;

  bool HasRequest(RequestId id) const { return requests_.contains(id); }
  int32_t NumRequests() const { return static_cast<int32_t>(requests_.size()); }

  // Drops every cached hash (running requests keep their blocks, uncached). Emits
  // kAllBlocksCleared. Always succeeds.
  void ResetPrefixCache();

  int32_t num_blocks() const { return pool_->num_blocks(); }
  int32_t block_size() const { return pool_->block_size(); }
  // KV cache groups: 1 when options.groups is empty.
  int32_t num_groups() const { return static_cast<int32_t>(groups_.size()); }
  const KvCacheGroupSpec& group(int32_t g) const { return groups_[g]; }
  // The group whose hash `block` was last cached under (always 0 with one group); -1 when out
  // of range or, with several groups, never cached.
  int32_t BlockGroup(BlockId block) const;

  // Leading full blocks of `request` that GetComputedBlocks' rule finds on hashes alone (no
  // verification, no statistics), at most (num_tokens - 1) / block_size: a cache-aware
  // scheduler's cheap estimate.
  int64_t ProbeCachedBlocks(const CacheRequest& request) const;
  // Blocks a request of `num_tokens` KV tokens holds at its peak when each AllocateSlots call
  // adds at most `max_chunk` tokens: NumBlocksFor(num_tokens) per full-attention group plus, per
  // sliding-window group, its window's blocks and one chunk's (never more than
  // NumBlocksFor(num_tokens)). A request needing more than num_blocks() can never run.
  int64_t PeakBlocksFor(int64_t num_tokens, int64_t max_chunk) const;
  // Free + evictable blocks.
  int32_t NumAvailableBlocks() const { return pool_->NumAvailableBlocks(); }
  // Fraction of blocks referenced by requests, in [0, 1].
  double Usage() const;

  // Lookup counters (this manager) merged with the pool's (stores, evictions, resets).
  CacheStats stats() const;
  // Zeroes the counters and the block histograms.
  void ResetStats();

  // Appends the cache's metrics in the Prometheus text format (0.0.4) to `*out`: counters
  // pagedkv_prefix_cache_{lookups,queries,hits}_total (queries and hits in tokens, as vLLM's
  // prefix_cache_queries / prefix_cache_hits), pagedkv_prefix_cache_{stored,evicted}_blocks_total,
  // gauges pagedkv_kv_cache_usage_ratio (blocks referenced by requests / all) and
  // pagedkv_kv_cache_{blocks,cached_blocks} (and pagedkv_kv_cache_groups with several groups),
  // and with options.collect_block_metrics the histograms
  // pagedkv_kv_block_{lifetime,idle_before_evict,reuse_gap}_seconds
  // (pagedkv/cache/cache_metrics.h). InvalidArgument for a bad label name; nothing is appended
  // then.
  absl::Status WritePrometheus(std::string* out, const PrometheusOptions& options = {}) const;
  // The block histograms; null unless options.collect_block_metrics.
  const BlockLifecycleMetrics* block_metrics() const { return block_metrics_.get(); }

  // ---- Attachments: what shares the pool (no caller outside cache/ touches it) -------------
  // Event listeners: `listener` is called with every event of the pool (stored, removed, all
  // cleared) as it happens, inside the call that caused it; it must not call this manager. With
  // several groups each event names its block's group (group_idx; a stored event also its
  // kv_cache_spec_kind and window), as the batched events do. The id removes it again (false
  // for an unknown id).
  int AddEventListener(KvEventListener listener);
  bool RemoveEventListener(int id) { return pool_->RemoveEventListener(id); }

  // A ChunkIndex over this manager's pool (shifted-position chunk reuse): chunks share its
  // blocks, reference counts and eviction order with the prefix cache. The index pins only
  // chunks it registered (Acquire/Release) and caches a chunk in blocks it takes from the pool
  // itself (ChunkIndex::InsertCopy); never pass ChunkIndex::Insert a block of a request's table.
  // The tier glue attaches the same way, through TierChain::Create (cache/tiers/tier_chain.h).
  // REQUIRES: this manager outlives the index. Errors as ChunkIndex::Create (none for a manager).
  absl::StatusOr<std::unique_ptr<ChunkIndex>> AttachChunkIndex(
      const ChunkIndexOptions& options = {});

  // The events since the last call as one batch (vLLM's EventBatch), stamped `timestamp`
  // (seconds; the wall clock by default). Call once per engine step. Empty events (and nothing
  // collected) unless options.collect_event_batches; listeners are called either way.
  KvEventBatch TakeEventBatch(double timestamp);
  KvEventBatch TakeEventBatch() { return TakeEventBatch(WallClockSeconds()); }

  const BlockPool& pool() const { return *pool_; }
  const KvCacheManagerOptions& options() const { return options_; }

  // Pool invariants plus: every request's tables are referenced (reference counts equal the
  // number of non-null table entries holding each block), every table covers its tokens and
  // lookahead, sliding-window entries before the window are null, and no block is cached for two
  // groups. Internal with a description when broken.
  absl::Status ValidateInvariants() const;

 private:
  // cache/kv_cache_manager_internal.h: the mutable pool, for cache/ itself (TierChain::Create)
  // and tests. Everything else attaches through the methods above.
  friend class KvCacheManagerInternal;

  // One group's part of a request: its table and its cache cursor.
  struct GroupState {
    std::vector<BlockId> table;           // block table; kNullBlock: released (sliding window)
    int64_t num_cached_blocks = 0;        // leading full blocks already offered to the index
    BlockId last_canonical = kNullBlock;  // verified cached block for block num_cached_blocks-1
    uint32_t last_canonical_generation = 0;
    bool chain_broken = false;  // a block could not be linked; later ones are not cached
  };
  struct RequestState {
    absl::InlinedVector<GroupState, 1> groups;  // [num_groups()]
    int64_t num_tokens = 0;                     // tokens with slots
    int64_t num_computed = 0;   // tokens with slots before the latest AllocateSlots (windows)
    int64_t num_lookahead = 0;  // slots reserved past num_tokens (never cached)
    int64_t max_cached_blocks = INT64_MAX;  // blocks at or past this index are never cached
  };

  // What AllocateSlots would do; computed by MakePlan without changing anything. Every group's
  // table has the same length, so new and released tail blocks are the same in each.
  struct Plan {
    bool is_new = false;          // the request has no state yet
    int64_t computed_tokens = 0;  // tokens with slots before the call
    int64_t total_tokens = 0;     // tokens with slots after the call
    int64_t lookahead = 0;        // lookahead slots after the call
    int32_t new_blocks = 0;       // blocks each group allocates from the pool
    int32_t release_blocks = 0;   // tail blocks only the old lookahead needed, per group
    // Per group: computed blocks that are evictable now (pinning takes them), and blocks the
    // window leaves behind (released before allocating).
    absl::InlinedVector<int32_t, 1> evictable_hits;
    absl::InlinedVector<int32_t, 1> window_released;
    int32_t taken = 0;       // blocks taken from the pool over all groups (saturated)
    int32_t releasable = 0;  // window-released blocks that become available (count 1)
  };

  KvCacheManager(KvCacheManagerOptions options, std::unique_ptr<BlockPool> pool);

  // cache/kv_cache_manager_plan.cc: validates the arguments of AllocateSlots /
  // NumBlocksToAllocate and plans the allocation.
  absl::StatusOr<Plan> MakePlan(const CacheRequest& request, int64_t num_new_tokens,
                                const ComputedBlocks& new_computed_blocks,
                                int64_t num_lookahead) const;
  // Checks of MakePlan on the computed blocks; counts the evictable ones into `plan`.
  absl::Status CheckComputed(const CacheRequest& request, const ComputedBlocks& computed,
                             Plan& plan) const;
  absl::Status CheckComputedGroup(const CacheRequest& request, const ComputedBlocks& computed,
                                  int32_t g, Plan& plan) const;
  // Sliding-window blocks an existing request's tables release before `computed` tokens.
  void PlanWindowReleases(const RequestState& state, Plan& plan) const;

  // AllocateSlots' steps: a new request's state with its computed blocks pinned; the
  // sliding-window blocks before the window unpinned; unpin entries [keep, end) of every table,
  // tail first, and shrink them.
  RequestState PinComputed(const CacheRequest& request, const ComputedBlocks& computed);
  // Appends `per_group` new pool blocks to every group's table of `state`; all or nothing.
  absl::Status AllocateNewBlocks(int32_t per_group, RequestState& state);
  void UnpinAll(RequestState& state);
  void ReleaseWindow(RequestState& state, int64_t computed);
  void ReleaseTail(RequestState& state, size_t keep);
  // After truncation to `num_cached` cached blocks: the verified canonical block of the last one.
  void ResetCanonical(const CacheRequest& request, int32_t g, GroupState& state);
  // TruncateRequest's checks: the shared dirty block and the window of the kept tokens.
  absl::Status CheckTruncation(const CacheRequest& request, const RequestState& state,
                               int64_t num_tokens) const;

  bool IsSlidingWindow(int32_t g) const {
    return groups_[g].kind == KvCacheGroupKind::kSlidingWindow;
  }
  // Whether blocks are indexed and verified along chain links: one group with verify_tokens.
  // Several groups index every block unlinked (a sliding-window chain has holes, and the
  // coordinator's hit needs every group anyway).
  bool linked_chains() const { return options_.verify_tokens && groups_.size() == 1; }
  // Index of the first block group g still needs once `computed` tokens have slots (0 for full
  // attention): the next token attends to [computed - window + 1, computed].
  int64_t FirstNeededBlock(int32_t g, int64_t computed) const;

  // Whether cached `block` may serve group g's block `i` of `request` whose previous block is
  // `prev` (linked chains; otherwise prev is ignored and the block's own hash is checked).
  bool Verify(BlockId block, const CacheRequest& request, int32_t g, int64_t i, BlockId prev) const;
  // cache/kv_cache_manager_hit.cc: the coordinator's lookup over several groups, and each
  // group's longest hit of at most `max_blocks` blocks.
  // FullAttentionHit counts verification failures.
  int64_t CoordinatedHit(const CacheRequest& request, int64_t max_blocks, ComputedBlocks& result);
  // The cached run of block hashes from block 0, up to max_blocks, into out[0..): group 0's
  // hashes as they are (ProbeRun), or group g's folded ones (ProbeGroupRun). Returns its length.
  int64_t ProbeRun(std::span<const BlockHash> hashes, int64_t max_blocks, BlockId* out) const;
  int64_t ProbeGroupRun(const CacheRequest& request, int32_t g, int64_t max_blocks,
                        BlockId* out) const;
  std::vector<BlockId> FullAttentionHit(const CacheRequest& request, int32_t g, int64_t max_blocks);
  std::vector<BlockId> SlidingWindowHit(const CacheRequest& request, int32_t g,
                                        int64_t max_blocks) const;
  int64_t SlidingWindowProbe(const CacheRequest& request, int32_t g, int64_t max_blocks) const;

  // cache/kv_cache_manager_caching.cc: offers the request's newly full blocks to the index.
  void CacheFullBlocks(const CacheRequest& request, RequestState& state);
  // Block i of group g into the index: by hash alone (verify_tokens off), unlinked (sliding
  // window), or verified and linked to the previous canonical block (a block whose chain broke
  // is not offered).
  void CacheHashOnly(const CacheRequest& request, const GroupState& state, int32_t g, int64_t i);
  void CacheUnlinked(const CacheRequest& request, const GroupState& state, int32_t g, int64_t i);
  void CacheVerified(const CacheRequest& request, GroupState& state, int32_t g, int64_t i);
  // REQUIRES: i > 0. When block i - 1's canonical block left the index and the request's own
  // block i - 1 (a promoted duplicate) holds its hash now, makes that the canonical block.
  void RelinkToOwnBlock(const CacheRequest& request, int32_t g, int64_t i, GroupState& state) const;
  // Records that `block` is cached for group g (before its stored event is sent).
  void NoteBlockGroup(BlockId block, int32_t g) {
    if (!block_group_.empty()) block_group_[block] = g;
  }
  // `event` stamped with its block's group and, for a stored event, the group's spec (the
  // form listeners and the batcher get when there is more than one group).
  KvEvent StampGroup(const KvEvent& event) const;
  absl::Status CheckRequest(const CacheRequest& request) const;
  absl::Status CheckTables(RequestId id, const RequestState& state,
                           std::vector<int32_t>& refs) const;

  KvCacheManagerOptions options_;
  std::vector<KvCacheGroupSpec> groups_;  // options_.groups, or one full-attention group
  std::unique_ptr<BlockPool> pool_;
  absl::flat_hash_map<RequestId, RequestState> requests_;
  std::vector<int32_t> block_group_;  // [num_blocks] with > 1 group: group of the latest entry
  std::vector<BlockId> fresh_;        // AllocateNewBlocks' scratch with several groups
  CacheStats stats_;                  // lookup counters only
  std::unique_ptr<KvEventBatcher> batcher_;  // set when options_.collect_event_batches
  // Set when options_.collect_block_metrics; observes pool_ (destroyed first; the pool calls no
  // hook while it is destroyed).
  std::unique_ptr<BlockLifecycleMetrics> block_metrics_;
};

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_KV_CACHE_MANAGER_H_
