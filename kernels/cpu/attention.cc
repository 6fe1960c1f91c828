// Copyright 2026 The pagedkv Authors.
//
// CPU paged attention: one job per (query token, KV head), each a pass over the sequence's cached
// keys through its block table for every query head of the GQA group (simd/attention_simd.cc: one
// exp per key and head). Jobs are split over threads; each writes only its own heads of `out`.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/attention_split.h"
#include "kernels/content_checks.h"
#include "kernels/cpu/simd/simd_kernels.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/threaded_ops.h"
#include "kernels/op_validate.h"
#include "pagedkv/kernels/cpu_ops.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cpu {
namespace {

// Sequence owning query token t: the s with query_start_loc[s] <= t < query_start_loc[s + 1]
// (empty sequences skipped).
int32_t SequenceOf(const PagedAttentionArgs& args, int64_t t) {
  const int32_t* begin = args.query_start_loc;
  const int32_t* end = args.query_start_loc + args.num_seqs + 1;
  return static_cast<int32_t>(std::upper_bound(begin, end, t) - begin) - 1;
}

// Mean multiply-adds of one (token, KV head) job, for the split threshold (in double: a sum of
// kv_len * tokens over the batch may not fit int64 for unchecked sizes).
int64_t MeanJobWork(const PagedAttentionArgs& args, const PagedKvLayout& cache) {
  double keys = 0;
  for (int32_t s = 0; s < args.num_seqs; ++s) {
    keys += static_cast<double>(args.kv_lens[s]) *
            (args.query_start_loc[s + 1] - args.query_start_loc[s]);
  }
  const double per_job = keys / static_cast<double>(std::max<int64_t>(args.num_tokens, 1)) * 2.0 *
                         cache.head_dim * (args.num_q_heads / cache.num_kv_heads);
  return static_cast<int64_t>(std::clamp(per_job, 1.0, 1e15));
}

}  // namespace

absl::Status PagedAttention(const PagedAttentionArgs& args, ThreadPool* pool) {
  PAGEDKV_RETURN_IF_ERROR(ValidatePagedAttention(args));
  PAGEDKV_RETURN_IF_ERROR(CheckPagedAttentionContents(args));
  const PagedKvLayout cache = args.cache.Resolved();
  const int32_t hd = cache.head_dim;
  const int32_t group = args.num_q_heads / cache.num_kv_heads;
  const float scale = args.scale > 0.0f ? args.scale : 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t num_jobs = args.num_tokens * cache.num_kv_heads;
  const int64_t min_jobs = std::max<int64_t>(1, kMinWorkPerThread / MeanJobWork(args, cache));
  ParallelFor(pool, num_jobs, min_jobs, [&](int64_t begin, int64_t end) {
    for (int64_t job = begin; job < end; ++job) {
      const int64_t t = job / cache.num_kv_heads;
      const auto kvh = static_cast<int32_t>(job % cache.num_kv_heads);
      const int32_t s = SequenceOf(args, t);
      const int64_t head = t * args.num_q_heads + int64_t{kvh} * group;
      const int64_t position = args.positions[t];
      simd::AttendGroup(cache,
                        {.q = args.q + head * hd,
                         .out = args.out + head * hd,
                         .table = args.block_tables + int64_t{s} * args.max_blocks_per_seq,
                         .first_key = AttentionFirstKey(args.causal, args.sliding_window, position),
                         .num_keys = AttentionLastKey(args.causal, position, args.kv_lens[s]) + 1,
                         .kv_head = kvh,
                         .group = group,
                         .scale = scale});
    }
  });
  return absl::OkStatus();
}

absl::Status PagedAttention(const PagedAttentionArgs& args) {
  return PagedAttention(args, nullptr);
}

}  // namespace pagedkv::cpu
