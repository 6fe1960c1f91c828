// Copyright 2026 The pagedkv Authors.
#include "engine/replay/replay_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/replay/block_expansion.h"
#include "engine/replay/cache_replay.h"
#include "engine/replay/cost_model.h"
#include "engine/replay/generators.h"
#include "engine/replay/mooncake_trace.h"
#include "engine/replay/multi_instance_replay.h"
#include "engine/replay/progress_bar.h"
#include "engine/replay/report.h"
#include "engine/replay/serve_replay.h"
#include "nlohmann/json.hpp"
#include "pagedkv/status_macros.h"

namespace pagedkv::replay {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

absl::StatusOr<Workload> LoadWorkload(const ReplayConfig& c) {
  if (!c.trace.empty()) {
    return LoadMooncakeTrace(
        c.trace, {.trace_block_size = c.trace_block_size, .skip_bad_lines = c.skip_bad_lines});
  }
  return MakeBuiltinWorkload(c.workload, {.num_requests = c.requests, .seed = c.seed});
}

// Blocks that `gib` GiB of KV hold for `model` at `block_size`.
absl::StatusOr<int64_t> GibToBlocks(double gib, const std::string& model_name, int32_t block_size) {
  PAGEDKV_ASSIGN_OR_RETURN(ModelPreset model, FindModelPreset(model_name));
  const double per_block = static_cast<double>(model.KvBytesPerToken()) * block_size;
  const auto blocks = static_cast<int64_t>(std::floor(gib * 1073741824.0 / per_block));
  if (blocks <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--capacity-gib %g holds no block: one %d-token block of %s takes %.0f bytes", gib,
        block_size, model.name, per_block));
  }
  return blocks;
}

absl::Status CheckPolicies(const std::vector<std::string>& policies, bool cache_mode) {
  const std::vector<std::string> known = CacheReplayPolicyNames();
  for (const std::string& p : policies) {
    if (std::find(known.begin(), known.end(), p) == known.end()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "unknown eviction policy \"%s\"; expected one of: %s", p, absl::StrJoin(known, ", ")));
    }
    if (p == "belady" && !cache_mode) {
      return absl::InvalidArgumentError(
          "the belady policy needs the future and exists in cache mode only (--mode cache)");
    }
  }
  return absl::OkStatus();
}

nlohmann::json WorkloadJson(const Workload& w, const ReplayConfig& c) {
  return {{"workload", w.name},
          {"block_size", c.block_size},
          {"trace_block_size", w.trace_block_size},
          {"skipped_lines", w.skipped_lines}};
}

std::string Describe(const Workload& w) {
  std::string s = absl::StrFormat("%s: %d requests, %d prompt tokens", w.name, w.requests.size(),
                                  w.TotalInputTokens());
  if (w.trace_block_size > 0) {
    absl::StrAppendFormat(&s, " (trace block size %d)", w.trace_block_size);
  }
  if (w.skipped_lines > 0)
    absl::StrAppendFormat(&s, ", %d malformed lines skipped", w.skipped_lines);
  return s;
}

