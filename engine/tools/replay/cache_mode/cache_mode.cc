// Copyright 2026 The pagedkv Authors.
//
// `pagedkv replay --mode cache`: plan the capacities and policies, expand the workload into
// blocks once, replay every (capacity, policy) pair, write the sweep's CSV and plot, and report.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <utility>

#include "absl/strings/str_format.h"
#include "engine/tools/replay/cache_mode/cache_replay.h"
#include "engine/tools/replay/progress_bar.h"
#include "engine/tools/replay/replay_modes.h"
#include "engine/tools/replay/report.h"
#include "engine/tools/replay/workload/block_expansion.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::replay {
namespace {

// The capacities and policies of one cache-mode run.
struct CachePlan {
  std::vector<int64_t> capacities;  // empty until the default sweep is sized to the workload
  std::vector<std::string> policies;
  bool sweeping = false;     // several capacities or policies: write a CSV and a plot
  bool need_future = false;  // belady runs: the expansion computes each block's next use
};

absl::StatusOr<CachePlan> PlanCacheRuns(const ReplayConfig& c) {
  CachePlan plan;
  const bool explicit_capacity = c.capacity_blocks >= 0 || c.capacity_gib >= 0;
  plan.capacities = c.sweep;
  if (c.capacity_blocks >= 0) plan.capacities.push_back(c.capacity_blocks);
  if (c.capacity_gib >= 0) {
    PAGEDKV_ASSIGN_OR_RETURN(int64_t blocks, GibToBlocks(c.capacity_gib, c.model, c.block_size,
                                                         c.kv_cache_dtype, c.kv_cache_dtype_v));
    plan.capacities.push_back(blocks);
  }
  for (int64_t capacity : plan.capacities) {
    if (capacity <= 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("cache capacity must be > 0 blocks (got %d)", capacity));
    }
  }
  plan.sweeping = !c.sweep.empty() || !explicit_capacity;
  plan.policies = c.policies;
  if (plan.policies.empty()) {
    plan.policies = plan.sweeping ? CacheReplayPolicyNames() : std::vector<std::string>{"lru"};
  }
  PAGEDKV_RETURN_IF_ERROR(CheckPolicies(plan.policies, /*cache_mode=*/true));
  plan.need_future =
      std::find(plan.policies.begin(), plan.policies.end(), "belady") != plan.policies.end();
  return plan;
}

// The flag that set the capacities, for messages.
std::string CapacityFlag(const ReplayConfig& c) {
  if (c.capacity_blocks >= 0) return absl::StrFormat("--capacity-blocks %d", c.capacity_blocks);
  if (c.capacity_gib >= 0) {
    const std::string k = c.kv_cache_dtype.empty() ? "bf16" : c.kv_cache_dtype;
    return absl::StrFormat("--capacity-gib %g of %s KV", c.capacity_gib,
                           c.kv_cache_dtype_v.empty() ? k : k + "/" + c.kv_cache_dtype_v);
  }
  if (!c.sweep.empty()) return "--sweep";
  return "the default sweep";
}

// Default sweep: fractions of the workload's distinct blocks (its infinite-cache footprint).
std::vector<int64_t> DefaultSweep(const ExpandedWorkload& expanded) {
  std::vector<int64_t> capacities;
  for (double fraction : {0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0}) {
    const auto capacity = std::max<int64_t>(
        1, static_cast<int64_t>(
               std::llround(fraction * static_cast<double>(expanded.distinct_blocks))));
    if (capacities.empty() || capacities.back() != capacity) capacities.push_back(capacity);
  }
  return capacities;
}

