// Copyright 2026 The pagedkv Authors.
#include "engine/model/runner/batch_parts.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace pagedkv {
namespace {

// Work of a sequence with n query tokens whose KV holds kv_len tokens after the step.
double SequenceWork(int64_t n, int64_t kv_len, const PartCosts& costs) {
  const double keys = static_cast<double>(n) * static_cast<double>(kv_len) -
                      static_cast<double>(n) * static_cast<double>(n - 1) / 2.0;
  return static_cast<double>(n) * costs.per_token + std::max(keys, 0.0) * costs.per_key;
}

}  // namespace

std::vector<BatchPart> SplitBatch(absl::Span<const int32_t> query_start_loc,
                                  absl::Span<const int32_t> kv_lens, int32_t max_parts,
                                  const PartCosts& costs) {
  const auto num_seqs = static_cast<int32_t>(kv_lens.size());
  std::vector<double> work_before(static_cast<size_t>(num_seqs) + 1, 0.0);  // prefix sums
  for (int32_t s = 0; s < num_seqs; ++s) {
    const int32_t n = query_start_loc[s + 1] - query_start_loc[s];
    work_before[s + 1] = work_before[s] + SequenceWork(n, kv_lens[s], costs);
  }
  const double total = work_before[num_seqs];
  std::vector<BatchPart> parts;
  int32_t first = 0;
  for (int32_t p = 1; p <= max_parts && first < num_seqs; ++p) {
    // The part ends at the sequence boundary nearest p / max_parts of the total work (the last
    // part takes the rest); sequences without tokens go with the part before them.
    int32_t end = first + 1;
    if (p == max_parts) {
      end = num_seqs;
    } else {
      const double goal = total * p / max_parts;
      while (end < num_seqs && work_before[end] < goal) ++end;
      if (end - 1 > first && goal - work_before[end - 1] < work_before[end] - goal) --end;
    }
    while (end < num_seqs && query_start_loc[end + 1] == query_start_loc[end]) ++end;
    const BatchPart part{.first_seq = first,
                         .end_seq = end,
                         .first_token = query_start_loc[first],
                         .end_token = query_start_loc[end]};
    const bool merge = !parts.empty() && (part.end_token == part.first_token ||
                                          parts.back().end_token == parts.back().first_token);
    if (merge) {  // a part without tokens joins its neighbour
      parts.back().end_seq = part.end_seq;
      parts.back().end_token = part.end_token;
    } else {
      parts.push_back(part);
    }
    first = end;
  }
  return parts;
}

}  // namespace pagedkv