absl::Status RunCacheMode(const ReplayConfig& c, const Workload& workload, std::ostream& out,
                          [[maybe_unused]] std::ostream& err) {
  // Capacities: explicit sweep, one capacity, or a default sweep scaled to the workload.
  const bool explicit_capacity = c.capacity_blocks >= 0 || c.capacity_gib >= 0;
  std::vector<int64_t> capacities = c.sweep;
  if (c.capacity_blocks >= 0) capacities.push_back(c.capacity_blocks);
  if (c.capacity_gib >= 0) {
    PAGEDKV_ASSIGN_OR_RETURN(int64_t blocks, GibToBlocks(c.capacity_gib, c.model, c.block_size));
    capacities.push_back(blocks);
  }
  for (int64_t cap : capacities) {
    if (cap <= 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("cache capacity must be > 0 blocks (got %d)", cap));
    }
  }
  std::vector<std::string> policies = c.policies;
  const bool sweeping = !c.sweep.empty() || !explicit_capacity;
  if (policies.empty()) {
    policies = sweeping ? CacheReplayPolicyNames() : std::vector<std::string>{"lru"};
  }
  PAGEDKV_RETURN_IF_ERROR(CheckPolicies(policies, /*cache_mode=*/true));
  const bool need_future = std::find(policies.begin(), policies.end(), "belady") != policies.end();

  const auto expand_start = Clock::now();
  PAGEDKV_ASSIGN_OR_RETURN(
      ExpandedWorkload expanded,
      ExpandWorkload(workload, {.block_size = c.block_size, .compute_next_use = need_future}));
  const double expand_seconds = Since(expand_start);
  if (capacities.empty()) {
    // Default sweep: fractions of the workload's distinct blocks (its infinite-cache footprint).
    for (double f : {0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0}) {
      const auto cap = std::max<int64_t>(
          1, static_cast<int64_t>(std::llround(f * static_cast<double>(expanded.distinct_blocks))));
      if (capacities.empty() || capacities.back() != cap) capacities.push_back(cap);
    }
  }

  std::vector<CacheReplayResult> results;
  ProgressBar bar("replay",
                  expanded.num_blocks() * static_cast<int64_t>(capacities.size() * policies.size()),
                  {.enabled = c.progress && !c.json});
  int64_t blocks_before = 0;
  for (int64_t cap : capacities) {
    for (const std::string& policy : policies) {
      PAGEDKV_ASSIGN_OR_RETURN(CacheReplayResult r,
                               RunCacheReplay(expanded, {.capacity_blocks = cap,
                                                         .policy = policy,
                                                         .count_shifted = c.count_shifted,
                                                         .progress = [&](int64_t done) {
                                                           bar.Update(blocks_before + done);
                                                         }}));
      blocks_before += expanded.num_blocks();
      results.push_back(std::move(r));
    }
  }
  bar.Finish();

  std::string csv_path, plot_path, plot_how;
  if (sweeping) {
    std::string stem = std::filesystem::path(workload.name).filename().string();
    stem = stem.substr(0, stem.find('.'));
    csv_path = c.csv.empty() ? c.out_dir + "/" + stem + "_sweep.csv" : c.csv;
    plot_path = c.plot.empty()
                    ? c.out_dir + "/" + stem + "_hit_rate." + (GnuplotAvailable() ? "png" : "svg")
                    : c.plot;
    PAGEDKV_RETURN_IF_ERROR(WriteSweepCsv(csv_path, results));
    PAGEDKV_ASSIGN_OR_RETURN(plot_how,
                             WriteHitRatePlot(plot_path, results,
                                              absl::StrFormat("pagedkv replay: %s, block size %d",
                                                              workload.name, c.block_size)));
  }

  double replay_seconds = 0;
  int64_t replayed_blocks = 0;
  for (const CacheReplayResult& r : results) {
    replay_seconds += r.seconds;
    replayed_blocks += r.blocks;
  }
  if (c.json) {
    nlohmann::json j = WorkloadJson(workload, c);
    j["mode"] = "cache";
    j["distinct_blocks"] = expanded.distinct_blocks;
    j["expansion_seconds"] = expand_seconds;
    if (results.size() == 1) {
      j.update(CacheResultJson(results[0]));
    } else {
      j["requests"] = results[0].requests;
      j["blocks"] = results[0].blocks;
      j["infinite_cache_block_hit_rate"] = results[0].infinite_cache_block_hit_rate();
      j["infinite_cache_token_hit_rate"] = results[0].infinite_cache_token_hit_rate();
      j["runs"] = nlohmann::json::array();
      for (const CacheReplayResult& r : results) j["runs"].push_back(CacheResultJson(r));
    }
    if (!csv_path.empty()) {
      j["csv"] = csv_path;
      j["plot"] = plot_path;
    }
    out << j.dump(2) << "\n";
  } else {
    const CacheReplayResult& first = results[0];
    out << absl::StrFormat(
        "workload %s\nblocks: %d of %d tokens (%d distinct); %d prompt tokens in no full "
        "block\ninfinite cache: %.2f%% of blocks, %.2f%% of tokens\n\n",
        Describe(workload), first.blocks, c.block_size, expanded.distinct_blocks,
        first.not_full_block_tokens, 100 * first.infinite_cache_block_hit_rate(),
        100 * first.infinite_cache_token_hit_rate());
    out << FormatCacheTable(results);
    int64_t over = 0;
    for (const CacheReplayResult& r : results) over += r.over_capacity_blocks;
    if (over > 0) {
      out << absl::StrFormat(
          "note: %d blocks were not cached because a request had more blocks than the cache\n",
          over);
    }
    out << absl::StrFormat(
        "\nreplayed %d blocks in %.3f CPU s (%.1f M blocks/s, %d run%s); expansion %.3f s\n",
        replayed_blocks, replay_seconds,
        replay_seconds > 0 ? replayed_blocks / replay_seconds / 1e6 : 0.0, results.size(),
        results.size() == 1 ? "" : "s", expand_seconds);
    if (!csv_path.empty()) {
      out << absl::StrFormat("wrote %s and %s (%s)\n", csv_path, plot_path, plot_how);
    }
  }
  return absl::OkStatus();
}

