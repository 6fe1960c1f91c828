// Copyright 2026 The pagedkv Authors.
//
// Cache-mode replay: drives the real BlockPool (cache/) with a workload's block keys, in file
// order and without timing, and counts prefix hits.
//
// For each request: walk its blocks first to last; a block cached in the pool is pinned (a hit
// while no earlier block of the request missed), a missing one is allocated (evicting through the
// pool's policy when no block is free) and inserted; then every block is unpinned tail first, so
// the policy sees the chain's tail released before its parents. A hit counts block by block along
// the prefix and stops at the first miss. Misses are classified as never seen (no earlier request
// had the block), evicted (an earlier request had it, the pool no longer does), or after a miss
// (cached, but an earlier block of the prompt missed). When a request has more blocks than the
// pool, the blocks past the pool's size are not cached (over_capacity_blocks).
//
// Engine rules (ExpandedWorkload::engine_rules, the default; vLLM v1's): only full blocks are
// blocks (the expansion drops a partial tail); a hit covers at most input_length - 1 tokens, so
// the cached last block of a prompt of whole blocks is pinned but not a hit (hit_capped_blocks);
// and a request with a partial tail holds one more pool block while it runs, allocated after its
// walk (evicting when nothing is free), never cached, and free again first when it is released.
// The pool's capacity is usable blocks: vLLM's reserved null block is not counted, so vLLM with
// num_gpu_blocks = capacity + 1 is the same cache. With --cache-partial-tail
// (engine_rules false) none of this applies: the model before issue 29.
//
// Shifted hits: when the workload marks chunks (ChunkSpan, e.g. the rag workload's documents),
// then after a request's prefix walk and while its blocks are still pinned, each marked chunk
// goes through ChunkReplay (chunk_replay.h: the engine's ShiftedChunkReuse, at the hash level)
// on the same pool: a chunk entirely inside
// the prefix hit needs nothing; otherwise a chunk whose content is cached (registered earlier by
// any request, at any position, and not evicted since) serves its tokens past the prefix hit as
// shifted hits, split into hits at another position and at the same one; a chunk not cached is
// computed and registered as a copy in blocks of its own, allocated from the same pool (evicting
// through the same policy), so chunk copies and prefix blocks compete for one capacity. With the
// belady policy a chunk copy's blocks are ranked by the chunk's next use (the next request that
// marks the same chunk, ExpandedWorkload::chunks), as prefix blocks are by theirs; a cached copy
// of a chunk that a request's prefix hit covers is refreshed too (pinned and released with its
// new next use), or its old next use, then past, would rank it as needed soonest forever.
//
// Tiers (host_ / disk_ / remote_capacity_blocks > 0): simulated KV tiers below the pool
// (HostTier objects holding no bytes), walked by the engine's own TierChain
// (cache/tiers/tier_chain.h) over the replay's pool, at the engine's points of a step: before a
// request's walk, TierChain::Onboard reads the request (a CacheRequest whose blocks hash to the
// workload's keys) past the pool's prefix hit through the host tier, then the disk tier, then the
// remote tier, and loads each tier hit into a pool block (counted as a host or remote hit, not a
// miss; a remote hit is also stored in the host tier), as long as the pool keeps room for the rest
// of the request; after the request, the blocks it computed go to the write-through tiers
// (FlushWriteThrough), and write-back tiers take blocks as the pool evicts them. The store rule
// and threshold are TierChain's (TierStoreGate, cache/tiers/tier_store_gate.h; the reuse counted
// is a device prefix hit of the tier walk): write-through with threshold 0 stores every block the
// pool caches; with threshold k a block at its k-th hit; write-back stores a block when the pool
// evicts it, once it had at least k hits (k = 0: every evicted block). Shifted chunks' copies
// never go to a tier.
//
// KV cache groups (options.groups, `--hybrid-kv`): the same loop replays each request through a
// KvCacheManager over the groups instead (ManagerReplayer, manager_replay.h: tokens derived from
// the keys, lookup, prompt allocation, decode steps, free; the same tiers through the engine's
// TierChain and chunks through ChunkReplay over the manager's index), reporting a KvGroupsRow.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(ExpandedWorkload e, ExpandWorkload(workload, {.block_size = 16}));
//   PAGEDKV_ASSIGN_OR_RETURN(CacheReplayResult r,
//                            RunCacheReplay(e, {.capacity_blocks = 4096, .policy = "lru"}));
//   std::printf("%.3f\n", r.block_hit_rate());
#ifndef PAGEDKV_ENGINE_TOOLS_REPLAY_CACHE_MODE_CACHE_REPLAY_H_
#define PAGEDKV_ENGINE_TOOLS_REPLAY_CACHE_MODE_CACHE_REPLAY_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tools/replay/workload/block_expansion.h"
#include "pagedkv/cache/kv_cache_groups.h"
#include "pagedkv/export.h"
#include "pagedkv/tiers/kv_tier.h"

