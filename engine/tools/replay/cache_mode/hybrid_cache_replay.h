// Copyright 2026 The pagedkv Authors.
//
// Hybrid cache-mode replay (`pagedkv replay --hybrid-kv`): drives the real KvCacheManager over
// KV cache groups (cache/) with a workload, in file order and without timing, for a model preset
// whose layers mix full attention and sliding windows (ModelPreset::layer_windows), and reports the
// KV memory each request holds (blocks weighted by layers) and the hit rates, beside the same
// preset treated as all full attention.
//
// Groups (HybridGroupsFor): layers with the same window form a kind; as vLLM does, each kind is
// cut into groups of the same number of layers (the smallest kind's count; a last group may be
// smaller), so one page size serves every group: a page holds that many layers' K and V for
// block_size tokens. Treated as all full, the model is one group of every layer.
//
// Tokens: block j of request r gets block_size tokens derived from its key (ExpandedWorkload
// keys chain, so equal keys mean equal prefixes), the prompt's tokens in no full block get tokens
// of their own. Per request: GetComputedBlocks, AllocateSlots of the whole prompt (the peak),
// `decode_tokens` (or its output_tokens) decode steps of AllocateSlots(1) (window blocks out of
// reach are released), Free. A request that does not fit the pool is refused and counted.
//
// Shifted hits (options.count_shifted, a workload that marks chunks): after the prompt's
// AllocateSlots, while its blocks are held, the request's marked chunks go through ChunkReplay
// over the manager's chunk index, as in plain cache mode (chunk_replay.h); a chunk is cached as
// a copy per KV cache group (a sliding-window group's holding its last `window` tokens), in the
// same pool as the prefix blocks.
//
// Tiers (options.tiers, capacities in pages): simulated host and remote tiers (no bytes) walked
// by the engine's TierChain over the manager's groups, as the engine and serve mode do
// (ServeTiers): before GetComputedBlocks the request is onboarded (each full-attention group's
// prefix, then the blocks each sliding-window group's window needs), the pins are released after
// the prompt's AllocateSlots, and the blocks it computed go to the write-through tiers.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(ModelPreset model, FindModelPreset("gpt-oss-20b"));
//   PAGEDKV_ASSIGN_OR_RETURN(HybridReplayResult r,
//                            RunHybridCacheReplay(expanded, {.capacity_blocks = 8192,
//                                                            .groups = HybridGroupsFor(model)}));
#ifndef PAGEDKV_ENGINE_TOOLS_REPLAY_CACHE_MODE_HYBRID_CACHE_REPLAY_H_
#define PAGEDKV_ENGINE_TOOLS_REPLAY_CACHE_MODE_HYBRID_CACHE_REPLAY_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tools/replay/cache_mode/cache_replay.h"
#include "engine/tools/replay/serve_mode/cost_model.h"
#include "engine/tools/replay/serve_mode/serve_tiers.h"
#include "engine/tools/replay/workload/block_expansion.h"
#include "pagedkv/cache/kv_cache_groups.h"
#include "pagedkv/export.h"

namespace pagedkv::replay {

// The KV cache groups of `model` (see the banner); one full group of every layer when it has no
// layer_windows.
PAGEDKV_EXPORT std::vector<KvCacheGroupSpec> HybridGroupsFor(const ModelPreset& model);
// The same model treated as all full attention: one group of every layer.
PAGEDKV_EXPORT std::vector<KvCacheGroupSpec> AllFullGroupsFor(const ModelPreset& model);
// Layers per page of `groups`: the largest group's num_layers.
PAGEDKV_EXPORT int32_t LayersPerPage(const std::vector<KvCacheGroupSpec>& groups);
// `groups` as text, e.g. "full x12 | window 128 x12"; consecutive groups of one kind and window
// are summed ("window 1024 x52 in 6 groups").
PAGEDKV_EXPORT std::string KvCacheGroupsText(const std::vector<KvCacheGroupSpec>& groups);

struct PAGEDKV_EXPORT HybridReplayOptions {
  int64_t capacity_blocks = 0;           // pages in the pool (> 0, < 2^31)
  int32_t block_size = 16;               // tokens per block; the expansion's
  std::string policy = "lru";            // "lru", "lfu", "fifo"
  std::vector<KvCacheGroupSpec> groups;  // HybridGroupsFor / AllFullGroupsFor
  int32_t decode_tokens = 1;             // decode steps per request after its prompt (>= 0)
  // Per request (the workload's output_length): decode steps in place of decode_tokens; empty =
  // decode_tokens for every request.
  std::vector<int64_t> output_tokens;
  ServeTierOptions tiers;  // host / remote tiers, capacities in pages (the links are not used)
  // Count shifted hits of the workload's marked chunks (ChunkReplay over the manager's chunk
  // index: a copy per group, see the banner); no effect on a workload without chunks.
  bool count_shifted = false;
};

struct PAGEDKV_EXPORT HybridReplayResult {
  int64_t requests = 0;         // requests replayed (refused ones included)
  int64_t refused = 0;          // requests larger than the pool
  int64_t queried_tokens = 0;   // prompt tokens looked up (prefix_cache_queries)
  int64_t hit_tokens = 0;       // tokens served from the cache (prefix_cache_hits), tiers included
  int64_t host_hit_tokens = 0;  // of hit_tokens: loaded from the host tier (admitted requests)
  int64_t remote_hit_tokens = 0;  // of hit_tokens: loaded from the remote tier
  // Layer-blocks (held blocks * layers of their group) a request holds after its prompt (its
  // peak) and after its decode steps; means over admitted requests, peaks over all.
  double mean_prefill_layer_blocks = 0;
  int64_t peak_prefill_layer_blocks = 0;
  double mean_decode_layer_blocks = 0;
  int64_t peak_decode_layer_blocks = 0;
  int64_t evictions = 0;
  double seconds = 0;  // CPU time of the replay
  // Shifted hits of marked chunks: ChunkReplay's fields of a cache-mode result (chunks,
  // chunk_hits, shifted_hit_tokens, ...; shifted_counted when counted); the rest unused.
  CacheReplayResult shifted;

  double TokenHitRate() const {
    return queried_tokens > 0 ? static_cast<double>(hit_tokens) / queried_tokens : 0;
  }
};

// Replays `expanded` (built with engine rules at options.block_size). InvalidArgument for a bad
// capacity, groups or policy.
PAGEDKV_EXPORT absl::StatusOr<HybridReplayResult> RunHybridCacheReplay(
    const ExpandedWorkload& expanded, const HybridReplayOptions& options);

}  // namespace pagedkv::replay

#endif  // PAGEDKV_ENGINE_TOOLS_REPLAY_CACHE_MODE_HYBRID_CACHE_REPLAY_H_
