// Copyright 2026 The pagedkv Authors.
//
// Memory budgets for `pagedkv replay`: before a workload is loaded, generated, expanded into
// blocks or replayed through a pool, its size is estimated and compared with a limit
// (--max-memory-gib, by default half the machine's memory). Over the limit, the step is refused
// with ResourceExhausted naming the trace line or the flag responsible, instead of growing until
// the allocator aborts.
//
// Example:
//   MemoryBudget budget{.limit_bytes = DefaultMemoryLimitBytes()};
//   PAGEDKV_RETURN_IF_ERROR(budget.Check(ExpansionEstimate(workload, 16), "block expansion"));
#ifndef PAGEDKV_ENGINE_TOOLS_REPLAY_WORKLOAD_MEMORY_BUDGET_H_
#define PAGEDKV_ENGINE_TOOLS_REPLAY_WORKLOAD_MEMORY_BUDGET_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "engine/tools/replay/workload/workload.h"
#include "pagedkv/export.h"

namespace pagedkv::replay {

// Half of the machine's physical memory (4 GiB when it cannot be read).
PAGEDKV_EXPORT int64_t DefaultMemoryLimitBytes();

struct PAGEDKV_EXPORT MemoryBudget {
  int64_t limit_bytes = 0;                     // <= 0: no limit
  std::string flag_name = "--max-memory-gib";  // the flag that sets the limit, for messages

  // OK when `bytes` fit the limit; else ResourceExhausted: "<what> needs about X GiB, more than
  // <flag_name> Y; <hint>".
  absl::Status Check(int64_t bytes, absl::string_view what, absl::string_view hint) const;
};

// Host bytes the requests of `workload` hold (segments and chunks included).
PAGEDKV_EXPORT int64_t WorkloadBytes(const Workload& workload);

// Host bytes ExpandWorkload will hold for `workload` at `block_size`, and the request with the
// most blocks (for the message).
struct PAGEDKV_EXPORT ExpansionEstimate {
  int64_t bytes = 0;
  int64_t blocks = 0;          // blocks of every request
  size_t largest_request = 0;  // index of the request with the most blocks
  int64_t largest_blocks = 0;  // its blocks
};
PAGEDKV_EXPORT ExpansionEstimate EstimateExpansion(const Workload& workload, int32_t block_size);

// Checks EstimateExpansion against `budget`, naming the largest request (and its trace line when
// it has one).
PAGEDKV_EXPORT absl::Status CheckExpansionFits(const Workload& workload, int32_t block_size,
                                               const MemoryBudget& budget);

}  // namespace pagedkv::replay

#endif  // PAGEDKV_ENGINE_TOOLS_REPLAY_WORKLOAD_MEMORY_BUDGET_H_
