// Copyright 2026 The pagedkv Authors.
#include "engine/tools/replay/replay_runner.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/tools/replay/cache_mode/cache_replay.h"
#include "engine/tools/replay/replay_modes.h"
#include "engine/tools/replay/serve_mode/cost_model.h"
#include "engine/tools/replay/workload/generators.h"
#include "engine/tools/replay/workload/mooncake_trace.h"
#include "nlohmann/json.hpp"
#include "pagedkv/cache/block_pool.h"
#include "pagedkv/checked_math.h"
#include "pagedkv/dtype.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::replay {
namespace {

// A generated workload of `c.requests` requests, refused before it is generated when a sample
// of it scales past the budget.
absl::StatusOr<Workload> GenerateWorkload(const ReplayConfig& c, const MemoryBudget& budget) {
  constexpr int32_t kSample = 256;
  if (c.requests > kSample) {
    PAGEDKV_ASSIGN_OR_RETURN(
        Workload sample,
        MakeBuiltinWorkload(
            c.workload,
            {.num_requests = kSample, .seed = c.seed, .pin_system_prompts = c.pin_system_prompts}));
    const double per_request =
        static_cast<double>(WorkloadBytes(sample)) / std::max<size_t>(1, sample.requests.size());
    const double total = per_request * c.requests * 2;  // and the vector's growth
    PAGEDKV_RETURN_IF_ERROR(
        budget.Check(total >= 9.2e18 ? INT64_MAX : static_cast<int64_t>(total),
                     absl::StrFormat("--requests %d of the %s workload", c.requests, c.workload),
                     "give fewer requests or raise the limit"));
  }
  return MakeBuiltinWorkload(
      c.workload,
      {.num_requests = c.requests, .seed = c.seed, .pin_system_prompts = c.pin_system_prompts});
}

absl::StatusOr<Workload> LoadWorkload(const ReplayConfig& c, const MemoryBudget& budget) {
  if (!c.trace.empty()) {
    return LoadMooncakeTrace(c.trace, {.trace_block_size = c.trace_block_size,
                                       .skip_bad_lines = c.skip_bad_lines,
                                       .memory_limit_bytes = budget.limit_bytes});
  }
  return GenerateWorkload(c, budget);
}

}  // namespace

namespace {

// The dtype `flag` names for `model`'s KV; InvalidArgument for an unknown one or one its head size
// cannot hold.
absl::StatusOr<DType> PresetKvDType(const ModelPreset& model, const std::string& value,
                                    const char* flag) {
  absl::StatusOr<DType> dtype = ParseDType(value);
  if (!dtype.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", dtype.status().message()));
  }
  if (model.head_dim % KvRowValuesMultiple(*dtype) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", value, ": ", model.name,
                                                   "'s head_dim ", model.head_dim,
                                                   " is not a multiple of its 32-value blocks"));
  }
  return dtype;
}

}  // namespace

absl::StatusOr<ModelPreset> ReplayModelPreset(const std::string& name,
                                              const std::string& kv_cache_dtype,
                                              const std::string& kv_cache_dtype_v) {
  PAGEDKV_ASSIGN_OR_RETURN(ModelPreset model, FindModelPreset(name));
  if (!kv_cache_dtype.empty()) {
    PAGEDKV_ASSIGN_OR_RETURN(model.kv_dtype,
                             PresetKvDType(model, kv_cache_dtype, "--kv-cache-dtype"));
  }
  if (!kv_cache_dtype_v.empty()) {
    PAGEDKV_ASSIGN_OR_RETURN(model.kv_dtype_v,
                             PresetKvDType(model, kv_cache_dtype_v, "--kv-cache-dtype-v"));
  }
  return model;
}

absl::StatusOr<int64_t> GibToBlocks(double gib, const std::string& model_name, int32_t block_size,
                                    const std::string& kv_cache_dtype,
                                    const std::string& kv_cache_dtype_v) {
  PAGEDKV_ASSIGN_OR_RETURN(ModelPreset model,
                           ReplayModelPreset(model_name, kv_cache_dtype, kv_cache_dtype_v));
  if (!std::isfinite(gib) || gib <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--capacity-gib must be a finite number > 0 (got %g)", gib));
  }
  const double per_block = static_cast<double>(model.KvBytesPerToken()) * block_size;
  const double exact_blocks = std::floor(gib * 1073741824.0 / per_block);
  if (exact_blocks > 2147483647.0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--capacity-gib %g is %.3g blocks of %d tokens of %s; at most 2^31 - 1 blocks are "
        "supported, give a smaller capacity",
        gib, exact_blocks, block_size, model.name));
  }
  const auto blocks = static_cast<int64_t>(exact_blocks);
  if (blocks <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--capacity-gib %g holds no block: one %d-token block of %s takes %.0f bytes", gib,
        block_size, model.name, per_block));
  }
  return blocks;
}

