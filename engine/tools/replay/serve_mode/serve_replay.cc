// Copyright 2026 The pagedkv Authors.
#include "engine/tools/replay/serve_mode/serve_replay.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/tools/replay/cache_mode/hybrid_cache_replay.h"
#include "engine/tools/replay/serve_mode/serve_simulation.h"
#include "engine/tools/replay/shifted_hit_json.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/types.h"

namespace pagedkv::replay {
namespace {

double Ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

}  // namespace

double ServeReplayResult::prefix_hit_rate() const {
  return Ratio(static_cast<double>(prefix_hit_tokens), static_cast<double>(admitted_tokens));
}
double ServeReplayResult::shifted_hit_rate() const {
  return Ratio(static_cast<double>(shifted_hit_tokens), static_cast<double>(admitted_tokens));
}
double ServeReplayResult::prefix_plus_shifted_token_hit_rate() const {
  return Ratio(static_cast<double>(prefix_hit_tokens + shifted_hit_tokens),
               static_cast<double>(admitted_tokens));
}
double ServeReplayResult::output_tokens_per_second() const {
  return Ratio(static_cast<double>(output_tokens), simulated_seconds);
}
double ServeReplayResult::total_tokens_per_second() const {
  return Ratio(static_cast<double>(prompt_tokens + output_tokens), simulated_seconds);
}
double ServeReplayResult::requests_per_second() const {
  return Ratio(static_cast<double>(finished), simulated_seconds);
}

absl::StatusOr<int64_t> KvCapacityBlocks(const GpuPreset& gpu, const ModelPreset& model,
                                         double gpu_memory_utilization, int32_t block_size) {
  if (gpu_memory_utilization <= 0 || gpu_memory_utilization > 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--gpu-memory-utilization must be in (0, 1] (got %g)", gpu_memory_utilization));
  }
  if (block_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--block-size must be > 0 (got %d)", block_size));
  }
  const double budget = gpu.memory_bytes * gpu_memory_utilization - model.WeightBytes();
  if (budget <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "model %s (%.0f GB of weights) does not fit in %.0f%% of a %s (%.0f GB)", model.name,
        model.WeightBytes() / 1e9, 100 * gpu_memory_utilization, gpu.name, gpu.memory_bytes / 1e9));
  }
  const double per_block = static_cast<double>(model.KvBytesPerToken()) * block_size;
  return static_cast<int64_t>(std::min(budget / per_block, 2147483647.0));
}

namespace {

absl::Status ValidateServeOptions(const Workload& workload, const ServeReplayOptions& options) {
  if (options.policy == "belady") {
    return absl::InvalidArgumentError(
        "the belady policy needs the future and exists in cache mode only (--mode cache)");
  }
  if (options.gpu.peak_flops <= 0 || options.model.num_parameters <= 0) {
    return absl::InvalidArgumentError("serve mode needs a GPU preset and a model preset");
  }
  if (options.vocab_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("vocab_size must be > 0 (got %d)", options.vocab_size));
  }
  if (options.chunk_first_k < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("chunk_first_k (tokens recomputed per reused chunk) must be >= 0 (got %d)",
                        options.chunk_first_k));
  }
  PAGEDKV_RETURN_IF_ERROR(ValidateWorkload(workload));
  return options.scheduler.Validate();
}

// The KV pool size: the option, or what fits in the GPU after the weights.
absl::StatusOr<int64_t> ServeCapacityBlocks(const ServeReplayOptions& options) {
  int64_t capacity = options.capacity_blocks;
  if (capacity == 0) {
    PAGEDKV_ASSIGN_OR_RETURN(
        capacity, KvCapacityBlocks(options.gpu, options.model, options.gpu_memory_utilization,
                                   options.block_size));
  }
  if (capacity <= 0 || capacity >= (int64_t{1} << 31)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("KV capacity must be between 1 and 2^31 - 1 blocks (got %d)", capacity));
  }
  return capacity;
}

}  // namespace

absl::StatusOr<ServeReplayResult> RunServeReplay(const Workload& workload,
                                                 const ServeReplayOptions& options) {
  PAGEDKV_RETURN_IF_ERROR(ValidateServeOptions(workload, options));
  PAGEDKV_ASSIGN_OR_RETURN(const int64_t capacity, ServeCapacityBlocks(options));
  PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<ServeSimulation> simulation,
                           ServeSimulation::Create(workload, options, capacity));
  while (simulation->HasWork()) PAGEDKV_RETURN_IF_ERROR(simulation->Step());
  PAGEDKV_ASSIGN_OR_RETURN(ServeReplayResult result, simulation->Finish());
  if (result.hybrid) {
    result.kv_cache_groups = KvCacheGroupsText(options.hybrid_groups);
    if (result.mean_running > 0 && options.model.num_layers > 0) {
      result.kv_blocks_per_running_request = result.mean_used_blocks / result.mean_running *
                                             LayersPerPage(options.hybrid_groups) /
                                             options.model.num_layers;
    }
  }
  return result;
}

