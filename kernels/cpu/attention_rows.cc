// Copyright 2026 The pagedkv Authors.
#include "kernels/cpu/attention_rows.h"

#include <algorithm>
#include <compare>
#include <cstdint>
#include <new>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/attention_split.h"
#include "kernels/cpu/simd/simd_kernels.h"

namespace pagedkv::cpu {
namespace {

constexpr int64_t kChunk = simd::kAttentionChunkKeys;

int64_t RoundDownToChunk(int64_t keys) { return keys / kChunk * kChunk; }
int64_t RoundUpToChunk(int64_t keys) { return (keys + kChunk - 1) / kChunk * kChunk; }

const int32_t* TableOf(const PagedAttentionArgs& args, const AttentionRowToken& t) {
  return args.block_tables + int64_t{t.seq} * args.max_blocks_per_seq;
}

int64_t BlocksRead(const AttentionRowToken& t, int32_t block_size) {
  return (t.num_keys + block_size - 1) / block_size;
}

// Keys [0, result) that a and b both read and find in the same blocks.
int64_t CommonKeys(const PagedAttentionArgs& args, int32_t block_size, const AttentionRowToken& a,
                   const AttentionRowToken& b) {
  const int64_t keys = std::min(a.num_keys, b.num_keys);
  const int64_t blocks = (keys + block_size - 1) / block_size;
  const int32_t* ta = TableOf(args, a);
  const int32_t* tb = TableOf(args, b);
  int64_t same = 0;
  while (same < blocks && ta[same] == tb[same]) ++same;
  return std::min(same * block_size, keys);
}

// Runs of up to max_rows tokens of one sequence's chunk (they share its whole table) when every
// one reads from key 0 (no sliding window cut), else one run per token.
void AddSequenceRuns(const std::vector<AttentionRowToken>& seq_tokens, int32_t max_rows,
                     AttentionRowPlan* plan) {
  const bool from_zero = std::all_of(seq_tokens.begin(), seq_tokens.end(),
                                     [](const AttentionRowToken& t) { return t.first_key == 0; });
  const auto n = static_cast<int32_t>(seq_tokens.size());
  const int32_t per_run = from_zero ? max_rows : 1;
  for (int32_t i = 0; i < n; i += per_run) {
    AttentionRowRun run{.begin = static_cast<int32_t>(plan->tokens.size()),
                        .count = std::min(per_run, n - i)};
    for (int32_t k = i; k < i + run.count; ++k) {
      plan->tokens.push_back(seq_tokens[k]);
      if (run.count > 1) run.shared_keys = std::max(run.shared_keys, seq_tokens[k].num_keys);
    }
    run.shared_keys = RoundUpToChunk(run.shared_keys);
    plan->runs.push_back(run);
  }
}

// Runs of single tokens of different sequences: sorted by their tables, neighbours join the run
// of the first token while they share with it at least one chunk of leading keys, and no fewer
// than the first to join did (a latecomer sharing less starts the next run).
void AddCrossSequenceRuns(const PagedAttentionArgs& args, int32_t block_size, int32_t max_rows,
                          std::vector<AttentionRowToken>& lone, AttentionRowPlan* plan) {
  std::sort(lone.begin(), lone.end(), [&](const AttentionRowToken& a, const AttentionRowToken& b) {
    const int32_t* ta = TableOf(args, a);
    const int32_t* tb = TableOf(args, b);
    const auto order = std::lexicographical_compare_three_way(ta, ta + BlocksRead(a, block_size),
                                                              tb, tb + BlocksRead(b, block_size));
    return order != 0 ? order < 0 : a.seq < b.seq;
  });
  for (size_t i = 0; i < lone.size();) {
    int64_t shared = 0;  // set by the first to join; later ones must share as much
    size_t j = i + 1;
    for (; j < lone.size() && j - i < static_cast<size_t>(max_rows); ++j) {
      const int64_t common = RoundDownToChunk(CommonKeys(args, block_size, lone[i], lone[j]));
      if (common < std::max(kChunk, shared)) break;
      shared = common;
    }
    plan->runs.push_back({.begin = static_cast<int32_t>(plan->tokens.size()),
                          .count = static_cast<int32_t>(j - i),
                          .shared_keys = j - i > 1 ? shared : 0});
    plan->tokens.insert(plan->tokens.end(), lone.begin() + static_cast<int64_t>(i),
                        lone.begin() + static_cast<int64_t>(j));
    i = j;
  }
}

// Halves the largest runs until `jobs` (run, KV head) pairs reach 2 * threads or no run has two
// tokens. A part of a run shares what the whole did.
void SplitForThreads(int32_t kv_heads, int32_t threads, AttentionRowPlan* plan) {
  while (static_cast<int64_t>(plan->runs.size()) * kv_heads < int64_t{2} * threads) {
    auto largest = std::max_element(
        plan->runs.begin(), plan->runs.end(),
        [](const AttentionRowRun& a, const AttentionRowRun& b) { return a.count < b.count; });
    if (largest == plan->runs.end() || largest->count < 2) return;
    const int32_t half = largest->count / 2;
    const AttentionRowRun tail{.begin = largest->begin + half,
                               .count = largest->count - half,
                               .shared_keys = largest->shared_keys};
    largest->count = half;
    plan->runs.push_back(tail);
  }
}

}  // namespace

absl::StatusOr<AttentionRowPlan> PlanAttentionRows(const PagedAttentionArgs& args,
                                                   const PagedKvLayout& cache, int32_t threads) {
  const int32_t group = args.num_q_heads / cache.num_kv_heads;
  const int32_t max_rows = std::max(1, simd::kMaxAttentionHeadRows / group);
  try {
    AttentionRowPlan plan;
    plan.tokens.reserve(static_cast<size_t>(args.num_tokens));
    std::vector<AttentionRowToken> lone;
    std::vector<AttentionRowToken> seq_tokens;
    for (int32_t s = 0; s < args.num_seqs; ++s) {
      seq_tokens.clear();
      for (int32_t t = args.query_start_loc[s]; t < args.query_start_loc[s + 1]; ++t) {
        const int64_t position = args.positions[t];
        seq_tokens.push_back(
            {.token = t,
             .seq = s,
             .first_key = AttentionFirstKey(args.causal, args.sliding_window, position),
             .num_keys = AttentionLastKey(args.causal, position, args.kv_lens[s]) + 1});
      }
      const bool shares = seq_tokens.size() == 1 && seq_tokens[0].first_key == 0 &&
                          seq_tokens[0].num_keys >= 2 * kChunk;
      if (shares) {
        lone.push_back(seq_tokens[0]);
      } else {
        AddSequenceRuns(seq_tokens, max_rows, &plan);
      }
    }
    AddCrossSequenceRuns(args, cache.block_size, max_rows, lone, &plan);
    SplitForThreads(cache.num_kv_heads, threads, &plan);
    return plan;
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("PagedAttention: out of host memory for its job plan");
  }
}

}  // namespace pagedkv::cpu