// Replays every capacity with every policy, in that order, under one progress bar. With
// `streaming` (may be null), the first run replays while the expansion is still being written,
// and the others start once it is done.
absl::StatusOr<std::vector<CacheReplayResult>> RunCachePlan(const ReplayConfig& c,
                                                            const ExpandedWorkload& expanded,
                                                            const CachePlan& plan,
                                                            StreamedExpansion* streaming) {
  std::vector<CacheReplayResult> results;
  PAGEDKV_ASSIGN_OR_RETURN(const TierStoreRule host_store, ParseTierStoreRule(c.host_store));
  const auto runs = static_cast<int64_t>(plan.capacities.size() * plan.policies.size());
  ProgressBar bar("replay", expanded.num_blocks() * runs, {.enabled = c.progress && !c.json});
  int64_t blocks_before = 0;
  for (int64_t capacity : plan.capacities) {
    for (const std::string& policy : plan.policies) {
      PAGEDKV_ASSIGN_OR_RETURN(
          CacheReplayResult result,
          RunCacheReplay(
              expanded,
              {.capacity_blocks = capacity,
               .policy = policy,
               .count_shifted = c.count_shifted,
               .host_capacity_blocks = c.host_capacity_blocks,
               .remote_capacity_blocks = c.remote_capacity_blocks,
               .disk_capacity_blocks = c.disk_capacity_blocks,
               .tier_policy = c.tier_policy,
               .host_store = host_store,
               .host_store_threshold = c.host_store_threshold,
               .max_pinned_fraction = c.max_pinned_fraction,
               .progress = [&](int64_t done) { bar.Update(blocks_before + done); },
               .requests_ready = streaming != nullptr ? &streaming->requests_ready() : nullptr}));
      if (streaming != nullptr) {
        streaming->Finish();
        streaming = nullptr;
      }
      blocks_before += expanded.num_blocks();
      results.push_back(std::move(result));
    }
  }
  bar.Finish();
  return results;
}

// Where a sweep's CSV and plot went (empty paths when no sweep ran).
struct SweepFiles {
  std::string csv_path;
  std::string plot_path;
  std::string plot_how;  // the tool that drew the plot
};

absl::StatusOr<SweepFiles> WriteSweepFiles(const ReplayConfig& c, const Workload& workload,
                                           const std::vector<CacheReplayResult>& results) {
  SweepFiles files;
  std::string stem = std::filesystem::path(workload.name).filename().string();
  stem = stem.substr(0, stem.find('.'));
  files.csv_path = c.csv.empty() ? c.out_dir + "/" + stem + "_sweep.csv" : c.csv;
  files.plot_path =
      c.plot.empty() ? c.out_dir + "/" + stem + "_hit_rate." + (GnuplotAvailable() ? "png" : "svg")
                     : c.plot;
  PAGEDKV_RETURN_IF_ERROR(WriteSweepCsv(files.csv_path, results));
  PAGEDKV_ASSIGN_OR_RETURN(files.plot_how,
                           WriteHitRatePlot(files.plot_path, results,
                                            absl::StrFormat("pagedkv replay: %s, block size %d",
                                                            workload.name, c.block_size)));
  return files;
}

// What a cache-mode run prints, gathered once.
struct CacheReport {
  const Workload& workload;
  const ExpandedWorkload& expanded;
  double expand_seconds = 0;
  const std::vector<CacheReplayResult>& results;
  SweepFiles files;
};

void PrintCacheJson(const ReplayConfig& c, const CacheReport& report, std::ostream& out) {
  const std::vector<CacheReplayResult>& results = report.results;
  nlohmann::json j = WorkloadJson(report.workload, c);
  j["mode"] = "cache";
  j["distinct_blocks"] = report.expanded.distinct_blocks;
  j["expansion_seconds"] = report.expand_seconds;
  if (results.size() == 1) {
    j.update(CacheResultJson(results[0]));
  } else {
    j["requests"] = results[0].requests;
    j["blocks"] = results[0].blocks;
    j["infinite_cache_block_hit_rate"] = results[0].infinite_cache_block_hit_rate();
    j["infinite_cache_token_hit_rate"] = results[0].infinite_cache_token_hit_rate();
    j["runs"] = nlohmann::json::array();
    for (const CacheReplayResult& result : results) j["runs"].push_back(CacheResultJson(result));
  }
  if (!report.files.csv_path.empty()) {
    j["csv"] = report.files.csv_path;
    j["plot"] = report.files.plot_path;
  }
  out << j.dump(2) << "\n";
}