std::string FormatServeTable(const ServeReplayResult& r) {
  std::string out;
  auto row = [&out](std::string_view name, const std::string& value) {
    absl::StrAppendFormat(&out, "  %-28s %s\n", name, value);
  };
  row("requests (finished/rejected)",
      absl::StrFormat("%d (%d / %d)", r.requests, r.finished, r.rejected));
  if (r.hybrid) {
    row("KV cache groups", absl::StrFormat("%s: %d pages", r.kv_cache_groups, r.capacity_blocks));
    row("KV per running request",
        absl::StrFormat("%.1f full-model blocks (%.1f running, %.1f pages held)",
                        r.kv_blocks_per_running_request, r.mean_running, r.mean_used_blocks));
  } else {
    row("KV capacity", absl::StrFormat("%d blocks", r.capacity_blocks));
  }
  row("prefix hit rate (tokens)",
      absl::StrFormat("%.2f%% (%d of %d admitted prompt tokens)", 100 * r.prefix_hit_rate(),
                      r.prefix_hit_tokens, r.admitted_tokens));
  if (r.hybrid) {
    row("first-admission hit rate",
        absl::StrFormat("%.2f%% (%d of %d prompt tokens)", 100 * r.first_admission_hit_rate(),
                        r.first_admission_hit_tokens, r.first_admission_prompt_tokens));
  }
  if (r.shifted_counted) {
    row("shifted hit rate (tokens)",
        absl::StrFormat("%.2f%% (%d tokens; %d from copies at another position)",
                        100 * r.shifted_hit_rate(), r.shifted_hit_tokens,
                        r.shifted_hit_tokens_moved));
    row("prefix + shifted hit rate",
        absl::StrFormat("%.2f%%", 100 * r.prefix_plus_shifted_token_hit_rate()));
    row("chunks (hits / registered)",
        absl::StrFormat("%d marked: %d in prefix hit, %d hits (%d moved), %d registered, %d "
                        "without room",
                        r.chunks, r.chunks_in_prefix, r.chunk_hits, r.chunk_hits_moved,
                        r.chunks_registered, r.chunk_register_failures));
    row("re-rotation pass",
        absl::StrFormat("%d tokens, %.3f s simulated", r.rerotated_tokens, r.rerotation_seconds));
  }
  if (r.tiers_enabled) {
    const double admitted = static_cast<double>(std::max<int64_t>(1, r.admitted_tokens));
    row("tiers (host / disk / remote blocks)",
        absl::StrFormat("%d / %d / %d: hits %.2f%% / %.2f%% / %.2f%% of admitted tokens; "
                        "%d / %d / %d blocks loaded in %.3f s simulated",
                        r.host_capacity_blocks, r.disk_capacity_blocks, r.remote_capacity_blocks,
                        100.0 * r.host_hit_tokens / admitted, 100.0 * r.disk_hit_tokens / admitted,
                        100.0 * r.remote_hit_tokens / admitted, r.host_loaded_blocks,
                        r.disk_loaded_blocks, r.remote_loaded_blocks, r.tier_load_seconds));
  }
  row("TTFT mean / p50 / p99",
      absl::StrFormat("%.3f / %.3f / %.3f s", r.ttft_mean_s, r.ttft_p50_s, r.ttft_p99_s));
  row("time per output token", absl::StrFormat("%.2f ms", 1000 * r.tpot_mean_s));
  row("end-to-end mean / p99", absl::StrFormat("%.3f / %.3f s", r.e2e_mean_s, r.e2e_p99_s));
  row("throughput", absl::StrFormat("%.0f output tok/s, %.0f total tok/s, %.2f req/s",
                                    r.output_tokens_per_second(), r.total_tokens_per_second(),
                                    r.requests_per_second()));
  row("simulated time", absl::StrFormat("%.1f s in %d steps", r.simulated_seconds, r.steps));
  row("preemptions / evictions", absl::StrFormat("%d / %d", r.preemptions, r.evictions));
  row("replay wall time", absl::StrFormat("%.2f s", r.wall_seconds));
  return out;
}

namespace {

// The KV cache group fields of a hybrid run.
void AddHybridJson(const ServeReplayResult& r, nlohmann::json& j) {
  j["kv_cache_groups"] = r.kv_cache_groups;
  j["pages"] = r.capacity_blocks;
  j["mean_running"] = r.mean_running;
  j["mean_used_pages"] = r.mean_used_blocks;
  j["kv_blocks_per_running_request"] = r.kv_blocks_per_running_request;
  j["first_admission_hit_tokens"] = r.first_admission_hit_tokens;
  j["first_admission_prompt_tokens"] = r.first_admission_prompt_tokens;
  j["first_admission_hit_rate"] = r.first_admission_hit_rate();
}

}  // namespace