// Runs `c.router` over c.instances instances (and the oracle, as the reference), prints the
// table or the JSON (`base` plus the aggregate, per_instance and "oracle").
absl::Status RunMultiInstanceMode(const ReplayConfig& c, const Workload& workload,
                                  ServeReplayOptions o, nlohmann::json base, std::ostream& out) {
  if (c.kv_events != nullptr) {
    return absl::InvalidArgumentError(
        "--kv-events-endpoint publishes one instance; with --instances the prefix-aware router's "
        "events stay in process");
  }
  MultiInstanceOptions m{
      .num_instances = c.instances,
      .router = c.router,
      .cost = {.prefill_weight = c.router_prefill_weight, .load_weight = c.router_load_weight}};
  const bool with_oracle = c.router != "oracle";
  const auto n = static_cast<int64_t>(workload.requests.size());
  ProgressBar bar("serve", n * (with_oracle ? 2 : 1), {.enabled = c.progress && !c.json});
  o.progress = [&bar](int64_t done) { bar.Update(done); };
  PAGEDKV_ASSIGN_OR_RETURN(MultiInstanceResult r, RunMultiInstanceReplay(workload, o, m));
  std::optional<MultiInstanceResult> oracle;
  if (with_oracle) {
    MultiInstanceOptions om = m;
    om.router = "oracle";
    o.progress = [&bar, n](int64_t done) { bar.Update(n + done); };
    PAGEDKV_ASSIGN_OR_RETURN(oracle, RunMultiInstanceReplay(workload, o, om));
  }
  bar.Finish();
  if (c.json) {
    base.update(MultiInstanceJson(r));
    if (oracle.has_value()) base["oracle"] = MultiInstanceJson(*oracle);
    out << base.dump(2) << "\n";
    return absl::OkStatus();
  }
  out << absl::StrFormat("workload %s\nserve mode: %s on %s, block size %d, policy %s\n",
                         Describe(workload), o.model.name, o.gpu.name, c.block_size, o.policy)
      << FormatMultiInstanceTable(r);
  if (oracle.has_value())
    out << "oracle router (reads the caches directly):\n" << FormatMultiInstanceTable(*oracle);
  return absl::OkStatus();
}

// The publisher's counters after everything queued was sent (a second replay run, the one
// without shifted reuse, publishes nothing).
nlohmann::json KvEventsJson(KvEventPublisher& publisher) {
  const bool flushed = publisher.Flush(10000);
  const KvEventPublisherStats s = publisher.stats();
  return {{"endpoint", publisher.endpoint()},
          {"replay_endpoint", publisher.replay_endpoint()},
          {"published_batches", s.published},
          {"dropped_batches", s.dropped},
          {"flushed", flushed}};
}

