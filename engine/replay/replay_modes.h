// Copyright 2026 The pagedkv Authors.
//
// Internal to `pagedkv replay` (replay_runner.cc): the two modes RunReplay dispatches to, and the
// helpers they share. Each mode prints a table, or one JSON object with `config.json`.
//
//   PAGEDKV_ASSIGN_OR_RETURN(Workload workload, LoadWorkload(config));
//   PAGEDKV_RETURN_IF_ERROR(RunCacheMode(config, workload, std::cout));
#ifndef PAGEDKV_ENGINE_REPLAY_REPLAY_MODES_H_
#define PAGEDKV_ENGINE_REPLAY_REPLAY_MODES_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/replay/replay_runner.h"
#include "engine/replay/workload.h"
#include "nlohmann/json.hpp"

namespace pagedkv::replay {

// Cache mode: hit rates of one capacity or a sweep of capacities and policies, in file order.
absl::Status RunCacheMode(const ReplayConfig& config, const Workload& workload, std::ostream& out);

// Serve mode: arrivals through the scheduler on a simulated GPU (one or several instances).
absl::Status RunServeMode(const ReplayConfig& config, const Workload& workload, std::ostream& out);

// Blocks that `gib` GiB of KV hold for the model preset `model_name` at `block_size`.
// InvalidArgument when that is no block at all.
absl::StatusOr<int64_t> GibToBlocks(double gib, const std::string& model_name, int32_t block_size);

// OK when every policy is known and, outside cache mode, is not belady.
absl::Status CheckPolicies(const std::vector<std::string>& policies, bool cache_mode);

// The workload fields every JSON report starts with.
nlohmann::json WorkloadJson(const Workload& workload, const ReplayConfig& config);

// One line: name, requests, prompt tokens, trace block size, skipped lines.
std::string Describe(const Workload& workload);

}  // namespace pagedkv::replay

#endif  // PAGEDKV_ENGINE_REPLAY_REPLAY_MODES_H_