MemoryBudget BudgetOf(const ReplayConfig& config) {
  return {.limit_bytes =
              config.max_memory_gib > 0
                  ? static_cast<int64_t>(std::min(config.max_memory_gib, 1e9) * 1073741824.0)
                  : DefaultMemoryLimitBytes()};
}

int64_t SimulatedTierBytes(int64_t blocks) {
  // Hash-map entry, policy node and index (about 128 bytes), twice for ARC's ghost lists.
  constexpr int64_t kBytesPerTierBlock = 256;
  int64_t bytes = 0;
  return CheckedMul(std::max<int64_t>(blocks, 0), kBytesPerTierBlock, &bytes) ? bytes : INT64_MAX;
}

absl::Status CheckPoolsFit(const MemoryBudget& budget, const PoolPlan& plan,
                           absl::string_view capacity_flag) {
  const int64_t pool = BlockPool::EstimateBytes(
      {.num_blocks = static_cast<int32_t>(std::min<int64_t>(plan.capacity_blocks, INT32_MAX)),
       .block_size = plan.block_size});
  int64_t per_instance = 0, total = 0;
  if (!CheckedAdd(pool, SimulatedTierBytes(plan.host_blocks), &per_instance) ||
      !CheckedAdd(per_instance, SimulatedTierBytes(plan.disk_blocks), &per_instance) ||
      !CheckedMul(per_instance, plan.instances, &total) ||
      !CheckedAdd(total, SimulatedTierBytes(plan.remote_blocks), &total) ||
      !CheckedAdd(total, plan.held_bytes, &total)) {
    total = INT64_MAX;
  }
  std::string what =
      absl::StrFormat("a pool of %d blocks (%s)", plan.capacity_blocks, capacity_flag);
  if (plan.host_blocks > 0) {
    absl::StrAppendFormat(&what, " and a host tier of %d blocks (--host-capacity-blocks %d)",
                          plan.host_blocks, plan.host_blocks);
  }
  if (plan.disk_blocks > 0) {
    absl::StrAppendFormat(&what, " and a disk tier of %d blocks (--disk-capacity-blocks %d)",
                          plan.disk_blocks, plan.disk_blocks);
  }
  if (plan.instances > 1)
    absl::StrAppendFormat(&what, " per instance, %d instances", plan.instances);
  if (plan.remote_blocks > 0) {
    absl::StrAppendFormat(&what, ", and a remote tier of %d blocks (--remote-capacity-blocks %d)",
                          plan.remote_blocks, plan.remote_blocks);
  }
  return budget.Check(total, what, "give smaller capacities or raise the limit");
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
          {"block_rules", c.cache_partial_tail ? "cache-partial-tail" : "engine"},
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
  if (c.host_capacity_blocks < 0 || c.remote_capacity_blocks < 0 || c.disk_capacity_blocks < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--host-capacity-blocks, --disk-capacity-blocks and --remote-capacity-blocks must be >= 0 "
        "(got %d, %d and %d)",
        c.host_capacity_blocks, c.disk_capacity_blocks, c.remote_capacity_blocks));
  }
  if (c.pin_system_prompts && (!c.trace.empty() || c.mode != "cache" || c.instances > 1)) {
    return absl::UnimplementedError(
        "--pin-system-prompts applies to cache mode on a built-in workload with one instance "
        "(serve mode, traces and --instances do not carry priorities yet)");
  }
  if (!(c.max_pinned_fraction > 0 && c.max_pinned_fraction <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--max-pinned-fraction must be in (0, 1] (got %g)", c.max_pinned_fraction));
  }
  if (!(c.max_memory_gib >= 0) || !std::isfinite(c.max_memory_gib)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--max-memory-gib must be a finite number >= 0 (got %g)", c.max_memory_gib));
  }
  PAGEDKV_ASSIGN_OR_RETURN(Workload workload, LoadWorkload(c, BudgetOf(c)));
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
    return RunCacheMode(c, workload, out);
  }
  return RunServeMode(c, workload, out);
}

}  // namespace pagedkv::replay
