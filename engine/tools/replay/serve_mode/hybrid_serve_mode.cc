// Copyright 2026 The pagedkv Authors.
//
// `pagedkv replay --mode serve --hybrid-kv`: the --model preset's KV cache groups
// (HybridGroupsFor) and the same model treated as all full attention (AllFullGroupsFor), each
// served by the Scheduler over a KvCacheManager (several groups) at the same KV memory, with the
// simulated GPU's step costs. The capacity is in full-model blocks (--capacity-blocks,
// --capacity-gib, or what fits the GPU); a pool of pages holding LayersPerPage layers has capacity
// * num_layers / LayersPerPage pages, as in cache mode (hybrid_cache_mode.cc). KV per running
// request is reported in full-model blocks (pages * LayersPerPage / num_layers).
//
// Host and remote tier capacities are full-model blocks as well (the same bytes per run). Each
// run reports through the plain serve report (FormatServeTable, ServeResultJson), whose hybrid
// lines give its groups, pages and KV per running request.
//
// The simulated cost of a step is the model's full cost (cost_model.h has no per-layer window
// term), so the hybrid row's gain is what its memory buys: more running requests, fewer
// preemptions, more of the prefix cache kept.
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "engine/tools/replay/cache_mode/hybrid_cache_replay.h"
#include "engine/tools/replay/progress_bar.h"
#include "engine/tools/replay/replay_modes.h"
#include "engine/tools/replay/serve_mode/serve_replay.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::replay {
namespace {

struct HybridServeRun {
  std::string name;  // "hybrid" or "all_full"
  std::vector<KvCacheGroupSpec> groups;
  int64_t pages = 0;
  ServeReplayResult result;
};

// `blocks` full-model blocks as pages of run r's layout (LayersPerPage layers each).
int64_t FullModelToPages(int64_t blocks, const HybridServeRun& r, const ModelPreset& model) {
  return blocks * model.num_layers / LayersPerPage(r.groups);
}

absl::Status CheckHybridServe(const ReplayConfig& c, const ServeReplayOptions& o) {
  if (o.model.layer_windows.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--hybrid-kv needs a --model preset with sliding-window layers (gpt-oss-20b, "
        "gemma-3-27b); %s has only full attention",
        o.model.name));
  }
  if (c.instances > 1 || c.router != "round-robin") {
    return absl::InvalidArgumentError("--hybrid-kv serves one instance; drop --instances/--router");
  }
  if (c.kv_events != nullptr) {
    return absl::InvalidArgumentError(
        "--hybrid-kv in serve mode publishes no events; drop --kv-events-endpoint");
  }
  return absl::OkStatus();
}

// The plain serve report (ServeHeader, FormatServeTable) of each run, then the KV ratio.
void PrintTable(const ReplayConfig& c, const Workload& w, const ServeReplayOptions& o,
                int64_t capacity, const std::vector<HybridServeRun>& runs, std::ostream& out) {
  out << ServeHeader(c, w, o)
      << absl::StrFormat("hybrid KV: capacity %d full-model blocks in pages of each layout\n",
                         capacity);
  for (const HybridServeRun& r : runs) out << "\n" << r.name << ":\n" << FormatServeTable(r.result);
  const double full = runs[1].result.kv_blocks_per_running_request;
  out << absl::StrFormat(
      "\nKV per running request, hybrid / all-full: %.3f (full-model blocks); first-admission "
      "hits leave out re-admissions after preemption\n",
      full > 0 ? runs[0].result.kv_blocks_per_running_request / full : 0.0);
}

// The plain serve JSON (ServeBaseJson) with ServeResultJson of each run under its name.
void PrintJson(const ReplayConfig& c, const Workload& w, const ServeReplayOptions& o,
               int64_t capacity, const std::vector<HybridServeRun>& runs, std::ostream& out) {
  nlohmann::json j = ServeBaseJson(c, w, o);
  j["hybrid_kv"] = true;
  j["capacity_full_model_blocks"] = capacity;
  for (const HybridServeRun& r : runs) j[r.name] = ServeResultJson(r.result);
  out << j.dump(2) << "\n";
}

}  // namespace

absl::Status RunHybridServeMode(const ReplayConfig& c, const Workload& workload,
                                ServeReplayOptions o, std::ostream& out) {
  PAGEDKV_RETURN_IF_ERROR(CheckHybridServe(c, o));
  int64_t capacity = o.capacity_blocks;
  if (capacity == 0) {
    PAGEDKV_ASSIGN_OR_RETURN(
        capacity, KvCapacityBlocks(o.gpu, o.model, o.gpu_memory_utilization, o.block_size));
  }
  std::vector<HybridServeRun> runs = {{.name = "hybrid", .groups = HybridGroupsFor(o.model)},
                                      {.name = "all_full", .groups = AllFullGroupsFor(o.model)}};
  const auto n = static_cast<int64_t>(workload.requests.size());
  ProgressBar bar("serve", 2 * n, {.enabled = c.progress && !c.json});
  for (size_t i = 0; i < runs.size(); ++i) {
    HybridServeRun& r = runs[i];
    r.pages = capacity * o.model.num_layers / LayersPerPage(r.groups);
    ServeReplayOptions run = o;
    run.capacity_blocks = r.pages;
    // Tier capacities are full-model blocks too: the same bytes in pages of this layout.
    run.tiers.host_capacity_blocks = FullModelToPages(o.tiers.host_capacity_blocks, r, o.model);
    run.tiers.remote_capacity_blocks = FullModelToPages(o.tiers.remote_capacity_blocks, r, o.model);
    run.tiers.disk_capacity_blocks = FullModelToPages(o.tiers.disk_capacity_blocks, r, o.model);
    run.hybrid_groups = r.groups;
    run.progress = [&bar, offset = static_cast<int64_t>(i) * n](int64_t done) {
      bar.Update(offset + done);
    };
    PAGEDKV_ASSIGN_OR_RETURN(r.result, RunServeReplay(workload, run));
  }
  bar.Finish();
  if (c.json) {
    PrintJson(c, workload, o, capacity, runs, out);
  } else {
    PrintTable(c, workload, o, capacity, runs, out);
  }
  return absl::OkStatus();
}

}  // namespace pagedkv::replay
