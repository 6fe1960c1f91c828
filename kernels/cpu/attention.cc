// Copyright 2026 The pagedkv Authors.
//
// CPU paged attention: one job per (run of query tokens, KV head), each a pass over the cached
// keys through the block tables for every query head of the GQA group (simd/attention_simd.cc:
// one exp per key and head). A run is one token, or tokens whose keys lie in the same blocks
// (attention_rows.h), which read each chunk of those keys once. Jobs are split over threads; each
// writes only its own heads of `out`, with the same bits whatever the runs.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/content_checks.h"
#include "kernels/cpu/attention_rows.h"
#include "kernels/cpu/simd/simd_kernels.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/threaded_ops.h"
#include "kernels/op_validate.h"
#include "pagedkv/kernels/cpu_ops.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cpu {
namespace {

// Mean multiply-adds of one (token, KV head) pair, for the split threshold (in double: a sum of
// kv_len * tokens over the batch may not fit int64 for unchecked sizes).
double MeanTokenWork(const PagedAttentionArgs& args, const PagedKvLayout& cache) {
  double keys = 0;
  for (int32_t s = 0; s < args.num_seqs; ++s) {
    keys += static_cast<double>(args.kv_lens[s]) *
            (args.query_start_loc[s + 1] - args.query_start_loc[s]);
  }
  return keys / static_cast<double>(std::max<int64_t>(args.num_tokens, 1)) * 2.0 * cache.head_dim *
         (args.num_q_heads / cache.num_kv_heads);
}

}  // namespace

absl::Status PagedAttention(const PagedAttentionArgs& args, ThreadPool* pool) {
  PAGEDKV_RETURN_IF_ERROR(ValidatePagedAttention(args));
  PAGEDKV_RETURN_IF_ERROR(CheckPagedAttentionContents(args));
  const PagedKvLayout cache = args.cache.Resolved();
  const int32_t hd = cache.head_dim;
  const int32_t group = args.num_q_heads / cache.num_kv_heads;
  const float scale = args.scale > 0.0f ? args.scale : 1.0f / std::sqrt(static_cast<float>(hd));
  PAGEDKV_ASSIGN_OR_RETURN(const AttentionRowPlan plan,
                           PlanAttentionRows(args, cache, pool ? pool->num_threads() : 1));
  const auto num_runs = static_cast<int64_t>(plan.runs.size());
  const double tokens_per_run =
      static_cast<double>(plan.tokens.size()) / std::max<int64_t>(num_runs, 1);
  const int64_t min_jobs = MinItemsPerRange(MeanTokenWork(args, cache) * tokens_per_run);
  ParallelFor(pool, num_runs * cache.num_kv_heads, min_jobs, [&](int64_t begin, int64_t end) {
    simd::AttentionGroup rows[simd::kMaxAttentionHeadRows];
    for (int64_t job = begin; job < end; ++job) {
      const AttentionRowRun& run = plan.runs[job / cache.num_kv_heads];
      const auto kvh = static_cast<int32_t>(job % cache.num_kv_heads);
      for (int32_t r = 0; r < run.count; ++r) {
        const AttentionRowToken& t = plan.tokens[run.begin + r];
        const int64_t head = int64_t{t.token} * args.num_q_heads + int64_t{kvh} * group;
        rows[r] = {.q = args.q + head * hd,
                   .out = args.out + head * hd,
                   .table = args.block_tables + int64_t{t.seq} * args.max_blocks_per_seq,
                   .first_key = t.first_key,
                   .num_keys = t.num_keys,
                   .kv_head = kvh,
                   .group = group,
                   .scale = scale};
      }
      simd::AttendRows(cache,
                       {.rows = rows, .num_rows = run.count, .shared_keys = run.shared_keys});
    }
  });
  return absl::OkStatus();
}

absl::Status PagedAttention(const PagedAttentionArgs& args) {
  return PagedAttention(args, nullptr);
}

}  // namespace pagedkv::cpu
