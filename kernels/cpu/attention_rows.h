// Copyright 2026 The pagedkv Authors.
//
// Which query tokens of a PagedAttention batch walk their keys together (simd::AttendRows):
//   - the tokens of one sequence's prefill chunk, in runs (they read the same blocks);
//   - single tokens of sequences whose block tables begin with the same blocks: the samples of
//     one prompt (`n` > 1) and requests on a cached system prompt, for the keys they share.
// Rows walked together read each chunk of shared keys once instead of once per token; every
// row's output has the same bits either way, so the plan changes speed only.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(const AttentionRowPlan plan, PlanAttentionRows(args, layout, 2));
//   for (const AttentionRowRun& run : plan.runs) ...  // plan.tokens[run.begin, + run.count)
#ifndef PAGEDKV_KERNELS_CPU_ATTENTION_ROWS_H_
#define PAGEDKV_KERNELS_CPU_ATTENTION_ROWS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "pagedkv/kernels/op_args.h"

namespace pagedkv::cpu {

// One query token of the batch and the keys it reads.
struct AttentionRowToken {
  int32_t token = 0;
  int32_t seq = 0;
  int64_t first_key = 0;
  int64_t num_keys = 0;  // end of the keys read
};

// Tokens [begin, begin + count) of the plan, walked together over keys [0, shared_keys).
struct AttentionRowRun {
  int32_t begin = 0;
  int32_t count = 0;
  int64_t shared_keys = 0;  // a multiple of simd::kAttentionChunkKeys; 0 for a lone token
};

struct AttentionRowPlan {
  std::vector<AttentionRowToken> tokens;  // every token of the batch once
  std::vector<AttentionRowRun> runs;
};

// The runs of `args` (validated) over a cache of `cache` (resolved): at most
// simd::kMaxAttentionHeadRows / group tokens a run, and runs split further until there are
// 2 * threads (run, KV head) jobs where the tokens allow. ResourceExhausted when the plan does
// not fit in memory.
absl::StatusOr<AttentionRowPlan> PlanAttentionRows(const PagedAttentionArgs& args,
                                                   const PagedKvLayout& cache, int32_t threads);

}  // namespace pagedkv::cpu

#endif  // PAGEDKV_KERNELS_CPU_ATTENTION_ROWS_H_
