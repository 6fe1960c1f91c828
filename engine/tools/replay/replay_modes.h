// Copyright 2026 The pagedkv Authors.
//
// Internal to `pagedkv replay` (replay_runner.cc): the two modes RunReplay dispatches to, and the
// helpers they share. Each mode prints a table, or one JSON object with `config.json`.
//
//   PAGEDKV_ASSIGN_OR_RETURN(Workload workload, LoadWorkload(config));
//   PAGEDKV_RETURN_IF_ERROR(RunCacheMode(config, workload, std::cout));
#ifndef PAGEDKV_ENGINE_TOOLS_REPLAY_REPLAY_MODES_H_
#define PAGEDKV_ENGINE_TOOLS_REPLAY_REPLAY_MODES_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/tools/replay/replay_runner.h"
#include "engine/tools/replay/serve_mode/serve_replay.h"
#include "engine/tools/replay/workload/memory_budget.h"
#include "engine/tools/replay/workload/workload.h"
#include "nlohmann/json.hpp"

namespace pagedkv::replay {

// Cache mode: hit rates of one capacity or a sweep of capacities and policies, in file order.
absl::Status RunCacheMode(const ReplayConfig& config, const Workload& workload, std::ostream& out);

// Cache mode with --hybrid-kv (hybrid_cache_mode.cc): KV memory per request and hit rates of
// the model's KV cache groups against the same model treated as all full attention.
absl::Status RunHybridCacheMode(const ReplayConfig& config, const Workload& workload,
                                std::ostream& out);

// Serve mode: arrivals through the scheduler on a simulated GPU (one or several instances).
absl::Status RunServeMode(const ReplayConfig& config, const Workload& workload, std::ostream& out);

// Serve mode with --hybrid-kv (hybrid_serve_mode.cc): the scheduler over a KvCacheManager (several
// groups) with the model's KV cache groups, against the same model treated as all full attention at
// the same KV memory; throughput, TTFT, running requests, KV per request and hit rates. `options`
// comes from serve mode's flag handling (capacity in full-model blocks).
absl::Status RunHybridServeMode(const ReplayConfig& config, const Workload& workload,
                                ServeReplayOptions options, std::ostream& out);

// The JSON fields of a serve report after the workload's: mode, gpu, model, policy.
nlohmann::json ServeBaseJson(const ReplayConfig& config, const Workload& workload,
                             const ServeReplayOptions& options);

// The first lines of a serve report: the workload, the model on the GPU, block size and policy.
std::string ServeHeader(const ReplayConfig& config, const Workload& workload,
                        const ServeReplayOptions& options);

// Blocks that `gib` GiB of KV hold for the model preset `model_name` at `block_size`, its KV
// stored as `kv_cache_dtype` ("": the preset's bf16), V as `kv_cache_dtype_v` when given ("": as
// K). InvalidArgument when that is no block at all, or for an unknown dtype or one the preset's
// head size cannot hold.
absl::StatusOr<int64_t> GibToBlocks(double gib, const std::string& model_name, int32_t block_size,
                                    const std::string& kv_cache_dtype = "",
                                    const std::string& kv_cache_dtype_v = "");

// The model preset `name` with its KV stored as `kv_cache_dtype` ("": as the preset says), V as
// `kv_cache_dtype_v` when given.
absl::StatusOr<ModelPreset> ReplayModelPreset(const std::string& name,
                                              const std::string& kv_cache_dtype,
                                              const std::string& kv_cache_dtype_v = "");

// OK when every policy is known and, outside cache mode, is not belady.
absl::Status CheckPolicies(const std::vector<std::string>& policies, bool cache_mode);

// The workload fields every JSON report starts with.
nlohmann::json WorkloadJson(const Workload& workload, const ReplayConfig& config);

// One line: name, requests, prompt tokens, trace block size, skipped lines.
std::string Describe(const Workload& workload);

// The budget of `config.max_memory_gib` (half the machine's memory when 0).
MemoryBudget BudgetOf(const ReplayConfig& config);

// What a replay holds per block of pool and of simulated tier, for CheckPoolsFit.
struct PoolPlan {
  int64_t capacity_blocks = 0;  // device pool blocks, per instance
  int32_t block_size = 16;
  int64_t instances = 1;      // instances, each with a pool and a host tier
  int64_t host_blocks = 0;    // simulated host tier blocks, per instance
  int64_t disk_blocks = 0;    // simulated disk tier blocks, per instance
  int64_t remote_blocks = 0;  // simulated remote tier blocks, one tier shared by every instance
  int64_t held_bytes = 0;     // already held (the workload, its expansion)
};

// Bytes a simulated tier (a HostTier without values, its policy and ARC's ghost lists) holds
// when full of `blocks` blocks.
int64_t SimulatedTierBytes(int64_t blocks);

// Checks that the pools and tiers of `plan` fit `budget`; the message names `capacity_flag` for
// the pool and --host-capacity-blocks / --remote-capacity-blocks for the tiers.
absl::Status CheckPoolsFit(const MemoryBudget& budget, const PoolPlan& plan,
                           absl::string_view capacity_flag);

}  // namespace pagedkv::replay

#endif  // PAGEDKV_ENGINE_TOOLS_REPLAY_REPLAY_MODES_H_
