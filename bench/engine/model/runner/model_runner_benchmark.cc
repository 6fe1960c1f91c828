// Copyright 2026 The pagedkv Authors.
//
// Model runner benchmarks (CPU backend, one thread): single-sequence greedy decode through the
// paged runner against the plain contiguous-KV implementation of the same model in the same
// run (the cost of paging alone, no scheduler), and prefill throughput.
//
//   build/bench/engine/model/model_runner_benchmark --benchmark_counters_tabular=true
#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "bench/engine/model/bench_models.h"
#include "bench/engine/model/plain_decode_benchmark.h"
#include "benchmark/benchmark.h"
#include "engine/model/runner/model_runner.h"

namespace pagedkv::bench {
namespace {

constexpr int32_t kBlockSize = 16;

void BM_RunnerDecode(benchmark::State& state, const std::string& model) {
  std::shared_ptr<const ModelWeights> w = BenchModel(model);
  if (w == nullptr) return state.SkipWithError("model not available");
  const int n = DecodeLength(*w);
  const int32_t num_blocks = (n + kBlockSize - 1) / kBlockSize;
  auto runner = ModelRunner::Create(w, {.backend = BackendKind::kCpu,
                                        .num_blocks = num_blocks,
                                        .block_size = kBlockSize,
                                        .num_threads = 1});
  if (!runner.ok()) return state.SkipWithError(std::string(runner.status().message()).c_str());
  std::vector<BlockId> table(static_cast<size_t>(num_blocks));
  std::iota(table.begin(), table.end(), 0);
  const SamplingParams greedy[1] = {{}};
  const int32_t qsl[2] = {0, 1};
  const int32_t logits_index[1] = {0};
  ModelOutput out;
  for (auto _ : state) {
    TokenId token = 1;
    for (int pos = 0; pos < n; ++pos) {
      const int32_t position = pos;
      const int64_t slot =
          int64_t{table[static_cast<size_t>(pos / kBlockSize)]} * kBlockSize + pos % kBlockSize;
      const int32_t kv_len = pos + 1;
      ModelInput in{.token_ids = absl::MakeConstSpan(&token, 1),
                    .positions = absl::MakeConstSpan(&position, 1),
                    .slot_mapping = absl::MakeConstSpan(&slot, 1),
                    .query_start_loc = qsl,
                    .kv_lens = absl::MakeConstSpan(&kv_len, 1),
                    .block_tables = table,
                    .max_blocks_per_seq = num_blocks,
                    .logits_indices = logits_index};
      if (!(*runner)->Forward(in, {.sampling = greedy}, &out).ok()) {
        return state.SkipWithError("forward failed");
      }
      token = out.sampled[0];
    }
    benchmark::DoNotOptimize(token);
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_RunnerPrefill(benchmark::State& state, const std::string& model) {
  std::shared_ptr<const ModelWeights> w = BenchModel(model);
  if (w == nullptr) return state.SkipWithError("model not available");
  const int n = w->config().seq_len;
  const int32_t num_blocks = (n + kBlockSize - 1) / kBlockSize;
  auto runner = ModelRunner::Create(w, {.backend = BackendKind::kCpu,
                                        .num_blocks = num_blocks,
                                        .block_size = kBlockSize,
                                        .num_threads = 1});
  if (!runner.ok()) return state.SkipWithError(std::string(runner.status().message()).c_str());
  std::vector<BlockId> table(static_cast<size_t>(num_blocks));
  std::iota(table.begin(), table.end(), 0);
  std::vector<TokenId> tokens(static_cast<size_t>(n));
  std::vector<int32_t> positions(static_cast<size_t>(n));
  std::vector<int64_t> slots(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    tokens[static_cast<size_t>(i)] = (i * 7919) % w->config().vocab_size;
    positions[static_cast<size_t>(i)] = i;
    slots[static_cast<size_t>(i)] = i;
  }
  const int32_t qsl[2] = {0, n};
  const int32_t kv_len[1] = {n};
  const int32_t last[1] = {n - 1};
  ModelInput in{.token_ids = tokens,
                .positions = positions,
                .slot_mapping = slots,
                .query_start_loc = qsl,
                .kv_lens = kv_len,
                .block_tables = table,
                .max_blocks_per_seq = num_blocks,
                .logits_indices = last};
  ModelOutput out;
  for (auto _ : state) {
    if (!(*runner)->Forward(in, {.return_logits = true}, &out).ok()) {
      return state.SkipWithError("forward failed");
    }
    benchmark::DoNotOptimize(out.logits.data());
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK_CAPTURE(BM_PlainDecode, aidreams260K, "aidreams260K")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_RunnerDecode, aidreams260K, "aidreams260K")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlainDecode, random15M, "random15M")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_RunnerDecode, random15M, "random15M")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_RunnerPrefill, aidreams260K, "aidreams260K")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_RunnerPrefill, random15M, "random15M")->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pagedkv::bench
