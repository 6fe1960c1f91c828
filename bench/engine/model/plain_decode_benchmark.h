// Copyright 2026 The pagedkv Authors.
//
// The shared floor of the decode benchmarks: single-sequence greedy decode from BOS through
// PlainLlama (contiguous KV, no paging). The runner and engine benchmarks register it beside their
// own decode so each run reports both.
//
// Example:
//   BENCHMARK_CAPTURE(BM_PlainDecode, random15M, "random15M");
#ifndef PAGEDKV_BENCH_ENGINE_MODEL_PLAIN_DECODE_BENCHMARK_H_
#define PAGEDKV_BENCH_ENGINE_MODEL_PLAIN_DECODE_BENCHMARK_H_

#include <algorithm>
#include <memory>
#include <string>

#include "bench/engine/model/bench_models.h"
#include "bench/engine/model/plain_llama.h"
#include "benchmark/benchmark.h"

namespace pagedkv::bench {

// Tokens decoded per iteration: the whole context, at most 200.
inline int DecodeLength(const ModelWeights& w) { return std::min(w.config().seq_len, 200); }

inline void BM_PlainDecode(benchmark::State& state, const std::string& model) {
  std::shared_ptr<const ModelWeights> w = BenchModel(model);
  if (w == nullptr) return state.SkipWithError("model not available");
  PlainLlama plain(*w);
  const int n = DecodeLength(*w);
  for (auto _ : state) {
    TokenId token = 1;
    for (int pos = 0; pos < n; ++pos) token = PlainLlama::Argmax(plain.Forward(token, pos));
    benchmark::DoNotOptimize(token);
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace pagedkv::bench

#endif  // PAGEDKV_BENCH_ENGINE_MODEL_PLAIN_DECODE_BENCHMARK_H_
