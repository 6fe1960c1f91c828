// Copyright 2026 The pagedkv Authors.
//
// `pagedkv replay --mode serve`: one instance (with a comparison run without shifted reuse when
// the workload marks chunks) or several behind a router, and their reports.
#include <optional>
#include <utility>

#include "absl/strings/str_format.h"
#include "engine/tools/replay/progress_bar.h"
#include "engine/tools/replay/replay_modes.h"
#include "engine/tools/replay/serve_mode/cost_model.h"
#include "engine/tools/replay/serve_mode/hardware_profile.h"
#include "engine/tools/replay/serve_mode/multi_instance_replay.h"
#include "engine/tools/replay/serve_mode/serve_replay.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::replay {
namespace {

// Sets o.gpu, o.model and o.cost from the presets, or from --hardware-profile (its device, its
// cost options, its model unless it names none, and its byte overrides).
absl::Status SetDeviceAndModel(const ReplayConfig& c, ServeReplayOptions& o) {
  if (c.hardware_profile.empty()) {
    PAGEDKV_ASSIGN_OR_RETURN(o.gpu, FindGpuPreset(c.gpu));
    PAGEDKV_ASSIGN_OR_RETURN(o.model,
                             ReplayModelPreset(c.model, c.kv_cache_dtype, c.kv_cache_dtype_v));
    return absl::OkStatus();
  }
  PAGEDKV_ASSIGN_OR_RETURN(HardwareProfile profile, ReadHardwareProfile(c.hardware_profile));
  PAGEDKV_ASSIGN_OR_RETURN(ModelPreset model,
                           ReplayModelPreset(profile.model.empty() ? c.model : profile.model,
                                             c.kv_cache_dtype, c.kv_cache_dtype_v));
  o.gpu = profile.device;
  o.cost = profile.cost;
  o.model = profile.Apply(model);
  return absl::OkStatus();
}

// The serve-replay options of `c`: one policy, presets, scheduler limits and the capacity.
absl::StatusOr<ServeReplayOptions> ServeOptionsFrom(const ReplayConfig& c,
                                                    const Workload& workload) {
  if (!c.sweep.empty()) {
    return absl::InvalidArgumentError("--sweep is for cache mode; serve mode runs one capacity");
  }
  const std::vector<std::string> policies =
      c.policies.empty() ? std::vector<std::string>{"lru"} : c.policies;
  PAGEDKV_RETURN_IF_ERROR(CheckPolicies(policies, /*cache_mode=*/false));
  if (policies.size() != 1) {
    return absl::InvalidArgumentError("serve mode runs one eviction policy at a time");
  }
  if (c.capacity_blocks == 0 || c.capacity_gib == 0) {
    return absl::InvalidArgumentError("cache capacity must be > 0");
  }
  ServeReplayOptions o;
  o.block_size = c.block_size;
  o.policy = policies[0];
  PAGEDKV_RETURN_IF_ERROR(SetDeviceAndModel(c, o));
  o.gpu_memory_utilization = c.gpu_memory_utilization;
  o.scheduler.max_num_seqs = c.max_num_seqs;
  o.scheduler.max_num_batched_tokens = c.max_num_batched_tokens;
  o.scheduler.cache_aware = c.cache_aware;
  if (c.capacity_blocks > 0) o.capacity_blocks = c.capacity_blocks;
  if (c.capacity_gib > 0 && !c.hardware_profile.empty()) {
    return absl::InvalidArgumentError(
        "--capacity-gib counts the presets' bytes; with --hardware-profile give the measured "
        "server's pool as --capacity-blocks (its `pagedkv_kv_cache_blocks` metric)");
  }
  if (c.capacity_gib > 0) {
    PAGEDKV_ASSIGN_OR_RETURN(o.capacity_blocks, GibToBlocks(c.capacity_gib, c.model, c.block_size,
                                                            c.kv_cache_dtype, c.kv_cache_dtype_v));
  }
  o.count_shifted = c.count_shifted;
  o.tiers.host_capacity_blocks = c.host_capacity_blocks;
  o.tiers.remote_capacity_blocks = c.remote_capacity_blocks;
  o.tiers.disk_capacity_blocks = c.disk_capacity_blocks;
  o.tiers.policy = c.tier_policy;
  PAGEDKV_ASSIGN_OR_RETURN(o.tiers.host_store, ParseTierStoreRule(c.host_store));
  o.tiers.host_store_threshold = c.host_store_threshold;
  PAGEDKV_ASSIGN_OR_RETURN(o.tiers.host_link, FindLinkPreset(c.host_link));
  PAGEDKV_ASSIGN_OR_RETURN(o.tiers.remote_link, FindLinkPreset(c.remote_link));
  PAGEDKV_ASSIGN_OR_RETURN(o.tiers.disk_link, FindLinkPreset(c.disk_link));
  int64_t capacity = o.capacity_blocks;
  if (capacity == 0) {
    PAGEDKV_ASSIGN_OR_RETURN(
        capacity, KvCapacityBlocks(o.gpu, o.model, o.gpu_memory_utilization, o.block_size));
  }
  PAGEDKV_RETURN_IF_ERROR(CheckPoolsFit(
      BudgetOf(c),
      {.capacity_blocks = capacity,
       .block_size = c.block_size,
       .instances = std::max(1, c.instances),
       .host_blocks = c.host_capacity_blocks,
       .disk_blocks = c.disk_capacity_blocks,
       .remote_blocks = c.remote_capacity_blocks,
       .held_bytes = WorkloadBytes(workload)},
      c.capacity_blocks > 0 ? absl::StrFormat("--capacity-blocks %d", c.capacity_blocks)
      : c.capacity_gib > 0  ? absl::StrFormat("--capacity-gib %g", c.capacity_gib)
                            : absl::StrFormat("the KV capacity of a %s", o.gpu.name)));
  return o;
}

// Runs `c.router` over c.instances instances (and the oracle, as the reference), prints the
// table or the JSON (`base` plus the aggregate, per_instance and "oracle").
absl::Status RunMultiInstanceMode(const ReplayConfig& c, const Workload& workload,
                                  ServeReplayOptions o, std::ostream& out) {
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
    nlohmann::json base = ServeBaseJson(c, workload, o);
    base.update(MultiInstanceJson(r));
    if (oracle.has_value()) base["oracle"] = MultiInstanceJson(*oracle);
    out << base.dump(2) << "\n";
    return absl::OkStatus();
  }
  out << ServeHeader(c, workload, o) << FormatMultiInstanceTable(r);
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
          {"subscribed", s.subscribed},
          {"replay_requests", s.replay_requests},
          {"replayed_batches", s.replayed_batches},
          {"replay_requests_busy", s.replay_requests_busy},
          {"replay_requests_limited", s.replay_requests_limited},
          {"flushed", flushed}};
}

