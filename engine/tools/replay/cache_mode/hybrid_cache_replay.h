// Copyright 2026 The pagedkv Authors.
//
// KV cache groups of a model preset, for `pagedkv replay --hybrid-kv` (cache mode: rows replayed
// by RunCacheReplay with CacheReplayOptions::groups, manager_replay.h; serve mode:
// ServeReplayOptions::hybrid_groups): a preset whose layers mix full attention and sliding
// windows (ModelPreset::layer_windows), beside the same preset treated as all full attention.
//
// Groups (HybridGroupsFor): layers with the same window form a kind; as vLLM does, each kind is
// cut into groups of the same number of layers (the smallest kind's count; a last group may be
// smaller), so one page size serves every group: a page holds that many layers' K and V for
// block_size tokens. Treated as all full, the model is one group of every layer.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(ModelPreset model, FindModelPreset("gpt-oss-20b"));
//   PAGEDKV_ASSIGN_OR_RETURN(CacheReplayResult r,
//                            RunCacheReplay(expanded, {.capacity_blocks = 8192,
//                                                      .groups = HybridGroupsFor(model)}));
#ifndef PAGEDKV_ENGINE_TOOLS_REPLAY_CACHE_MODE_HYBRID_CACHE_REPLAY_H_
#define PAGEDKV_ENGINE_TOOLS_REPLAY_CACHE_MODE_HYBRID_CACHE_REPLAY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "engine/tools/replay/serve_mode/cost_model.h"
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

}  // namespace pagedkv::replay

#endif  // PAGEDKV_ENGINE_TOOLS_REPLAY_CACHE_MODE_HYBRID_CACHE_REPLAY_H_
