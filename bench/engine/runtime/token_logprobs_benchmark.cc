// Copyright 2026 The pagedkv Authors.
//
// The CPU cost of one generated token's logprobs (TokenLogprobsOf): log-softmax, rank and top-k
// over one logits row, for SmolLM2's vocabulary (49,152) and Llama 3's (128,256).
#include <cstdint>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "engine/runtime/token_logprobs.h"

namespace pagedkv {
namespace {

void BM_TokenLogprobsOf(benchmark::State& state) {
  const auto vocab = static_cast<size_t>(state.range(0));
  const auto top_k = static_cast<int32_t>(state.range(1));
  std::mt19937 rng(7);
  std::normal_distribution<float> logit(0.0f, 3.0f);
  std::vector<float> row(vocab);
  for (float& x : row) x = logit(rng);
  TokenId token = 0;
  for (auto _ : state) {
    TokenLogprobs lp = TokenLogprobsOf(row, token, top_k);
    benchmark::DoNotOptimize(lp);
    token = (token + 7919) % static_cast<TokenId>(vocab);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(vocab * sizeof(float)));
}
BENCHMARK(BM_TokenLogprobsOf)
    ->Args({49152, 0})
    ->Args({49152, 5})
    ->Args({49152, 20})
    ->Args({128256, 5});

}  // namespace
}  // namespace pagedkv

BENCHMARK_MAIN();