// One instance's replay and, with shifted reuse on a workload that marks chunks, the same
// replay without it (to show the reuse's effect on TTFT).
struct SingleInstanceRuns {
  ServeReplayResult result;
  std::optional<ServeReplayResult> without_shifted;
};

absl::StatusOr<SingleInstanceRuns> RunSingleInstance(const ReplayConfig& c,
                                                     const Workload& workload,
                                                     ServeReplayOptions o) {
  if (c.kv_events != nullptr) {
    o.on_event_batch = [publisher = c.kv_events](KvEventBatch batch) {
      publisher->Publish(std::move(batch));
    };
  }
  const bool any_chunks =
      std::any_of(workload.requests.begin(), workload.requests.end(),
                  [](const ReplayRequest& request) { return !request.chunks.empty(); });
  const bool compare = c.count_shifted && any_chunks;
  const auto num_requests = static_cast<int64_t>(workload.requests.size());
  ProgressBar bar("serve", num_requests * (compare ? 2 : 1), {.enabled = c.progress && !c.json});
  o.progress = [&bar](int64_t done) { bar.Update(done); };
  SingleInstanceRuns runs;
  PAGEDKV_ASSIGN_OR_RETURN(runs.result, RunServeReplay(workload, o));
  if (compare) {
    ServeReplayOptions off = o;
    off.count_shifted = false;
    off.on_event_batch = nullptr;  // the comparison run publishes nothing
    off.progress = [&bar, num_requests](int64_t done) { bar.Update(num_requests + done); };
    PAGEDKV_ASSIGN_OR_RETURN(runs.without_shifted, RunServeReplay(workload, off));
  }
  bar.Finish();
  return runs;
}

}  // namespace

nlohmann::json ServeBaseJson(const ReplayConfig& c, const Workload& workload,
                             const ServeReplayOptions& o) {
  nlohmann::json j = WorkloadJson(workload, c);
  j["mode"] = "serve";
  j["gpu"] = o.gpu.name;
  j["model"] = o.model.name;
  j["policy"] = o.policy;
  return j;
}

std::string ServeHeader(const ReplayConfig& c, const Workload& workload,
                        const ServeReplayOptions& o) {
  return absl::StrFormat("workload %s\nserve mode: %s on %s, block size %d, policy %s\n",
                         Describe(workload), o.model.name, o.gpu.name, c.block_size, o.policy);
}

absl::Status RunServeMode(const ReplayConfig& c, const Workload& workload, std::ostream& out) {
  PAGEDKV_ASSIGN_OR_RETURN(ServeReplayOptions o, ServeOptionsFrom(c, workload));
  if (c.hybrid_kv) return RunHybridServeMode(c, workload, std::move(o), out);
  if (c.instances > 1 || c.router != "round-robin") {
    return RunMultiInstanceMode(c, workload, std::move(o), out);
  }
  PAGEDKV_ASSIGN_OR_RETURN(SingleInstanceRuns runs, RunSingleInstance(c, workload, o));
  if (c.json) {
    nlohmann::json j = ServeBaseJson(c, workload, o);
    j.update(ServeResultJson(runs.result));
    if (runs.without_shifted) j["without_shifted"] = WithoutShiftedJson(*runs.without_shifted);
    if (c.kv_events != nullptr) j["kv_events"] = KvEventsJson(*c.kv_events);
    out << j.dump(2) << "\n";
    return absl::OkStatus();
  }
  out << ServeHeader(c, workload, o) << FormatServeTable(runs.result);
  if (runs.without_shifted) out << FormatShiftedEffect(runs.result, *runs.without_shifted);
  return absl::OkStatus();
}

}  // namespace pagedkv::replay