namespace pagedkv::replay {

struct PAGEDKV_EXPORT CacheReplayOptions {
  int64_t capacity_blocks = 0;  // blocks in the pool (> 0, < 2^31)
  std::string policy = "lru";   // "lru", "lfu", "fifo" (cache library) or "belady"
  // Count shifted hits of marked chunks (see the banner). No effect on workloads without chunks.
  bool count_shifted = true;
  int64_t host_capacity_blocks = 0;    // > 0: a simulated host tier of this many blocks
  int64_t remote_capacity_blocks = 0;  // > 0: a simulated shared tier below the host tier
  int64_t disk_capacity_blocks = 0;    // > 0: a simulated disk tier between host and remote
  std::string tier_policy = "lru";     // the tiers' eviction policy: "lru" or "arc"
  TierStoreRule host_store = TierStoreRule::kWriteThrough;  // when blocks go to the host tier
  int32_t host_store_threshold = 0;  // host tier: store only blocks with this many prefix hits
  // Workloads with priority spans (e.g. --pin-system-prompts): the share of the pool blocks above
  // the default priority may hold (BlockPoolOptions::max_high_priority_fraction).
  double max_pinned_fraction = 0.5;
  // Called every few thousand requests with the number of blocks replayed so far (may be empty).
  std::function<void(int64_t blocks_done)> progress;
  // Streaming (StreamedExpansion::requests_ready): request r is replayed only once this is > r
  // (the replay waits, yielding); null: the workload is complete.
  const std::atomic<int64_t>* requests_ready = nullptr;
  // Non-empty: replay through a KvCacheManager over these KV cache groups instead of the bare
  // pool (a `--hybrid-kv` row; manager_replay.h): capacity_blocks and the tier capacities count
  // its pages, and the result is a row with kv_groups set (its name and model_layers left to the
  // caller). Not with belady.
  std::vector<KvCacheGroupSpec> groups;
  int32_t decode_tokens = 1;  // groups: decode steps per request after its prompt (>= 0)
  // Groups: per request (the workload's output_length), decode steps in place of decode_tokens;
  // empty = decode_tokens for every request.
  std::vector<int64_t> output_tokens;
};

// A cache-mode row over KV cache groups (`--hybrid-kv`: RunCacheReplay with
// CacheReplayOptions::groups, manager_replay.h). Such a row measures prefix hits in tokens and the
// KV each request holds, not block-level hits: FormatCacheTable and CacheResultJson report these
// fields, with its CacheReplayResult's requests, capacity_blocks (pages), total_tokens (prompt
// tokens looked up), hit_tokens (tier hits included), evictions, tier hit tokens and shifted
// hits.
struct PAGEDKV_EXPORT KvGroupsRow {
  std::string name;          // "hybrid" or "all_full"
  std::string groups;        // KvCacheGroupsText of the row's groups
  int32_t model_layers = 1;  // KV is reported in full-model blocks: layer-blocks / model_layers
  int64_t refused = 0;       // requests larger than the pool
  // Layer-blocks (held blocks * layers of their group) a request holds after its prompt and after
  // its decode steps; means over admitted requests, peaks over all.
  double mean_prefill_layer_blocks = 0;
  int64_t peak_prefill_layer_blocks = 0;
  double mean_decode_layer_blocks = 0;
  int64_t peak_decode_layer_blocks = 0;
};

struct PAGEDKV_EXPORT CacheReplayResult {
  std::string policy;
  int64_t capacity_blocks = 0;
  int64_t requests = 0;
  int64_t blocks = 0;                // blocks looked up (all blocks of all requests)
  int64_t hit_blocks = 0;            // prefix hits in the pool (the device tier)
  int64_t total_tokens = 0;          // sum of input_length
  int64_t hit_tokens = 0;            // tokens of the pool's hit blocks
  int64_t host_capacity_blocks = 0;  // the options' tier sizes (0: no such tier)
  int64_t remote_capacity_blocks = 0;
  int64_t disk_capacity_blocks = 0;
  TierStoreOptions host_store;  // the host tier's store rule and threshold
  int64_t host_hit_blocks = 0;  // prefix blocks loaded from the host tier
  int64_t host_hit_tokens = 0;
  int64_t remote_hit_blocks = 0;  // prefix blocks loaded from the remote tier
  int64_t remote_hit_tokens = 0;
  int64_t disk_hit_blocks = 0;  // prefix blocks loaded from the disk tier
  int64_t disk_hit_tokens = 0;
  int64_t infinite_hit_blocks = 0;  // prefix hits an unbounded cache would have had
  int64_t infinite_hit_tokens = 0;
  int64_t evictions = 0;              // cached blocks evicted by the pool
  int64_t miss_never_seen = 0;        // missed blocks no earlier request had
  int64_t miss_evicted = 0;           // missed blocks an earlier request had, since evicted
  int64_t miss_after_miss = 0;        // blocks still cached, but after the prompt's first miss
  int64_t hit_capped_blocks = 0;      // engine rules: cached last blocks a hit may not cover
  int64_t over_capacity_blocks = 0;   // blocks not cached because the request outgrew the pool
  int64_t not_full_block_tokens = 0;  // prompt tokens in no full block (never cacheable)
  // Shifted hits (all zero unless shifted_counted).
  bool shifted_counted = false;          // chunks were marked and counting was on
  int64_t chunks = 0;                    // marked chunks over all requests
  int64_t chunks_in_prefix = 0;          // chunks entirely inside their request's prefix hit
  int64_t chunk_hits = 0;                // other chunks found cached (at any position)
  int64_t chunk_hits_moved = 0;          // of those, cached at another position
  int64_t shifted_hit_tokens = 0;        // tokens past the prefix hit served by chunk hits
  int64_t shifted_hit_tokens_moved = 0;  // of those, from copies at another position
  int64_t shifted_hit_blocks = 0;        // full request blocks wholly inside shifted-hit tokens
  int64_t chunks_registered = 0;         // chunk misses copied into blocks of their own
  int64_t chunk_register_failures = 0;   // chunk misses not registered: no block to give
  std::optional<KvGroupsRow> kv_groups;  // set for a row over KV cache groups (see KvGroupsRow)
  double seconds = 0;       // CPU time of the replay loop on its thread (expansion excluded)
  double wall_seconds = 0;  // wall time of the replay loop

