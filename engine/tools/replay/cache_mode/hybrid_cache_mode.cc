// Copyright 2026 The pagedkv Authors.
//
// `pagedkv replay --mode cache --hybrid-kv`: the --model preset's KV cache groups
// (HybridGroupsFor) and the same model treated as all full attention, each replayed through
// KvCacheManager (several groups) at the same KV memory, and a table (or JSON) of hit rates and KV
// memory per request. Capacities are given in full-model blocks (--capacity-blocks, or
// --capacity-gib with the preset's KV bytes per token): a pool of pages holding LayersPerPage
// layers has capacity * num_layers / LayersPerPage pages. KV memory is reported in full-model
// blocks (layer-blocks / num_layers), so both rows use one unit. Host and remote tier capacities
// (--host-capacity-blocks, --remote-capacity-blocks) are full-model blocks too (the same bytes in
// pages of each row's layout); the tiers are the engine's TierChain. Each row is plain cache
// mode's replay loop (RunCacheReplay with CacheReplayOptions::groups, manager_replay.h) and
// report (FormatCacheTable, CacheResultJson): a CacheReplayResult with its KvGroupsRow.
// A workload that marks chunks has its shifted hits counted (unless --no-shifted) over each row's
// groups: a chunk is cached as a copy per group (ChunkReplay over the manager's chunk index).
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "engine/tools/replay/cache_mode/cache_replay.h"
#include "engine/tools/replay/cache_mode/hybrid_cache_replay.h"
#include "engine/tools/replay/replay_modes.h"
#include "engine/tools/replay/report.h"
#include "engine/tools/replay/workload/block_expansion.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::replay {
namespace {

struct HybridRun {
  std::string name;  // "hybrid" or "all_full"
  std::vector<KvCacheGroupSpec> groups;
};

absl::StatusOr<int64_t> FullModelCapacity(const ReplayConfig& c, const ExpandedWorkload& e) {
  if (c.capacity_blocks > 0) return c.capacity_blocks;
  if (c.capacity_gib > 0) {
    return GibToBlocks(c.capacity_gib, c.model, c.block_size, c.kv_cache_dtype, c.kv_cache_dtype_v);
  }
  // Default: a fifth of the workload's distinct blocks (a cache that has to evict).
  return std::max<int64_t>(1, e.distinct_blocks / 5);
}

// The plain cache report of the rows (FormatCacheTable), between a header and the KV ratio.
void PrintTable(const ReplayConfig& c, const Workload& w, const ModelPreset& model,
                int64_t capacity, const std::vector<CacheReplayResult>& rows, std::ostream& out) {
  out << absl::StrFormat(
      "workload %s\nmodel %s: %d layers; capacity %d full-model blocks of %d "
      "tokens\n\n",
      Describe(w), model.name, model.num_layers, capacity, c.block_size);
  out << FormatCacheTable(rows);
  const double full = rows[1].kv_groups->mean_decode_layer_blocks;
  out << absl::StrFormat(
      "\nKV per request after decode, hybrid / all-full: %.3f (blocks weighted by layers; "
      "%.3f CPU s)\n",
      full > 0 ? rows[0].kv_groups->mean_decode_layer_blocks / full : 0.0,
      rows[0].seconds + rows[1].seconds);
}

// The plain cache JSON of each row (CacheResultJson) under its name.
void PrintJson(const ReplayConfig& c, const Workload& w, const ModelPreset& model, int64_t capacity,
               const std::vector<CacheReplayResult>& rows, std::ostream& out) {
  nlohmann::json j = WorkloadJson(w, c);
  j["mode"] = "cache";
  j["hybrid_kv"] = true;
  j["model"] = model.name;
  j["capacity_full_model_blocks"] = capacity;
  for (const CacheReplayResult& row : rows) j[row.kv_groups->name] = CacheResultJson(row);
  out << j.dump(2) << "\n";
}

}  // namespace

absl::Status RunHybridCacheMode(const ReplayConfig& c, const Workload& workload,
                                std::ostream& out) {
  PAGEDKV_ASSIGN_OR_RETURN(ModelPreset model,
                           ReplayModelPreset(c.model, c.kv_cache_dtype, c.kv_cache_dtype_v));
  if (model.layer_windows.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--hybrid-kv needs a --model preset with sliding-window layers (gpt-oss-20b, "
        "gemma-3-27b); %s has only full attention",
        model.name));
  }
  const std::string policy = c.policies.empty() ? "lru" : c.policies[0];
  if (c.policies.size() > 1 || policy == "belady" || !c.sweep.empty()) {
    return absl::InvalidArgumentError(
        "--hybrid-kv replays one capacity with one of lru, lfu, fifo; drop --sweep and extra "
        "--policy values");
  }
  PAGEDKV_RETURN_IF_ERROR(CheckExpansionFits(workload, c.block_size, BudgetOf(c)));
  PAGEDKV_ASSIGN_OR_RETURN(ExpandedWorkload expanded,
                           ExpandWorkload(workload, {.block_size = c.block_size}));
  PAGEDKV_ASSIGN_OR_RETURN(int64_t capacity, FullModelCapacity(c, expanded));
  PAGEDKV_ASSIGN_OR_RETURN(const TierStoreRule host_store, ParseTierStoreRule(c.host_store));
  std::vector<HybridRun> runs = {{.name = "hybrid", .groups = HybridGroupsFor(model)},
                                 {.name = "all_full", .groups = AllFullGroupsFor(model)}};
  std::vector<CacheReplayResult> rows;
  for (HybridRun& r : runs) {
    // `blocks` full-model blocks as pages of this layout.
    const auto pages = [&](int64_t blocks) {
      return blocks * model.num_layers / LayersPerPage(r.groups);
    };
    CacheReplayOptions options{.capacity_blocks = pages(capacity),
                               .policy = policy,
                               .count_shifted = c.count_shifted,
                               .host_capacity_blocks = pages(c.host_capacity_blocks),
                               .remote_capacity_blocks = pages(c.remote_capacity_blocks),
                               .disk_capacity_blocks = pages(c.disk_capacity_blocks),
                               .tier_policy = c.tier_policy,
                               .host_store = host_store,
                               .host_store_threshold = c.host_store_threshold,
                               .groups = r.groups};
    for (const ReplayRequest& q : workload.requests) {
      options.output_tokens.push_back(q.output_length);
    }
    PAGEDKV_ASSIGN_OR_RETURN(CacheReplayResult row, RunCacheReplay(expanded, options));
    row.kv_groups->name = r.name;
    row.kv_groups->model_layers = model.num_layers;
    rows.push_back(std::move(row));
  }
  if (c.json) {
    PrintJson(c, workload, model, capacity, rows, out);
  } else {
    PrintTable(c, workload, model, capacity, rows, out);
  }
  return absl::OkStatus();
}

}  // namespace pagedkv::replay
