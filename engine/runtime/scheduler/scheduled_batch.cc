// Copyright 2026 The pagedkv Authors.
//
// SchedulerOptions::Validate and the small ScheduledBatch helpers.
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "pagedkv/runtime/scheduler.h"

namespace pagedkv {

absl::Status SchedulerOptions::Validate() const {
  if (max_num_batched_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SchedulerOptions.max_num_batched_tokens must be >= 1, got ", max_num_batched_tokens));
  }
  if (max_num_seqs < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("SchedulerOptions.max_num_seqs must be >= 1, got ", max_num_seqs));
  }
  if (long_prefill_token_threshold < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("SchedulerOptions.long_prefill_token_threshold must be >= 0 (0 = off), got ",
                     long_prefill_token_threshold));
  }
  if (policy != SchedulingPolicy::kFcfs && policy != SchedulingPolicy::kPriority) {
    return absl::InvalidArgumentError("SchedulerOptions.policy must be kFcfs or kPriority");
  }
  if (cache_aware_max_waiting < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SchedulerOptions.cache_aware_max_waiting must be >= 1, got ", cache_aware_max_waiting));
  }
  if (max_model_len < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SchedulerOptions.max_model_len must be >= 0 (0 = unbounded), got ", max_model_len));
  }
  return absl::OkStatus();
}

std::span<const BlockId> ScheduledBatch::BlockTable(int32_t i) const {
  return std::span<const BlockId>(block_table_ids)
      .subspan(static_cast<size_t>(block_table_start[i]),
               static_cast<size_t>(block_table_start[i + 1] - block_table_start[i]));
}

std::span<const BlockId> ScheduledBatch::GroupBlockTable(int32_t g, int32_t i) const {
  if (g == 0) return BlockTable(i);
  return std::span<const BlockId>(group_block_table_ids[static_cast<size_t>(g - 1)])
      .subspan(static_cast<size_t>(block_table_start[i]),
               static_cast<size_t>(block_table_start[i + 1] - block_table_start[i]));
}

void ScheduledBatch::Clear() {
  token_ids.clear();
  positions.clear();
  slot_mapping.clear();
  sequences.clear();
  query_start_loc.clear();
  block_table_ids.clear();
  block_table_start.clear();
  finished_request_ids.clear();
  preempted_request_ids.clear();
  for (std::vector<BlockId>& ids : group_block_table_ids) ids.clear();
  for (std::vector<int64_t>& slots : group_slot_mapping) slots.clear();
  slot_moves.clear();
  for (std::vector<KvSlotMove>& moves : group_slot_moves) moves.clear();
  block_copies.clear();
  block_size = 0;
  stats = SchedulerStepStats{};
}

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAborted:
      return "aborted";
  }
  return "none";
}

}  // namespace pagedkv