void PrintCacheTable(const ReplayConfig& c, const CacheReport& report, std::ostream& out) {
  const std::vector<CacheReplayResult>& results = report.results;
  const CacheReplayResult& first = results[0];
  out << absl::StrFormat(
      "workload %s\nblocks: %d of %d tokens (%d distinct); %d prompt tokens in no full "
      "block\ninfinite cache: %.2f%% of blocks, %.2f%% of tokens\n\n",
      Describe(report.workload), first.blocks, c.block_size, report.expanded.distinct_blocks,
      first.not_full_block_tokens, 100 * first.infinite_cache_block_hit_rate(),
      100 * first.infinite_cache_token_hit_rate());
  if (c.capacity_gib >= 0) out << "capacity: " << CapacityFlag(c) << " (" << c.model << ")\n\n";
  out << FormatCacheTable(results);
  double replay_seconds = 0;
  int64_t replayed_blocks = 0, over_capacity = 0;
  for (const CacheReplayResult& result : results) {
    replay_seconds += result.seconds;
    replayed_blocks += result.blocks;
    over_capacity += result.over_capacity_blocks;
  }
  if (over_capacity > 0) {
    out << absl::StrFormat(
        "note: %d blocks were not cached because a request had more blocks than the cache\n",
        over_capacity);
  }
  out << absl::StrFormat(
      "\nreplayed %d blocks in %.3f CPU s (%.1f M blocks/s, %d run%s); expansion %.3f s\n",
      replayed_blocks, replay_seconds,
      replay_seconds > 0 ? replayed_blocks / replay_seconds / 1e6 : 0.0, results.size(),
      results.size() == 1 ? "" : "s", report.expand_seconds);
  if (!report.files.csv_path.empty()) {
    out << absl::StrFormat("wrote %s and %s (%s)\n", report.files.csv_path, report.files.plot_path,
                           report.files.plot_how);
  }
}

}  // namespace

absl::Status RunCacheMode(const ReplayConfig& c, const Workload& workload, std::ostream& out) {
  if (c.hybrid_kv) return RunHybridCacheMode(c, workload, out);
  PAGEDKV_ASSIGN_OR_RETURN(CachePlan plan, PlanCacheRuns(c));
  const MemoryBudget budget = BudgetOf(c);
  PAGEDKV_RETURN_IF_ERROR(CheckExpansionFits(workload, c.block_size, budget));
  // Before expanding: the default sweep's largest pool holds at most every block.
  const ExpansionEstimate expansion = EstimateExpansion(workload, c.block_size);
  const int64_t largest_capacity =
      plan.capacities.empty() ? expansion.blocks
                              : *std::max_element(plan.capacities.begin(), plan.capacities.end());
  std::string flag = CapacityFlag(c);
  if (plan.capacities.empty() && !workload.requests.empty()) {
    const ReplayRequest& largest = workload.requests[expansion.largest_request];
    absl::StrAppendFormat(
        &flag, " up to every block; request %d%s alone has %d blocks", expansion.largest_request,
        largest.source_line > 0 ? absl::StrFormat(" (line %d)", largest.source_line)
                                : std::string(),
        expansion.largest_blocks);
  }
  PAGEDKV_RETURN_IF_ERROR(CheckPoolsFit(budget,
                                        {.capacity_blocks = largest_capacity,
                                         .block_size = c.block_size,
                                         .host_blocks = c.host_capacity_blocks,
                                         .disk_blocks = c.disk_capacity_blocks,
                                         .remote_blocks = c.remote_capacity_blocks,
                                         .held_bytes = expansion.bytes},
                                        flag));
  const ExpansionOptions expansion_options{.block_size = c.block_size,
                                           .compute_next_use = plan.need_future,
                                           .cache_partial_tail = c.cache_partial_tail};
  // With the capacities known, a trace of whole-block hash ids is expanded on a second thread
  // while the first run replays it (issue 28: the whole run then costs about the replay alone).
  std::unique_ptr<StreamedExpansion> streamed;
  ExpandedWorkload whole;
  const auto expand_start = std::chrono::steady_clock::now();
  if (!plan.capacities.empty() && StreamedExpansion::Streamable(workload, expansion_options)) {
    PAGEDKV_ASSIGN_OR_RETURN(streamed, StreamedExpansion::Start(workload, expansion_options));
  } else {
    PAGEDKV_ASSIGN_OR_RETURN(whole, ExpandWorkload(workload, expansion_options));
  }
  const ExpandedWorkload& expanded = streamed != nullptr ? streamed->expanded() : whole;
  double expand_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - expand_start).count();
  if (plan.capacities.empty()) plan.capacities = DefaultSweep(expanded);
  PAGEDKV_ASSIGN_OR_RETURN(std::vector<CacheReplayResult> results,
                           RunCachePlan(c, expanded, plan, streamed.get()));
  if (streamed != nullptr) expand_seconds = streamed->fill_seconds();
  CacheReport report{.workload = workload,
                     .expanded = expanded,
                     .expand_seconds = expand_seconds,
                     .results = results};
  if (plan.sweeping) {
    PAGEDKV_ASSIGN_OR_RETURN(report.files, WriteSweepFiles(c, workload, results));
  }
  if (c.json) {
    PrintCacheJson(c, report, out);
  } else {
    PrintCacheTable(c, report, out);
  }
  return absl::OkStatus();
}

}  // namespace pagedkv::replay