nlohmann::json ServeResultJson(const ServeReplayResult& r) {
  nlohmann::json j = {
      {"requests", r.requests},
      {"finished", r.finished},
      {"rejected", r.rejected},
      {"capacity_blocks", r.capacity_blocks},
      {"prompt_tokens", r.prompt_tokens},
      {"output_tokens", r.output_tokens},
      {"admitted_tokens", r.admitted_tokens},
      {"prefix_hit_tokens", r.prefix_hit_tokens},
      {"prefix_hit_rate", r.prefix_hit_rate()},
      {"computed_tokens", r.computed_tokens},
      {"steps", r.steps},
      {"preemptions", r.preemptions},
      {"evictions", r.evictions},
      {"stored_blocks", r.stored_blocks},
      {"simulated_seconds", r.simulated_seconds},
      {"ttft_mean_s", r.ttft_mean_s},
      {"ttft_p50_s", r.ttft_p50_s},
      {"ttft_p99_s", r.ttft_p99_s},
      {"tpot_mean_s", r.tpot_mean_s},
      {"e2e_mean_s", r.e2e_mean_s},
      {"e2e_p99_s", r.e2e_p99_s},
      {"output_tokens_per_second", r.output_tokens_per_second()},
      {"total_tokens_per_second", r.total_tokens_per_second()},
      {"requests_per_second", r.requests_per_second()},
      {"wall_seconds", r.wall_seconds},
      {"shifted_counted", r.shifted_counted},
  };
  if (r.hybrid) AddHybridJson(r, j);
  if (r.shifted_counted) {
    AddShiftedHitJson(r, j);
    j["rerotated_tokens"] = r.rerotated_tokens;
    j["rerotation_seconds"] = r.rerotation_seconds;
  }
  if (r.tiers_enabled) {
    const double admitted = static_cast<double>(std::max<int64_t>(1, r.admitted_tokens));
    j["tiers"] = {{"host_capacity_blocks", r.host_capacity_blocks},
                  {"remote_capacity_blocks", r.remote_capacity_blocks},
                  {"disk_capacity_blocks", r.disk_capacity_blocks},
                  {"host_store_policy", TierStoreRuleName(r.host_store.rule)},
                  {"host_store_threshold", r.host_store.threshold},
                  {"host_hit_tokens", r.host_hit_tokens},
                  {"remote_hit_tokens", r.remote_hit_tokens},
                  {"disk_hit_tokens", r.disk_hit_tokens},
                  {"device_hit_tokens", r.prefix_hit_tokens - r.host_hit_tokens -
                                            r.disk_hit_tokens - r.remote_hit_tokens},
                  {"host_hit_rate", r.host_hit_tokens / admitted},
                  {"disk_hit_rate", r.disk_hit_tokens / admitted},
                  {"remote_hit_rate", r.remote_hit_tokens / admitted},
                  {"host_loaded_blocks", r.host_loaded_blocks},
                  {"disk_loaded_blocks", r.disk_loaded_blocks},
                  {"remote_loaded_blocks", r.remote_loaded_blocks},
                  {"load_seconds", r.tier_load_seconds}};
  }
  return j;
}

std::string FormatShiftedEffect(const ServeReplayResult& with, const ServeReplayResult& without) {
  std::string out;
  auto row = [&out](std::string_view name, const std::string& value) {
    absl::StrAppendFormat(&out, "  %-28s %s\n", name, value);
  };
  auto change = [](double a, double b) { return b > 0 ? 100 * (a - b) / b : 0.0; };
  out += "without shifted reuse (same replay, --no-shifted):\n";
  row("TTFT mean / p50 / p99",
      absl::StrFormat("%.3f / %.3f / %.3f s (mean %+.1f%% with shifted reuse)", without.ttft_mean_s,
                      without.ttft_p50_s, without.ttft_p99_s,
                      change(with.ttft_mean_s, without.ttft_mean_s)));
  row("end-to-end mean", absl::StrFormat("%.3f s", without.e2e_mean_s));
  row("computed tokens", absl::StrFormat("%d (%+.1f%% with shifted reuse)", without.computed_tokens,
                                         change(static_cast<double>(with.computed_tokens),
                                                static_cast<double>(without.computed_tokens))));
  row("prefix hit rate (tokens)", absl::StrFormat("%.2f%%", 100 * without.prefix_hit_rate()));
  row("simulated time", absl::StrFormat("%.1f s", without.simulated_seconds));
  return out;
}

nlohmann::json WithoutShiftedJson(const ServeReplayResult& without) {
  return {{"ttft_mean_s", without.ttft_mean_s},
          {"ttft_p50_s", without.ttft_p50_s},
          {"ttft_p99_s", without.ttft_p99_s},
          {"e2e_mean_s", without.e2e_mean_s},
          {"computed_tokens", without.computed_tokens},
          {"simulated_seconds", without.simulated_seconds},
          {"prefix_hit_rate", without.prefix_hit_rate()}};
}

}  // namespace pagedkv::replay