  double block_hit_rate() const;
  double token_hit_rate() const;
  // Per tier and all tiers together (device + host + disk + remote), of all blocks.
  double host_block_hit_rate() const;
  double disk_block_hit_rate() const;
  double remote_block_hit_rate() const;
  double tiered_block_hit_rate() const;
  double tiered_token_hit_rate() const;
  double infinite_cache_block_hit_rate() const;
  double infinite_cache_token_hit_rate() const;
  double blocks_per_second() const;  // blocks / seconds (per CPU second)
  // shifted_hit_tokens / total_tokens.
  double shifted_hit_rate() const;
  // (hit_tokens + shifted_hit_tokens) / total_tokens: the prompt share served by either reuse.
  double prefix_plus_shifted_token_hit_rate() const;
  // Shifted-hit tokens from copies at the same position (after a different prefix).
  int64_t shifted_hit_tokens_same_position() const {
    return shifted_hit_tokens - shifted_hit_tokens_moved;
  }
};

// Names accepted in CacheReplayOptions::policy: the cache library's, then "belady".
PAGEDKV_EXPORT std::vector<std::string> CacheReplayPolicyNames();

// Replays `workload` through a fresh BlockPool (or, with options.groups, a fresh KvCacheManager
// over them), one request after another. InvalidArgument for a capacity out of range, an unknown
// policy or a negative host_store_threshold (with groups: belady, bad groups or a negative
// decode_tokens); "belady" needs workload.next_use (ExpansionOptions::compute_next_use).
PAGEDKV_EXPORT absl::StatusOr<CacheReplayResult> RunCacheReplay(const ExpandedWorkload& workload,
                                                                const CacheReplayOptions& options);

}  // namespace pagedkv::replay

#endif  // PAGEDKV_ENGINE_TOOLS_REPLAY_CACHE_MODE_CACHE_REPLAY_H_