absl::Status RunServeMode(const ReplayConfig& c, const Workload& workload, std::ostream& out) {
  if (!c.sweep.empty()) {
    return absl::InvalidArgumentError("--sweep is for cache mode; serve mode runs one capacity");
  }
  std::vector<std::string> policies =
      c.policies.empty() ? std::vector<std::string>{"lru"} : c.policies;
  PAGEDKV_RETURN_IF_ERROR(CheckPolicies(policies, /*cache_mode=*/false));
  if (policies.size() != 1) {
    return absl::InvalidArgumentError("serve mode runs one eviction policy at a time");
  }
  ServeReplayOptions o;
  o.block_size = c.block_size;
  o.policy = policies[0];
  PAGEDKV_ASSIGN_OR_RETURN(o.gpu, FindGpuPreset(c.gpu));
  PAGEDKV_ASSIGN_OR_RETURN(o.model, FindModelPreset(c.model));
  o.gpu_memory_utilization = c.gpu_memory_utilization;
  o.scheduler.max_num_seqs = c.max_num_seqs;
  o.scheduler.max_num_batched_tokens = c.max_num_batched_tokens;
  o.scheduler.cache_aware = c.cache_aware;
  if (c.capacity_blocks == 0 || c.capacity_gib == 0) {
    return absl::InvalidArgumentError("cache capacity must be > 0");
  }
  if (c.capacity_blocks > 0) o.capacity_blocks = c.capacity_blocks;
  if (c.capacity_gib > 0) {
    PAGEDKV_ASSIGN_OR_RETURN(o.capacity_blocks, GibToBlocks(c.capacity_gib, c.model, c.block_size));
  }
  o.count_shifted = c.count_shifted;
  if (c.instances > 1 || c.router != "round-robin") {
    nlohmann::json base = WorkloadJson(workload, c);
    base["mode"] = "serve";
    base["gpu"] = o.gpu.name;
    base["model"] = o.model.name;
    base["policy"] = o.policy;
    return RunMultiInstanceMode(c, workload, o, std::move(base), out);
  }
  if (c.kv_events != nullptr) {
    o.on_event_batch = [pub = c.kv_events](KvEventBatch b) { pub->Publish(std::move(b)); };
  }
  // With shifted reuse on a workload that marks chunks, the same replay runs a second time
  // without it, to show the reuse's effect on TTFT.
  bool any_chunks = false;
  for (const ReplayRequest& r : workload.requests) any_chunks = any_chunks || !r.chunks.empty();
  const bool compare = c.count_shifted && any_chunks;
  const auto num_requests = static_cast<int64_t>(workload.requests.size());
  ProgressBar bar("serve", num_requests * (compare ? 2 : 1), {.enabled = c.progress && !c.json});
  o.progress = [&bar](int64_t done) { bar.Update(done); };
  PAGEDKV_ASSIGN_OR_RETURN(ServeReplayResult r, RunServeReplay(workload, o));
  std::optional<ServeReplayResult> without;
  if (compare) {
    ServeReplayOptions off = o;
    off.count_shifted = false;
    off.on_event_batch = nullptr;  // the comparison run publishes nothing
    off.progress = [&bar, num_requests](int64_t done) { bar.Update(num_requests + done); };
    PAGEDKV_ASSIGN_OR_RETURN(without, RunServeReplay(workload, off));
  }
  bar.Finish();
  if (c.json) {
    nlohmann::json j = WorkloadJson(workload, c);
    j["mode"] = "serve";
    j["gpu"] = o.gpu.name;
    j["model"] = o.model.name;
    j["policy"] = o.policy;
    j.update(ServeResultJson(r));
    if (without.has_value()) j["without_shifted"] = WithoutShiftedJson(*without);
    if (c.kv_events != nullptr) j["kv_events"] = KvEventsJson(*c.kv_events);
    out << j.dump(2) << "\n";
  } else {
    out << absl::StrFormat("workload %s\nserve mode: %s on %s, block size %d, policy %s\n",
                           Describe(workload), o.model.name, o.gpu.name, c.block_size, o.policy)
        << FormatServeTable(r);
    if (without.has_value()) out << FormatShiftedEffect(r, *without);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunReplay(const ReplayConfig& c, std::ostream& out, std::ostream& err) {
  if (c.mode != "cache" && c.mode != "serve") {
    return absl::InvalidArgumentError(
        absl::StrFormat("unknown --mode \"%s\"; expected cache or serve", c.mode));
  }
  if (c.block_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--block-size must be > 0 (got %d)", c.block_size));
  }
  if (c.capacity_blocks >= 0 && c.capacity_gib >= 0) {
    return absl::InvalidArgumentError("give --capacity-blocks or --capacity-gib, not both");
  }
  if (c.capacity_gib >= 0 && !(c.capacity_gib > 0)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--capacity-gib must be > 0 (got %g)", c.capacity_gib));
  }
  if (c.capacity_blocks == 0) {
    return absl::InvalidArgumentError("--capacity-blocks must be > 0 (got 0)");
  }
  PAGEDKV_ASSIGN_OR_RETURN(Workload workload, LoadWorkload(c));
  if (workload.requests.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("workload %s has no requests", workload.name));
  }
  if (workload.skipped_lines > 0) {
    err << absl::StrFormat("pagedkv replay: skipped %d malformed line%s of %s\n",
                           workload.skipped_lines, workload.skipped_lines == 1 ? "" : "s",
                           workload.name);
  }
  if (c.mode == "cache") {
    if (c.kv_events != nullptr) {
      return absl::InvalidArgumentError(
          "--kv-events-endpoint needs --mode serve (cache mode drives the block pool alone)");
    }
    return RunCacheMode(c, workload, out, err);
  }
  return RunServeMode(c, workload, out);
}

}  // namespace pagedkv::replay
