// Copyright 2026 The pagedkv Authors.
#include "engine/tools/replay/workload/memory_budget.h"

#include <unistd.h>

#include "absl/strings/str_format.h"
#include "pagedkv/checked_math.h"
#include "pagedkv/types.h"

namespace pagedkv::replay {
namespace {

// Bytes per expanded block: key (16), seen_before (1), next_use (4), the dense id (4) and last
// request (4) of the numbering pass, the distinct-key copy (16) and index slots (up to 32).
constexpr int64_t kBytesPerExpandedBlock = 80;
// Bytes per expanded request: request_begin, last_block_tokens, input_tokens.
constexpr int64_t kBytesPerExpandedRequest = 24;

double Gib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 30); }

}  // namespace

int64_t DefaultMemoryLimitBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return int64_t{4} << 30;
  return static_cast<int64_t>(pages) * page_size / 2;
}

absl::Status MemoryBudget::Check(int64_t bytes, absl::string_view what,
                                 absl::string_view hint) const {
  if (limit_bytes <= 0 || bytes <= limit_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrFormat("%s needs about %.3g GiB of memory, more than %s %.3g; %s", what, Gib(bytes),
                      flag_name, Gib(limit_bytes), hint));
}

int64_t WorkloadBytes(const Workload& workload) {
  int64_t bytes = static_cast<int64_t>(workload.requests.capacity() * sizeof(ReplayRequest));
  for (const ReplayRequest& request : workload.requests) {
    bytes += static_cast<int64_t>(request.segments.capacity() * sizeof(Segment) +
                                  request.chunks.capacity() * sizeof(ChunkSpan));
  }
  return bytes;
}

ExpansionEstimate EstimateExpansion(const Workload& workload, int32_t block_size) {
  ExpansionEstimate estimate;
  if (block_size <= 0) return estimate;
  for (size_t i = 0; i < workload.requests.size(); ++i) {
    const int64_t input = workload.requests[i].input_length;
    const int64_t blocks = workload.trace_block_size == block_size
                               ? static_cast<int64_t>(workload.requests[i].segments.size())
                               : NumBlocksFor(std::max<int64_t>(input, 0), block_size);
    if (blocks > estimate.largest_blocks) {
      estimate.largest_blocks = blocks;
      estimate.largest_request = i;
    }
    if (!CheckedAdd(estimate.blocks, blocks, &estimate.blocks)) estimate.blocks = INT64_MAX;
  }
  int64_t block_bytes = 0, request_bytes = 0;
  if (!CheckedMul(estimate.blocks, kBytesPerExpandedBlock, &block_bytes) ||
      !CheckedMul(static_cast<int64_t>(workload.requests.size()), kBytesPerExpandedRequest,
                  &request_bytes) ||
      !CheckedAdd(block_bytes, request_bytes, &estimate.bytes)) {
    estimate.bytes = INT64_MAX;
  }
  return estimate;
}

absl::Status CheckExpansionFits(const Workload& workload, int32_t block_size,
                                const MemoryBudget& budget) {
  const ExpansionEstimate estimate = EstimateExpansion(workload, block_size);
  const ReplayRequest* largest =
      workload.requests.empty() ? nullptr : &workload.requests[estimate.largest_request];
  std::string where = absl::StrFormat("request %d", estimate.largest_request);
  if (largest != nullptr && largest->source_line > 0) {
    absl::StrAppendFormat(&where, " (%s line %d)", workload.name, largest->source_line);
  }
  return budget.Check(
      estimate.bytes,
      absl::StrFormat("expanding %s into %d blocks of %d tokens", workload.name, estimate.blocks,
                      block_size),
      absl::StrFormat("the largest is %s with input_length %d (%d blocks); use a larger "
                      "--block-size, fewer requests, or raise the limit",
                      where, largest == nullptr ? 0 : largest->input_length,
                      estimate.largest_blocks));
}

}  // namespace pagedkv::replay
